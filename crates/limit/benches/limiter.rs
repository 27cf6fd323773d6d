//! The limiter side by side with governor, in the same run.
//!
//! `cargo bench -p sluice-limit` prints criterion's timings for each pair,
//! then a table of ratios (sluice / governor) and the memory and idle-CPU
//! figures that criterion cannot measure.
//!
//! Both read the same kind of clock: governor's default, quanta's
//! time-stamp counter, and sluice's [`FastClock`] on it. The `_stdclock`
//! line shows a handle on [`StdClock`] (`Instant::now`) for comparison.

use std::hint::black_box;
use std::num::NonZeroU32;
use std::sync::Arc;
use std::time::{Duration, Instant};

use criterion::{Criterion, criterion_group};
use governor::{Quota, RateLimiter};
use sluice_limit::{FastClock, Limit, Limiter, ManualClock, Rules, StdClock};

const KEYS: usize = 100_000;

fn sluice(rules: Rules) -> Limiter {
    Limiter::builder()
        .clock(FastClock::new())
        .rules(rules)
        .build()
        .unwrap()
}

fn huge() -> Limit {
    Limit::per_second(1_000_000_000).burst(1_000_000_000)
}

fn governor_quota() -> Quota {
    Quota::per_second(NonZeroU32::new(1_000_000_000).unwrap())
}

fn uncontended(c: &mut Criterion) {
    let mut g = c.benchmark_group("uncontended");
    let gov = RateLimiter::direct(governor_quota());
    g.bench_function("governor", |b| b.iter(|| black_box(gov.check().is_ok())));
    let l = sluice(Rules::new().exact("openai/gpt-4o-mini", huge()));
    g.bench_function("sluice", |b| {
        b.iter(|| black_box(l.check(black_box("openai/gpt-4o-mini"), 1).is_ok()))
    });
    let h = l.handle("openai/gpt-4o-mini").unwrap();
    g.bench_function("sluice_handle", |b| {
        b.iter(|| black_box(h.check(1).is_ok()))
    });
    let std = Limiter::builder()
        .clock(StdClock)
        .rules(Rules::new().exact("openai/gpt-4o-mini", huge()))
        .build()
        .unwrap();
    let hs = std.handle("openai/gpt-4o-mini").unwrap();
    g.bench_function("sluice_handle_stdclock", |b| {
        b.iter(|| black_box(hs.check(1).is_ok()))
    });
    g.bench_function("sluice_grant", |b| {
        b.iter(|| black_box(l.try_acquire(black_box("openai/gpt-4o-mini"), 1).is_ok()))
    });
    g.finish();
}

fn two_threads(c: &mut Criterion) {
    let mut g = c.benchmark_group("two_threads");
    let gov = Arc::new(RateLimiter::direct(governor_quota()));
    g.bench_function("governor", |b| {
        b.iter_custom(|iters| {
            par(iters, {
                let gov = gov.clone();
                move || black_box(gov.check().is_ok())
            })
        })
    });
    let l = sluice(Rules::new().exact("r", huge()));
    let h = l.handle("r").unwrap();
    g.bench_function("sluice", |b| {
        b.iter_custom(|iters| {
            par(iters, {
                let h = h.clone();
                move || black_box(h.check(1).is_ok())
            })
        })
    });
    g.finish();
}

/// Runs `f` `iters` times on each of two threads; the time per pair.
fn par(iters: u64, f: impl Fn() -> bool + Send + Clone + 'static) -> Duration {
    let start = Instant::now();
    let hs: Vec<_> = (0..2)
        .map(|_| {
            let f = f.clone();
            std::thread::spawn(move || {
                for _ in 0..iters {
                    f();
                }
            })
        })
        .collect();
    for h in hs {
        h.join().unwrap();
    }
    start.elapsed()
}

fn keyed(c: &mut Criterion) {
    let mut g = c.benchmark_group("keys_100k");
    let keys: Vec<String> = (0..KEYS).map(|i| format!("session:{i:08}")).collect();
    let gov = RateLimiter::keyed(governor_quota());
    let mut i = 0;
    g.bench_function("governor", |b| {
        b.iter(|| {
            i = (i + 7919) % KEYS;
            black_box(gov.check_key(&keys[i]).is_ok())
        })
    });
    let l = sluice(Rules::new().prefix("session:", huge()));
    let mut i = 0;
    g.bench_function("sluice", |b| {
        b.iter(|| {
            i = (i + 7919) % KEYS;
            black_box(l.check(&keys[i], 1).is_ok())
        })
    });
    g.finish();
}

criterion_group!(benches, uncontended, two_threads, keyed);

/// Resident set size of this process, in bytes (Linux).
fn rss() -> Option<u64> {
    let statm = std::fs::read_to_string("/proc/self/statm").ok()?;
    let pages: u64 = statm.split_whitespace().nth(1)?.parse().ok()?;
    Some(pages * 4096)
}

