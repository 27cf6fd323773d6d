//! The pool's heartbeat: every run registers its lease here while it
//! runs, and one task renews all of them each period with one
//! [`JobStore::heartbeat_many`] (one statement per [`MAX_BATCH`] leases),
//! instead of a timer and a statement per running job. A run whose lease
//! was lost (rescued, cancelled) is told so and stops.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use tokio::sync::watch;

use crate::error::Error;
use crate::job::{JobId, Lease};
use crate::store::JobStore;

/// The most leases one statement renews.
const MAX_BATCH: usize = 1_000;

/// The leases of a pool's running jobs.
#[derive(Debug, Default)]
pub(crate) struct Heartbeats {
    held: Mutex<HashMap<JobId, Entry>>,
}

#[derive(Debug)]
struct Entry {
    lease: Lease,
    /// Turns true when the lease is found lost.
    lost: watch::Sender<bool>,
}

/// A lease kept alive while this guard lives; dropping it stops renewing.
#[derive(Debug)]
pub(crate) struct Held {
    heartbeats: Arc<Heartbeats>,
    job: JobId,
    token: i64,
    lost: watch::Receiver<bool>,
}

impl Heartbeats {
    /// Keeps `lease` alive until the guard is dropped.
    pub fn hold(self: &Arc<Self>, lease: &Lease) -> Held {
        let (tx, rx) = watch::channel(false);
        let entry = Entry {
            lease: lease.clone(),
            lost: tx,
        };
        self.lock().insert(lease.job, entry);
        Held {
            heartbeats: Arc::clone(self),
            job: lease.job,
            token: lease.token,
            lost: rx,
        }
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, HashMap<JobId, Entry>> {
        self.held.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// Renews every lease held now; marks the lost ones.
    async fn beat<S: JobStore>(&self, store: &S, extend: Duration) {
        let leases: Vec<Lease> = self.lock().values().map(|e| e.lease.clone()).collect();
        for chunk in leases.chunks(MAX_BATCH) {
            let answers = match store.heartbeat_many(chunk.to_vec(), extend).await {
                Ok(answers) => answers,
                Err(e) => {
                    // The leases may still hold; if the store stays down
                    // they expire and the jobs are rescued, never lost.
                    tracing::warn!(leases = chunk.len(), error = %e, "jobs: heartbeat failed");
                    continue;
                }
            };
            let mut held = self.lock();
            for (lease, answer) in chunk.iter().zip(answers) {
                // The run may have ended (and another claim of the job
                // begun) while the statement ran: only its own entry counts.
                let Some(entry) = held
                    .get_mut(&lease.job)
                    .filter(|e| e.lease.token == lease.token)
                else {
                    continue;
                };
                match answer {
                    Ok(renewed) => entry.lease = renewed,
                    Err(Error::LeaseLost(_) | Error::NotFound(_)) => {
                        entry.lost.send_replace(true);
                    }
                    Err(e) => {
                        tracing::warn!(job = %lease.job, error = %e, "jobs: heartbeat failed");
                    }
                }
            }
        }
    }
}

impl Held {
    /// Resolves once the lease is found lost; never while it holds.
    pub async fn lost(&mut self) {
        if self.lost.wait_for(|lost| *lost).await.is_err() {
            // The entry is gone only once this guard drops: unreachable
            // while it is borrowed, but never report a loss that was not.
            std::future::pending::<()>().await;
        }
    }
}

impl Drop for Held {
    fn drop(&mut self) {
        let mut held = self.heartbeats.lock();
        if held
            .get(&self.job)
            .is_some_and(|e| e.lease.token == self.token)
        {
            held.remove(&self.job);
        }
    }
}

/// Renews the held leases every `period` by `extend`, until aborted.
pub(crate) async fn run<S: JobStore>(
    heartbeats: Arc<Heartbeats>,
    store: Arc<S>,
    period: Duration,
    extend: Duration,
) {
    let mut tick = tokio::time::interval_at(tokio::time::Instant::now() + period, period);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tick.tick().await;
        heartbeats.beat(&*store, extend).await;
    }
}
