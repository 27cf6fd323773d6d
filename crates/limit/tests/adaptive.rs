//! Adaptive control: 429s cut capacity once per window, Retry-After pauses,
//! recovery follows the seed's timeline; upstream counts keep buckets in step.

mod common;

use std::sync::{Arc, Mutex};
use std::time::Duration;

use common::{poll_once, ready};
use sluice_limit::headers::{Quota, RateLimitHeaders};
use sluice_limit::{
    AdaptiveConfig, CapacityChange, ChangeReason, Error, Limit, Limiter, ManualClock, Policy, Rules,
};
use tokio::time::advance;

fn limiter() -> (Limiter, Arc<Mutex<Vec<CapacityChange>>>) {
    let l = Limiter::new(Rules::new().exact("api", Limit::per_minute(100))).unwrap();
    let seen = Arc::new(Mutex::new(Vec::new()));
    let s = seen.clone();
    l.on_change(move |c| s.lock().unwrap().push(c.clone()));
    (l, seen)
}

#[tokio::test(start_paused = true)]
async fn seed_recovery_timeline() {
    let (l, seen) = limiter();
    l.get_capacity("api").unwrap();
    let change = l.report_throttled("api", None).unwrap().unwrap();
    assert_eq!((change.previous, change.capacity), (100, 50));
    let mut timeline = vec![(0, l.get_capacity("api").unwrap().total)];
    for step in 1..=9 {
        advance(Duration::from_secs(30)).await;
        timeline.push((step * 30, l.get_capacity("api").unwrap().total));
    }
    assert_eq!(
        timeline,
        [
            (0, 50),
            (30, 55),
            (60, 60),
            (90, 66),
            (120, 72),
            (150, 79),
            (180, 86),
            (210, 94),
            (240, 100),
            (270, 100)
        ]
    );
    let seen = seen.lock().unwrap();
    assert_eq!(seen.len(), 9, "one reduction, eight recovery steps");
    assert_eq!(seen[0].reason, ChangeReason::Throttled);
    assert!(
        seen[1..]
            .iter()
            .all(|c| c.reason == ChangeReason::Recovered)
    );
    assert!(!l.get_capacity("api").unwrap().is_reduced());
}

#[tokio::test(start_paused = true)]
async fn just_before_a_step_nothing_changes() {
    let (l, _) = limiter();
    l.report_throttled("api", None).unwrap();
    advance(Duration::from_millis(29_999)).await;
    assert_eq!(l.get_capacity("api").unwrap().total, 50);
    advance(Duration::from_millis(1)).await;
    assert_eq!(l.get_capacity("api").unwrap().total, 55);
}

#[tokio::test(start_paused = true)]
async fn a_burst_of_429s_reduces_once_per_window() {
    let (l, _) = limiter();
    for _ in 0..20 {
        l.report_throttled("api", None).unwrap();
    }
    assert_eq!(l.get_capacity("api").unwrap().total, 50);
    // The window is a minute: the next reduction only after it.
    advance(Duration::from_secs(59)).await;
    assert!(l.report_throttled("api", None).unwrap().is_none());
    advance(Duration::from_secs(1)).await;
    // 30 s and 60 s recovery steps came first: 50 → 55 → 60, then halved.
    let c = l.report_throttled("api", None).unwrap().unwrap();
    assert_eq!((c.previous, c.capacity), (60, 30));
}

#[tokio::test(start_paused = true)]
async fn retry_after_pauses_capped() {
    let l = Limiter::new(Rules::new().exact("m", Limit::per_second(10))).unwrap();
    l.report_throttled("m", Some(Duration::from_secs(2)))
        .unwrap();
    let err = l.try_acquire("m", 1).unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_secs(2)));
    let mut a = l.acquire("m", 1, None);
    assert!(poll_once(&mut a).is_pending());
    advance(Duration::from_millis(1_999)).await;
    assert!(poll_once(&mut a).is_pending());
    advance(Duration::from_millis(1)).await;
    assert!(ready(poll_once(&mut a)).is_ok());
    // An absurd Retry-After is capped at 60 s.
    l.report_throttled("m", Some(Duration::from_secs(3_600)))
        .unwrap();
    let cap = l.get_capacity("m").unwrap();
    assert_eq!(cap.paused_for, Some(Duration::from_secs(60)));
}