/// CPU time of this process (user + system), from /proc (Linux).
fn cpu_time() -> Option<Duration> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    let after = &stat[stat.rfind(')')? + 2..];
    let f: Vec<&str> = after.split_whitespace().collect();
    let ticks: u64 = f.get(11)?.parse::<u64>().ok()? + f.get(12)?.parse::<u64>().ok()?;
    Some(Duration::from_millis(ticks * 10))
}

/// Reads criterion's saved estimates and prints sluice / governor.
fn ratios() {
    let dir = std::env::var_os("CARGO_TARGET_DIR")
        .map(std::path::PathBuf::from)
        .unwrap_or_else(|| std::path::PathBuf::from("../../target"))
        .join("criterion");
    let mean = |group: &str, f: &str| -> Option<f64> {
        let path = dir.join(group).join(f).join("new/estimates.json");
        let v: serde_json::Value =
            serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()?;
        v["mean"]["point_estimate"].as_f64()
    };
    println!(
        "\n{:<14} {:>14} {:>14} {:>8}",
        "bench", "governor ns", "sluice ns", "ratio"
    );
    for (group, what) in [
        ("uncontended", "sluice"),
        ("uncontended", "sluice_handle"),
        ("uncontended", "sluice_handle_stdclock"),
        ("uncontended", "sluice_grant"),
        ("two_threads", "sluice"),
        ("keys_100k", "sluice"),
    ] {
        if let (Some(gov), Some(ours)) = (mean(group, "governor"), mean(group, what)) {
            println!(
                "{:<14} {gov:>14.1} {ours:>14.1} {:>8.2}   ({what})",
                group,
                ours / gov
            );
        }
    }
}

/// Governor and sluice timed in alternating batches of a millisecond or
/// so, each side's as long as the other's, so that the load of whatever
/// else runs on the machine weighs on both alike (criterion times each for
/// seconds, one after the other): the median of the batches' ratios, per
/// call.
fn paired() {
    const PAIRS: usize = 201;
    const BATCH: u64 = 20_000;
    fn time(n: u64, f: &dyn Fn() -> bool) -> f64 {
        let t = Instant::now();
        for _ in 0..n {
            black_box(f());
        }
        t.elapsed().as_secs_f64()
    }
    fn median(mut v: Vec<f64>) -> f64 {
        v.sort_by(f64::total_cmp);
        v[v.len() / 2]
    }
    fn ratio(ours: &dyn Fn() -> bool, theirs: &dyn Fn() -> bool) -> f64 {
        // A batch of ours makes as many calls as take the time of a batch
        // of theirs, so that a batch of either is as likely to be
        // preempted (a batch three times as long was preempted three times
        // as often, and on a loaded machine at `nice` that moved the median
        // by 5x); the ratio is per call.
        let probe = BATCH / 10;
        let each = |f: &dyn Fn() -> bool| median((0..5).map(|_| time(probe, f)).collect());
        let calls = (BATCH as f64 * each(theirs) / each(ours)).clamp(1_000.0, BATCH as f64) as u64;
        let per_call = |ours: f64, theirs: f64| (ours / calls as f64) / (theirs / BATCH as f64);
        let mut ratios = Vec::with_capacity(PAIRS);
        for i in 0..PAIRS {
            // Alternate which goes first, so neither always finds the
            // caches warm.
            let (a, b) = if i % 2 == 0 {
                let g = time(BATCH, theirs);
                (time(calls, ours), g)
            } else {
                let s = time(calls, ours);
                (s, time(BATCH, theirs))
            };
            ratios.push(per_call(a, b));
        }
        median(ratios)
    }
    let gov = Arc::new(RateLimiter::direct(governor_quota()));
    let name = "openai/gpt-4o-mini";
    let l = sluice(Rules::new().exact(name, huge()));
    let h = l.handle(name).unwrap();
    let std = Limiter::builder()
        .clock(StdClock)
        .rules(Rules::new().exact(name, huge()))
        .build()
        .unwrap()
        .handle(name)
        .unwrap();
    let g = || gov.check().is_ok();
    let by_name = ratio(&|| l.check(black_box(name), 1).is_ok(), &g);
    // A grant taken by name and let go (`sluice_grant`).
    let grant = ratio(&|| l.try_acquire(black_box(name), 1).is_ok(), &g);
    // 100k keys, as `keys_100k`: each side steps through its own keys.
    let keys: Vec<String> = (0..KEYS).map(|i| format!("session:{i:08}")).collect();
    let gov_keyed = RateLimiter::keyed(governor_quota());
    let keyed = sluice(Rules::new().prefix("session:", huge()));
    let (gi, si) = (std::cell::Cell::new(0), std::cell::Cell::new(0));
    let step = |i: &std::cell::Cell<usize>| {
        i.set((i.get() + 7919) % KEYS);
        i.get()
    };
    let keys_100k = ratio(&|| keyed.check(&keys[step(&si)], 1).is_ok(), &|| {
        gov_keyed.check_key(&keys[step(&gi)]).is_ok()
    });
    let handle = ratio(&|| h.check(1).is_ok(), &g);
    let std = ratio(&|| std.check(1).is_ok(), &g);
    // Two threads: each batch runs on both at once.
    let two = |f: &(dyn Fn() -> bool + Sync)| {
        let t = Instant::now();
        std::thread::scope(|s| {
            for _ in 0..2 {
                s.spawn(|| {
                    for _ in 0..BATCH * 5 {
                        black_box(f());
                    }
                });
            }
        });
        t.elapsed().as_secs_f64()
    };
    let mut ratios = Vec::new();
    for i in 0..PAIRS / 4 {
        let (ours, theirs) = if i % 2 == 0 {
            let theirs = two(&|| gov.check().is_ok());
            (two(&|| h.check(1).is_ok()), theirs)
        } else {
            let ours = two(&|| h.check(1).is_ok());
            (ours, two(&|| gov.check().is_ok()))
        };
        ratios.push(ours / theirs);
    }
    let threads = median(ratios);
    println!(
        "paired (sluice / governor, median of alternating batches): check by name {by_name:.2}, \
         Handle::check {handle:.2} (on StdClock {std:.2}), two threads {threads:.2}, \
         grant by name {grant:.2}, keys_100k {keys_100k:.2}"
    );
}

