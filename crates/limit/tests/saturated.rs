//! A saturated resource delivers its rate, whatever the rate, burst and
//! jitter margin (issue 41): checked in tokio's paused time, where a timer
//! fires on the millisecond after its deadline, exactly as coarse as the
//! real one.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use proptest::prelude::*;
use sluice_limit::{AdaptiveConfig, Limit, Limiter, Rules};
use tokio::time::Instant;

const MS: u64 = 1_000_000;

/// What one saturated run let go: release times in ms after the start.
struct Run {
    releases: Vec<u64>,
    ms: u64,
}

/// `tasks` loops acquiring one token of `limit` for `ms` milliseconds of
/// paused time, starting after the limiter has been idle a second.
fn saturate(limit: Limit, margin: Duration, tasks: usize, ms: u64) -> Run {
    let rt = tokio::runtime::Builder::new_current_thread()
        .enable_time()
        .start_paused(true)
        .build()
        .unwrap();
    rt.block_on(async move {
        let l = Limiter::builder()
            .rules(Rules::new().exact("r", limit))
            .adaptive(AdaptiveConfig {
                jitter_margin: margin,
                ..AdaptiveConfig::default()
            })
            .build()
            .unwrap();
        tokio::time::sleep(Duration::from_secs(1)).await;
        let start = Instant::now();
        let end = start + Duration::from_millis(ms);
        let releases = Arc::new(Mutex::new(Vec::new()));
        let mut set = tokio::task::JoinSet::new();
        for _ in 0..tasks {
            let (l, releases) = (l.clone(), releases.clone());
            set.spawn(async move {
                loop {
                    let g = l.acquire("r", 1, None).await.unwrap();
                    let at = Instant::now();
                    if at > end {
                        return;
                    }
                    releases
                        .lock()
                        .unwrap()
                        .push((at - start).as_nanos() as u64);
                    drop(g);
                }
            });
        }
        tokio::time::sleep_until(end + Duration::from_millis(1)).await;
        set.abort_all();
        while set.join_next().await.is_some() {}
        let releases = std::mem::take(&mut *releases.lock().unwrap());
        Run { releases, ms }
    })
}

impl Run {
    /// Releases before each millisecond: `count[k + 1]` those at or
    /// before `k` ms, `count[0]` none. Everything is let go on a timer's
    /// tick (or at the start), a whole millisecond.
    fn counts(&self) -> Vec<u64> {
        let mut per = vec![0u64; self.ms as usize + 2];
        for &r in &self.releases {
            assert_eq!(r % MS, 0, "let go between timer ticks: {r} ns");
            per[(r / MS) as usize + 1] += 1;
        }
        let mut sum = 0;
        per.iter()
            .map(|n| {
                sum += n;
                sum
            })
            .collect()
    }
}

fn rates() -> impl Strategy<Value = u64> {
    prop_oneof![1u64..100, 100u64..5_000, 5_000u64..=100_000]
}

fn bursts() -> impl Strategy<Value = u64> {
    prop_oneof![1u64..=2, 3u64..=20, 21u64..=1_000]
}

fn margins() -> impl Strategy<Value = Duration> {
    prop_oneof![Just(0u64), 1u64..=50].prop_map(Duration::from_millis)
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(24))]

    /// From an idle start, by `t` ms (t ≥ 1 s): `rate × t + burst ± 1`,
    /// less what the margin holds back once (`rate × margin`, the cost
    /// docs/gateway.md states); over any later window of at least 1 s,
    /// `rate × t ± 1` (the sustained rate is the configured one, margin or
    /// not); and in no window more than the meter allows, `rate × t +
    /// burst`, counting the timer's millisecond.
    #[test]
    fn a_saturated_resource_admits_its_rate(rate in rates(), burst in bursts(), margin in margins()) {
        // Enough tasks that someone always waits: the burst, what comes
        // due while a timer is late, and some.
        let tasks = (burst + rate * 3 / 1_000 + 16) as usize;
        let ms = 1_200;
        let run = saturate(Limit::per_second(rate).burst(burst), margin, tasks, ms);
        let count = run.counts();
        let (r, b) = (rate as f64, burst as f64);
        let held = r * margin.as_secs_f64();
        for t in 1_000..=ms {
            let want = r * t as f64 / 1e3 + b - held;
            let got = count[t as usize + 1] as f64;
            prop_assert!((got - want).abs() <= 1.0 || (want < 1.0 && got == 1.0),
                "{got} by {t} ms, want {want:.1} ({rate}/s burst {burst} margin {margin:?})");
        }
        // Once the burst and the margin are spent, every window ≥ 1 s.
        let settled = ((b + held) / r * 1e3).ceil() as u64 + 1;
        for a in (settled..=ms.saturating_sub(1_000)).step_by(7) {
            for t in (a + 1_000..=ms).step_by(11) {
                let got = (count[t as usize + 1] - count[a as usize + 1]) as f64;
                let want = r * (t - a) as f64 / 1e3;
                prop_assert!((got - want).abs() <= 1.0,
                    "{got} in ({a}, {t}] ms, want {want:.1} ({rate}/s burst {burst})");
            }
        }
        // Every window [a, t] of ticks: at most what the meter allows over
        // it and the millisecond before (a timer fires on the millisecond
        // after its deadline, and lets go together what came due in it).
        for a in 0..=ms {
            for t in a..=ms {
                let got = count[t as usize + 1] - count[a as usize];
                let allowed = rate * (t - a + 1) / 1_000 + burst;
                prop_assert!(got <= allowed, "{got} in [{a}, {t}] ms, allowed {allowed}");
            }
        }
    }
}