#[tokio::test(start_paused = true)]
async fn reduction_scales_burst_and_waiters_wait_for_recovery() {
    let l = Limiter::new(Rules::new().exact("m", Limit::per_second(4).burst(8))).unwrap();
    l.report_throttled("m", None).unwrap();
    let cap = l.get_capacity("m").unwrap();
    assert_eq!((cap.total, cap.burst, cap.configured), (2, 4, 4));
    // 6 fits the configured burst but not the reduced one: a wait, not never.
    let mut a = l.acquire("m", 6, None);
    assert!(poll_once(&mut a).is_pending());
    assert!(matches!(
        l.try_acquire("m", 9),
        Err(Error::InsufficientCapacity { .. })
    ));
    advance(Duration::from_secs(30)).await; // 2 → 3, burst 6
    l.get_capacity("m").unwrap();
    advance(Duration::from_secs(2)).await;
    assert!(ready(poll_once(&mut a)).is_ok());
}

#[tokio::test(start_paused = true)]
async fn upstream_headers_bring_the_bucket_in_step() {
    let l = Limiter::new(
        Rules::new()
            .exact("req", Limit::per_second(10))
            .exact("tok", Limit::per_minute(100_000)),
    )
    .unwrap();
    let headers = RateLimitHeaders {
        requests: Some(Quota {
            limit: Some(10),
            remaining: Some(0),
            reset: Some(Duration::from_millis(750)),
        }),
        tokens: Some(Quota {
            limit: Some(100_000),
            remaining: Some(1_234),
            reset: Some(Duration::from_secs(6)),
        }),
        ..Default::default()
    };
    l.observe(Some("req"), Some("tok"), 200, &headers).unwrap();
    assert_eq!(l.get_capacity("tok").unwrap().available, 1_234.0);
    // A success saying "none left" empties the bucket but does not pause
    // it until the provider's full-bucket reset: the next token is 100 ms
    // away at 10/s.
    let err = l.try_acquire("req", 1).unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_millis(100)));
    assert_eq!(
        l.get_capacity("req").unwrap().total,
        10,
        "a 200 does not cut capacity"
    );
    // A refusal pauses until the reset; one 429 is no evidence of a lower
    // limit, so capacity stays.
    l.observe(Some("req"), None, 429, &headers).unwrap();
    assert_eq!(l.get_capacity("req").unwrap().total, 10);
    let err = l.try_acquire("req", 1).unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_millis(750)));
}

#[tokio::test(start_paused = true)]
async fn under_the_seed_policy_an_observed_429_halves() {
    let l = Limiter::builder()
        .rules(Rules::new().exact("req", Limit::per_second(10)))
        .adaptive(AdaptiveConfig {
            policy: Policy::Seed,
            ..Default::default()
        })
        .build()
        .unwrap();
    let headers = RateLimitHeaders {
        retry_after: Some(Duration::from_millis(750)),
        ..Default::default()
    };
    l.observe(Some("req"), None, 429, &headers).unwrap();
    assert_eq!(l.get_capacity("req").unwrap().total, 5);
    let err = l.try_acquire("req", 1).unwrap_err();
    assert_eq!(err.retry_after(), Some(Duration::from_millis(750)));
}

/// A provider's bucket, as a simulated upstream keeps it: 3/s, burst 10,
/// reporting what is left rounded down when a call arrives.
struct Provider {
    tokens: f64,
    at: tokio::time::Instant,
    refused: u32,
    admitted: u32,
}

impl Provider {
    fn arrive(&mut self) -> u64 {
        let now = tokio::time::Instant::now();
        self.tokens = (self.tokens + (now - self.at).as_secs_f64() * 3.0).min(10.0);
        self.at = now;
        if self.tokens + 1e-9 >= 1.0 {
            self.tokens -= 1.0;
            self.admitted += 1;
        } else {
            self.refused += 1;
        }
        (self.tokens + 1e-9).floor() as u64
    }
}

