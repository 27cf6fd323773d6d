//! The evidence policy against a simulated provider, on tokio's paused
//! clock: a token bucket that answers every call with OpenAI-style headers
//! (`limit` = its burst, `remaining` rounded down, `reset` = time until
//! full) and every refusal with `retry-after-ms`, reached with network
//! jitter. Each scenario is one of issue 11's, in miniature.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use sluice_limit::headers::{Quota, RateLimitHeaders};
use sluice_limit::{AdaptiveConfig, Limit, Limiter, Rules};
use tokio::time::Instant;

/// The provider's bucket and what it answered.
struct Provider {
    rate: f64,
    burst: f64,
    tokens: f64,
    at: Instant,
    admitted: u64,
    refused: u64,
    /// Refusals from `count_from` on.
    refused_late: u64,
    admitted_late: u64,
    count_from: Instant,
}

impl Provider {
    fn new(rate: f64, burst: f64, count_from: Instant) -> Self {
        Provider {
            rate,
            burst,
            tokens: burst,
            at: Instant::now(),
            admitted: 0,
            refused: 0,
            refused_late: 0,
            admitted_late: 0,
            count_from,
        }
    }

    fn refill(&mut self) {
        let now = Instant::now();
        self.tokens = (self.tokens + (now - self.at).as_secs_f64() * self.rate).min(self.burst);
        self.at = now;
    }

    /// From `count_from` on, for `secs`: under 1 % refused and at least
    /// 95 % of `rate`.
    fn settled_at(&self, rate: f64, secs: f64) {
        let late = self.admitted_late + self.refused_late;
        assert!(
            self.refused_late as f64 <= 0.01 * late as f64,
            "refused {} of {late} once settled",
            self.refused_late
        );
        assert!(
            self.admitted_late as f64 >= 0.95 * rate * secs,
            "admitted {} of {rate}/s × {secs} s once settled",
            self.admitted_late
        );
    }

    fn set_rate(&mut self, rate: f64) {
        self.refill();
        self.rate = rate;
    }

    /// One call arrives: its status and headers.
    fn arrive(&mut self) -> (u16, RateLimitHeaders) {
        self.refill();
        let late = Instant::now() >= self.count_from;
        let status = if self.tokens + 1e-9 >= 1.0 {
            self.tokens -= 1.0;
            self.admitted += 1;
            self.admitted_late += u64::from(late);
            200
        } else {
            self.refused += 1;
            self.refused_late += u64::from(late);
            429
        };
        let left = self.tokens.max(0.0);
        let reset = Duration::from_millis(((self.burst - left) / self.rate * 1000.0).ceil() as u64);
        let retry = ((1.0 - left) / self.rate * 1000.0).ceil().max(1.0) as u64;
        let headers = RateLimitHeaders {
            requests: Some(Quota {
                limit: Some(self.burst as u64),
                remaining: Some((left + 1e-9).floor() as u64),
                reset: Some(reset),
            }),
            retry_after: (status == 429).then(|| Duration::from_millis(retry)),
            refills: true,
            ..Default::default()
        };
        (status, headers)
    }
}

/// A small deterministic generator for the jitter.
fn jitter(seed: &mut u64, max_ms: u64) -> Duration {
    *seed = seed
        .wrapping_mul(6_364_136_223_846_793_005)
        .wrapping_add(1_442_695_040_888_963_407);
    Duration::from_micros((*seed >> 33) % (max_ms * 1_000 + 1))
}

struct Run {
    limiter: Limiter,
    provider: Arc<Mutex<Provider>>,
}