fn memory_per_key() {
    const N: usize = 1_000_000;
    let keys: Vec<String> = (0..N).map(|i| format!("session:{i:08}")).collect();
    let before = rss().unwrap_or(0);
    let gov = RateLimiter::keyed(Quota::per_second(NonZeroU32::new(10).unwrap()));
    for k in &keys {
        let _ = gov.check_key(k);
    }
    let gov_bytes = rss().unwrap_or(0).saturating_sub(before);
    drop(gov);
    let before = rss().unwrap_or(0);
    // A manual clock, so that no key refills (and is evicted) while the
    // map fills; then time passes and one sweep drops them all.
    let clock = ManualClock::new();
    let l = Limiter::builder()
        .clock(clock.clone())
        .rules(Rules::new().prefix("session:", Limit::per_second(10)))
        .build()
        .unwrap();
    for k in &keys {
        let _ = l.check(k, 1);
    }
    let ours = rss().unwrap_or(0).saturating_sub(before);
    let live = l.len();
    clock.advance(Duration::from_secs(1));
    let swept = l.sweep();
    println!(
        "memory per key at 1M keys: governor {} B, sluice {} B (ratio {:.2}); \
         {} sluice keys live, then, once they have refilled, one sweep evicts {} and leaves {} \
         (governor keeps every key until retain_recent is called)",
        gov_bytes / N as u64,
        ours / N as u64,
        ours as f64 / gov_bytes.max(1) as f64,
        live,
        swept.evicted,
        swept.resources,
    );
}

fn idle_waiters() {
    let rt = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_time()
        .build()
        .unwrap();
    rt.block_on(async {
        let l = Limiter::new(Rules::new().exact("slots", Limit::in_flight(1))).unwrap();
        let held = l.try_acquire("slots", 1).unwrap();
        let tasks: Vec<_> = (0..10_000)
            .map(|_| {
                let l = l.clone();
                tokio::spawn(async move { l.acquire("slots", 1, None).await.map(drop) })
            })
            .collect();
        while l.get_capacity("slots").unwrap().waiting < 10_000 {
            tokio::task::yield_now().await;
        }
        let (cpu0, t0) = (cpu_time(), Instant::now());
        tokio::time::sleep(Duration::from_secs(2)).await;
        let (cpu1, wall) = (cpu_time(), t0.elapsed());
        let start = Instant::now();
        drop(held);
        for t in tasks {
            t.await.unwrap().unwrap();
        }
        if let (Some(a), Some(b)) = (cpu0, cpu1) {
            println!(
                "10k tasks waiting on one resource for {:.1} s: {:?} CPU ({:.2}% of one core); \
                 then all 10k granted one after another in {:?}",
                wall.as_secs_f64(),
                b - a,
                100.0 * (b - a).as_secs_f64() / wall.as_secs_f64(),
                start.elapsed()
            );
        }
    });
}

fn main() {
    let mut c = Criterion::default().configure_from_args();
    benches_with(&mut c);
    c.final_summary();
    ratios();
    paired();
    memory_per_key();
    idle_waiters();
}

fn benches_with(c: &mut Criterion) {
    uncontended(c);
    two_threads(c);
    keyed(c);
    let _ = benches;
}
