//! Helpers shared by the integration tests.
#![allow(dead_code)]

use std::future::Future;
use std::num::{NonZeroU32, NonZeroUsize};
use std::pin::Pin;
use std::sync::{Arc, Mutex};
use std::task::{Context, Poll, Waker};
use std::time::Duration;

use sluice_admit::{Admission, AdmissionQueue, Priority, QueueConfig, Ticket, Weights};
use tokio::task::JoinHandle;
use tokio::time::Instant;

/// Polls `f` once, without a task: enough to see whether it is ready yet.
pub fn poll_once<F: Future + ?Sized>(f: Pin<&mut F>) -> Poll<F::Output> {
    f.poll(&mut Context::from_waker(Waker::noop()))
}

pub fn nz(n: usize) -> NonZeroUsize {
    NonZeroUsize::new(n).unwrap()
}

pub fn weight(n: u32) -> NonZeroU32 {
    NonZeroU32::new(n).unwrap()
}

/// A queue config with the given sizes and no starvation guard.
pub fn config(concurrency: usize, per_tenant: usize, total: usize) -> QueueConfig {
    QueueConfig {
        max_depth_per_tenant: nz(per_tenant),
        max_depth_total: nz(total),
        concurrency: nz(concurrency),
        starvation_guard: None,
        weights: Weights::default(),
    }
}

/// A ticket for `tenant` in `priority`, due in a minute.
pub fn ticket(tenant: &str, priority: Priority) -> Ticket {
    Ticket::new(tenant, Instant::now() + Duration::from_secs(60)).with_priority(priority)
}

/// Admits `ticket` and, once it runs, writes `label` to `log` and finishes
/// at once (dropping its slot).
pub fn spawn_recorder<T: Clone + Send + Sync + 'static>(
    queue: &AdmissionQueue<T>,
    ticket: Ticket,
    label: &'static str,
    log: &Arc<Mutex<Vec<&'static str>>>,
) -> JoinHandle<()> {
    let queue = queue.clone();
    let log = Arc::clone(log);
    tokio::spawn(async move {
        match queue.admit(ticket).await {
            Ok(Admission::Run(_permit)) => log.lock().unwrap().push(label),
            other => panic!("{label}: unexpected {:?}", other.map(|_| ())),
        }
    })
}

/// Lets every spawned task run until it waits on something.
pub async fn settle() {
    for _ in 0..50 {
        tokio::task::yield_now().await;
    }
}

/// Takes a slot that must be free now.
pub async fn hold<T: Clone + Send + Sync + 'static>(
    queue: &AdmissionQueue<T>,
    tenant: &str,
) -> sluice_admit::Permit<T> {
    hold_ticket(queue, ticket(tenant, Priority::Normal)).await
}

/// Takes a slot for `ticket`, which must get one (not join a flight).
pub async fn hold_ticket<T: Clone + Send + Sync + 'static>(
    queue: &AdmissionQueue<T>,
    ticket: Ticket,
) -> sluice_admit::Permit<T> {
    match queue.admit(ticket).await {
        Ok(Admission::Run(permit)) => permit,
        other => panic!("expected a slot, got {:?}", other.map(|_| ())),
    }
}

/// Queues `tickets` in order behind a held slot of a concurrency-1 queue,
/// then releases the slot and returns the labels in the order they ran.
pub async fn dispatch_order(
    queue: &AdmissionQueue,
    tickets: impl IntoIterator<Item = (Ticket, &'static str)>,
) -> Vec<&'static str> {
    let log = Arc::new(Mutex::new(Vec::new()));
    let blocker = hold(queue, "blocker").await;
    let tasks: Vec<_> = tickets
        .into_iter()
        .map(|(ticket, label)| spawn_recorder(queue, ticket, label, &log))
        .collect();
    settle().await;
    assert_eq!(queue.stats().queued(), tasks.len(), "all queued");
    drop(blocker);
    for task in tasks {
        task.await.unwrap();
    }
    log.lock().unwrap().clone()
}