/// `agents` closed-loop callers for `secs` through a limiter configured
/// with `configured`, against the provider; `change` may alter the
/// provider mid-run. Calls reach the provider 0–`jitter_ms` after they
/// are let go, and are answered 20 ms later.
async fn run(
    configured: Limit,
    adaptive: AdaptiveConfig,
    provider: Provider,
    secs: u64,
    jitter_ms: u64,
    change: impl FnOnce(Arc<Mutex<Provider>>) + Send + 'static,
) -> Run {
    let limiter = Limiter::builder()
        .rules(Rules::new().exact("m", configured))
        .adaptive(adaptive)
        .build()
        .unwrap();
    let provider = Arc::new(Mutex::new(provider));
    let end = Instant::now() + Duration::from_secs(secs);
    let p = provider.clone();
    tokio::spawn(async move { change(p) });
    let callers: Vec<_> = (0..40u64)
        .map(|i| {
            let (l, provider) = (limiter.clone(), provider.clone());
            tokio::spawn(async move {
                let mut seed = i + 1;
                while Instant::now() < end
                    && let Ok(grant) = l.acquire("m", 1, Some(end)).await
                {
                    tokio::time::sleep(jitter(&mut seed, jitter_ms)).await;
                    let (status, headers) = provider.lock().unwrap().arrive();
                    if std::env::var("DBG").is_ok() {
                        eprintln!(
                            "{:?} {status} {:?}",
                            Instant::now(),
                            l.get_capacity("m").map(|c| (
                                c.total,
                                c.window,
                                c.jitter_margin,
                                c.reason
                            ))
                        );
                    }
                    tokio::time::sleep(Duration::from_millis(20)).await;
                    l.observe_answer(&grant, Some("m"), None, status, &headers)
                        .unwrap();
                }
            })
        })
        .collect();
    for c in callers {
        c.await.unwrap();
    }
    Run { limiter, provider }
}

fn with_margin(ms: u64) -> AdaptiveConfig {
    AdaptiveConfig {
        jitter_margin: Duration::from_millis(ms),
        ..Default::default()
    }
}

#[tokio::test(start_paused = true)]
async fn the_exact_limit_is_used_whole_and_a_collision_never_cuts_it() {
    // 50/s burst 10 for 30 s, reached with up to 10 ms of jitter.
    exact_limit(10).await;
    // With 40 ms of jitter the limiter, starting with no margin at all,
    // must learn one.
    exact_limit(40).await;
}

async fn exact_limit(jitter_ms: u64) {
    let start = Instant::now();
    let r = run(
        Limit::per_second(50).burst(10),
        with_margin(0),
        Provider::new(50.0, 10.0, start),
        30,
        jitter_ms,
        |_| {},
    )
    .await;
    let p = r.provider.lock().unwrap();
    let capacity = 50 * 30 + 10;
    eprintln!(
        "jitter {jitter_ms} ms: admitted {} refused {}",
        p.admitted, p.refused
    );
    assert!(
        p.admitted as f64 >= 0.99 * capacity as f64,
        "admitted {} of {capacity}",
        p.admitted
    );
    assert!(
        p.refused as f64 <= 0.001 * (p.admitted + p.refused) as f64 + 3.0,
        "refused {} of {}",
        p.refused,
        p.admitted + p.refused
    );
    let c = r.limiter.get_capacity("m").unwrap();
    assert_eq!((c.total, c.configured), (50, 50), "{c:?}");
    if p.refused > 0 {
        assert!(
            c.jitter_margin >= Duration::from_millis(10),
            "learned: {c:?}"
        );
    }
}

#[tokio::test(start_paused = true)]
async fn a_limit_configured_too_high_follows_the_announced_one() {
    // Configured 50/s; the provider allows 30/s. After 5 s: under 1 % 429s
    // and at least 95 % of 30/s.
    let start = Instant::now();
    let r = run(
        Limit::per_second(50).burst(10),
        with_margin(20),
        Provider::new(30.0, 10.0, start + Duration::from_secs(5)),
        30,
        10,
        |_| {},
    )
    .await;
    r.provider.lock().unwrap().settled_at(30.0, 25.0);
    let c = r.limiter.get_capacity("m").unwrap();
    let rate = c.per_second();
    assert!((28.5..=30.0).contains(&rate), "{rate} {c:?}");
    assert!(c.reason.unwrap_or_default().contains("announce"));
}

#[tokio::test(start_paused = true)]
async fn a_provider_that_lowers_then_restores_its_limit_is_followed() {
    let start = Instant::now();
    let r = run(
        Limit::per_second(50).burst(10),
        with_margin(20),
        Provider::new(50.0, 10.0, start),
        30,
        10,
        |p| {
            tokio::spawn(async move {
                tokio::time::sleep(Duration::from_secs(10)).await;
                p.lock().unwrap().set_rate(25.0);
                tokio::time::sleep(Duration::from_secs(10)).await;
                p.lock().unwrap().set_rate(50.0);
            });
        },
    )
    .await;
    let p = r.provider.lock().unwrap();
    let capacity = 50.0 * 20.0 + 25.0 * 10.0 + 10.0;
    assert!(
        p.admitted as f64 >= 0.9 * capacity,
        "admitted {} of {capacity}",
        p.admitted
    );
    let c = r.limiter.get_capacity("m").unwrap();
    assert_eq!(c.per_second(), 50.0, "back to the configured rate: {c:?}");
}

