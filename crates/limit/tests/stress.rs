//! Many tasks on two threads: the invariants hold at the end.

use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

use sluice_limit::{FastClock, Grant, Handle, Limit, Limiter, ManualClock, Rules, StdClock};

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrency_and_rate_hold_under_contention() {
    let rules = Rules::new()
        .exact("slots", Limit::in_flight(4))
        .exact("rate", Limit::per_second(2_000).burst(50));
    let l = Limiter::new(rules).unwrap();
    let inside = Arc::new(AtomicU64::new(0));
    let peak = Arc::new(AtomicU64::new(0));
    let granted = Arc::new(AtomicU64::new(0));
    let start = Instant::now();
    let tasks: Vec<_> = (0..200)
        .map(|i| {
            let (l, inside, peak, granted) =
                (l.clone(), inside.clone(), peak.clone(), granted.clone());
            tokio::spawn(async move {
                for j in 0..10 {
                    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
                    let g = l
                        .acquire_many(&[("slots", 1), ("rate", 1)], Some(deadline))
                        .await
                        .expect("granted within the deadline");
                    let now = inside.fetch_add(1, Ordering::SeqCst) + 1;
                    peak.fetch_max(now, Ordering::SeqCst);
                    granted.fetch_add(1, Ordering::SeqCst);
                    if (i + j) % 3 == 0 {
                        tokio::task::yield_now().await;
                    }
                    inside.fetch_sub(1, Ordering::SeqCst);
                    drop(g);
                }
            })
        })
        .collect();
    // Some waiters give up half way: they must leave no trace.
    let quitters: Vec<_> = (0..50)
        .map(|_| {
            let l = l.clone();
            tokio::spawn(async move {
                let a = l.acquire("slots", 1, None);
                let _ = tokio::time::timeout(Duration::from_micros(50), a).await;
            })
        })
        .collect();
    for t in tasks.into_iter().chain(quitters) {
        t.await.unwrap();
    }
    let elapsed = start.elapsed();
    assert!(peak.load(Ordering::SeqCst) <= 4, "in-flight limit exceeded");
    assert_eq!(granted.load(Ordering::SeqCst), 2_000);
    // Not a timing assertion: a bound computed from the time it took.
    let bound = 50.0 + 2_000.0 * elapsed.as_secs_f64() + 1.0;
    assert!((2_000.0) <= bound);
    let slots = l.get_capacity("slots").unwrap();
    assert_eq!(
        (slots.in_flight, slots.waiting, slots.available),
        (0, 0, 4.0)
    );
    assert_eq!(l.get_capacity("rate").unwrap().waiting, 0);
}

/// `threads` threads each making `BURST` calls on `r`, which bursts to
/// `BURST` on a clock standing still: `call(limiter, handle, thread, i,
/// held)` makes one and says whether it was admitted (`held` keeps up to
/// eight grants a thread holds). The limiter after, and how many were
/// admitted.
fn race_for_the_burst(
    threads: usize,
    call: fn(&Limiter, &Handle, usize, u64, &mut [Option<Grant>; 8]) -> bool,
) -> (Limiter, u64) {
    let l = Limiter::builder()
        .clock(ManualClock::new())
        .rules(Rules::new().exact("r", Limit::per_second(1).burst(BURST)))
        .build()
        .unwrap();
    let admitted = Arc::new(AtomicU64::new(0));
    let threads: Vec<_> = (0..threads)
        .map(|t| {
            let (l, admitted) = (l.clone(), admitted.clone());
            std::thread::spawn(move || {
                let h = l.handle("r").unwrap();
                let mut held = [const { None }; 8];
                for i in 0..BURST {
                    if call(&l, &h, t, i, &mut held) {
                        admitted.fetch_add(1, Ordering::Relaxed);
                    }
                }
            })
        })
        .collect();
    for t in threads {
        t.join().unwrap();
    }
    let admitted = admitted.load(Ordering::Relaxed);
    (l, admitted)
}

const BURST: u64 = 20_000;

/// Checks on the lock-free path race with calls that take the lock (grants,
/// capacity reads) on two threads, with time standing still: exactly the
/// burst is admitted, never a token more or less.
#[test]
fn lock_free_and_locked_calls_admit_exactly_the_burst() {
    let (l, admitted) = race_for_the_burst(3, |l, h, t, i, _| match (t, i % 4) {
        (0, _) => h.check(1).is_ok(),
        (1, _) => l.check("r", 1).is_ok(),
        (_, 0) => {
            // Takes the lock, shutting the lock-free path.
            let _ = l.get_capacity("r");
            false
        }
        _ => l.try_acquire("r", 1).is_ok(),
    });
    assert_eq!(admitted, BURST);
    assert_eq!(l.get_capacity("r").unwrap().available, 0.0);
}

/// Grants held for a while on the lock-free path race with checks, with
/// grants let go and with calls that take the lock, time standing still:
/// exactly the burst is admitted, and once every grant is gone none is
/// counted in flight.
#[test]
fn grants_held_on_the_lock_free_path_admit_exactly_the_burst() {
    let (l, admitted) = race_for_the_burst(4, |l, h, t, i, held| {
        // Up to eight grants held at once, let go in turn.
        let slot = (i as usize * (t + 1)) % 8;
        match (t, i % 8) {
            (0, _) => h.check(1).is_ok(),
            (1, 0) => {
                let _ = l.get_capacity("r");
                false
            }
            (1, _) => l.check("r", 1).is_ok(),
            (2, _) => {
                held[slot] = l.try_acquire("r", 1).ok();
                held[slot].is_some()
            }
            _ => {
                held[slot] = h.try_acquire(1).ok();
                held[slot].is_some()
            }
        }
    });
    assert_eq!(admitted, BURST);
    let cap = l.get_capacity("r").unwrap();
    assert_eq!((cap.available, cap.in_flight), (0.0, 0));
}

/// On clocks that move (the time of a call is read before its resource is
/// created), a fresh key still grants its whole burst at once.
#[test]
fn fresh_keys_grant_their_burst_on_moving_clocks() {
    for fast in [false, true] {
        let builder = Limiter::builder().rules(Rules::new().prefix("k:", Limit::per_second(5)));
        let l = if fast {
            builder.clock(FastClock::new())
        } else {
            builder.clock(StdClock)
        }
        .build()
        .unwrap();
        for k in 0..1_000 {
            assert!(l.check(&format!("k:c{k}"), 5).is_ok(), "check by name");
            let h = l.handle(&format!("k:h{k}")).unwrap();
            assert!(h.check(5).is_ok(), "check by handle");
            assert!(l.try_acquire(&format!("k:g{k}"), 5).is_ok(), "grant");
        }
    }
}
