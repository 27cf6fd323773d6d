//! The admission queue's cost per ticket, side by side in the same run:
//! `admit` and `try_admit` on an idle lane (the fast path: a grant with no
//! entry and one lock), and `try_admit` refused by a lane whose slots are
//! all held.
//!
//! `cargo bench -p sluice-admit`. Timings move with the machine's load:
//! compare the lines of one run with each other, not runs with runs.

use std::future::Future;
use std::hint::black_box;
use std::pin::pin;
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use criterion::{Criterion, criterion_group, criterion_main};
use sluice_admit::{Admission, AdmissionQueue, QueueConfig, Ticket};
use tokio::time::Instant;

const LANE: &str = "openai/gpt-4o";

fn ticket() -> Ticket {
    Ticket::new("acme", Instant::now() + Duration::from_secs(3600)).with_lane(LANE)
}

/// Admits `ticket` on a lane with a free slot: ready at the first poll,
/// so no runtime is needed to drive it.
fn admit_now(queue: &AdmissionQueue, ticket: Ticket) -> bool {
    let admit = pin!(queue.admit(ticket));
    match admit.poll(&mut Context::from_waker(Waker::noop())) {
        Poll::Ready(Ok(Admission::Run(permit))) => {
            drop(permit);
            true
        }
        _ => false,
    }
}

fn idle_lane(c: &mut Criterion) {
    let mut g = c.benchmark_group("idle_lane");
    let queue: AdmissionQueue = AdmissionQueue::new(QueueConfig::default());
    let t = ticket();
    g.bench_function("admit", |b| {
        b.iter(|| assert!(admit_now(&queue, black_box(t.clone()))))
    });
    g.bench_function("try_admit", |b| {
        b.iter(|| assert!(queue.try_admit(black_box(t.clone())).is_ok()))
    });
    g.finish();
}

fn full_lane(c: &mut Criterion) {
    let mut g = c.benchmark_group("full_lane");
    let queue: AdmissionQueue = AdmissionQueue::new(QueueConfig::default());
    let held: Vec<_> = (0..QueueConfig::default().concurrency.get())
        .map(|_| queue.try_admit(ticket()).expect("a free slot"))
        .collect();
    let t = ticket();
    g.bench_function("try_admit_refused", |b| {
        b.iter(|| assert!(queue.try_admit(black_box(t.clone())).is_err()))
    });
    drop(held);
    g.finish();
}

criterion_group!(benches, idle_lane, full_lane);
criterion_main!(benches);