#[tokio::test(start_paused = true)]
async fn an_unknown_limit_is_learned() {
    // Nothing known: an effectively unlimited limit to learn down from.
    let start = Instant::now();
    let r = run(
        Limit::per_second(1_000_000).burst(1_000_000),
        with_margin(20),
        Provider::new(20.0, 20.0, start + Duration::from_secs(10)),
        30,
        10,
        |_| {},
    )
    .await;
    r.provider.lock().unwrap().settled_at(20.0, 20.0);
}

#[tokio::test(start_paused = true)]
async fn a_guessed_limit_follows_a_higher_announced_one_and_a_configured_one_does_not() {
    // A built-in default of 3/s, marked as a guess; the provider allows
    // 30/s and says so in its headers. After 10 s: at least 95 % of 30/s.
    let start = Instant::now();
    let guess = Limit::per_second(3).burst(10).provisional(true);
    let r = run(
        guess,
        with_margin(20),
        Provider::new(30.0, 10.0, start + Duration::from_secs(10)),
        30,
        10,
        |_| {},
    )
    .await;
    r.provider.lock().unwrap().settled_at(30.0, 20.0);
    let c = r.limiter.get_capacity("m").unwrap();
    assert!((28.5..=30.0).contains(&c.per_second()), "{c:?}");
    assert!(
        c.reason.clone().unwrap_or_default().contains("announce"),
        "{c:?}"
    );

    // The same 3/s configured by a user is a ceiling.
    let r = run(
        Limit::per_second(3).burst(10),
        with_margin(20),
        Provider::new(30.0, 10.0, start),
        10,
        10,
        |_| {},
    )
    .await;
    let c = r.limiter.get_capacity("m").unwrap();
    assert_eq!(c.per_second(), 3.0, "{c:?}");
    assert_eq!(r.provider.lock().unwrap().refused, 0);
}

#[tokio::test(start_paused = true)]
async fn without_headers_429s_that_keep_coming_cut_and_clean_seconds_restore() {
    let l = Limiter::builder()
        .rules(Rules::new().exact("m", Limit::per_second(40)))
        .build()
        .unwrap();
    let refused = RateLimitHeaders {
        retry_after: Some(Duration::from_millis(50)),
        ..Default::default()
    };
    // One collision: a pause, no cut.
    let g = l.try_acquire("m", 1).unwrap();
    l.observe_answer(&g, Some("m"), None, 429, &refused)
        .unwrap();
    let c = l.get_capacity("m").unwrap();
    assert_eq!(c.total, 40);
    assert!(c.paused_for.is_some());
    // 429s on calls let go after it, three in a row: a cut.
    for _ in 0..3 {
        tokio::time::sleep(Duration::from_millis(60)).await;
        let g = l.try_acquire("m", 1).unwrap();
        l.observe_answer(&g, Some("m"), None, 429, &refused)
            .unwrap();
    }
    let c = l.get_capacity("m").unwrap();
    assert_eq!(c.total, 20, "{c:?}");
    assert!(c.reason.unwrap_or_default().contains("kept coming"));
    // Clean seconds bring it back within seconds, not minutes.
    tokio::time::sleep(Duration::from_secs(4)).await;
    assert_eq!(l.get_capacity("m").unwrap().total, 40);
}

#[tokio::test(start_paused = true)]
async fn a_429_on_another_quota_never_sets_a_rate_near_zero() {
    // Refused with the request bucket nearly full (the tokens ran out):
    // such answers bound the request rate only to (0, 1/reset].
    let l = Limiter::builder()
        .rules(Rules::new().exact("m", Limit::per_second(50).burst(10)))
        .build()
        .unwrap();
    let refused = RateLimitHeaders {
        requests: Some(Quota {
            limit: Some(10),
            remaining: Some(9),
            reset: Some(Duration::from_millis(100)),
        }),
        retry_after: Some(Duration::from_millis(50)),
        refills: true,
        ..Default::default()
    };
    for _ in 0..5 {
        tokio::time::sleep(Duration::from_millis(60)).await;
        let g = l.try_acquire("m", 1).unwrap();
        l.observe_answer(&g, Some("m"), None, 429, &refused)
            .unwrap();
    }
    let c = l.get_capacity("m").unwrap();
    assert!(c.per_second() >= 25.0, "{c:?}");
}