/// Twenty callers for 20 s against a provider with the limiter's own
/// limit; each answer, 300 ms after its call, reports what was left.
/// Returns (admitted, refused) at the provider.
async fn swarm_against_provider(answer_aware: bool) -> (u32, u32) {
    let l = Limiter::new(Rules::new().exact("m", Limit::per_second(3).burst(10))).unwrap();
    let provider = Arc::new(Mutex::new(Provider {
        tokens: 10.0,
        at: tokio::time::Instant::now(),
        refused: 0,
        admitted: 0,
    }));
    let end = tokio::time::Instant::now() + Duration::from_secs(20);
    let callers: Vec<_> = (0..20)
        .map(|_| {
            let (l, provider) = (l.clone(), provider.clone());
            tokio::spawn(async move {
                while let Ok(grant) = l.acquire("m", 1, Some(end)).await {
                    let remaining = provider.lock().unwrap().arrive();
                    tokio::time::sleep(Duration::from_millis(300)).await;
                    let headers = requests_left(10, remaining);
                    if answer_aware {
                        l.observe_answer(&grant, Some("m"), None, 200, &headers)
                    } else {
                        l.observe(Some("m"), None, 200, &headers)
                    }
                    .unwrap();
                }
            })
        })
        .collect();
    for c in callers {
        c.await.unwrap();
    }
    let p = provider.lock().unwrap();
    (p.admitted, p.refused)
}

#[tokio::test(start_paused = true)]
async fn answers_keep_the_bucket_in_step_without_wasting_capacity() {
    // The provider's capacity over the run: 3/s × 20 s + a burst of 10.
    let capacity = 70;
    let (admitted, refused) = swarm_against_provider(true).await;
    assert_eq!(refused, 0, "the limiter never sends what would be refused");
    assert!(
        admitted >= capacity - 1,
        "admitted {admitted} of {capacity}: every token is used"
    );
    // Clamping to the bare, rounded-down, round-trip-old count throws away
    // the refill of each answer's round trip whenever the limiter is
    // exactly in step (here: after the opening burst, until the provider
    // is a token ahead): the reason observe_answer exists.
    let (bare, refused) = swarm_against_provider(false).await;
    assert_eq!(refused, 0);
    assert!(bare < capacity - 1, "bare {bare} vs aware {admitted}");
}

#[tokio::test(start_paused = true)]
async fn an_answer_reins_in_a_limiter_ahead_of_its_upstream() {
    let l = Limiter::new(Rules::new().exact("m", Limit::per_second(3).burst(10))).unwrap();
    let grant = l.try_acquire("m", 1).unwrap();
    // Someone else spent the provider's bucket: it has nothing left.
    advance(Duration::from_millis(300)).await;
    let headers = requests_left(10, 0);
    l.observe_answer(&grant, Some("m"), None, 200, &headers)
        .unwrap();
    // At most the rounding (1) and the refill of 300 ms at 3/s (0.9,
    // rounded up to 1) are left, not the 9 the limiter thought it had.
    let available = l.get_capacity("m").unwrap().available;
    assert!(available <= 2.0, "{available}");
    assert!(available >= 1.0, "{available}");
}

/// A held grant leaves the lock-free path open: what checks take there
/// meanwhile still counts as taken since the grant when its answer comes.
#[test]
fn what_checks_take_while_a_grant_is_held_counts_when_its_answer_comes() {
    let l = Limiter::builder()
        .clock(ManualClock::new())
        .rules(Rules::new().exact("m", Limit::per_second(10).burst(10)))
        .build()
        .unwrap();
    let grant = l.try_acquire("m", 1).unwrap();
    let h = l.handle("m").unwrap();
    for _ in 0..3 {
        l.check("m", 1).unwrap();
    }
    h.check(2).unwrap();
    // The upstream had 6 left when the grant's call arrived: at most 7,
    // less the 5 taken here since, are left now.
    let headers = requests_left(10, 6);
    l.observe_answer(&grant, Some("m"), None, 200, &headers)
        .unwrap();
    assert_eq!(l.get_capacity("m").unwrap().available, 2.0);
}

/// An answer's request quota alone: `remaining` of `limit` left.
fn requests_left(limit: u64, remaining: u64) -> RateLimitHeaders {
    RateLimitHeaders {
        requests: Some(Quota {
            limit: Some(limit),
            remaining: Some(remaining),
            reset: None,
        }),
        ..Default::default()
    }
}
