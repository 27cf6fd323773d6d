//! The completion batcher: a pool's runs hand their completions to one
//! task, which writes all that are waiting with one
//! [`JobStore::complete_many`] (one transaction, each item still guarded by
//! its lease) while the next ones queue up behind it. A run's call returns
//! only once its own completion is committed, so nothing is reported done
//! before it is durable; under load one commit serves many jobs.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::error::Error;
use crate::job::{Job, Lease};
use crate::store::JobStore;

/// The most completions one transaction writes.
pub(crate) const MAX_BATCH: usize = 512;

/// Completions waiting for the batcher at most; runs beyond it wait to
/// hand theirs over (bounded memory).
const QUEUED: usize = 4 * MAX_BATCH;

struct Item {
    lease: Lease,
    result: Value,
    reply: oneshot::Sender<Result<Job, Error>>,
}

/// The handle runs complete through.
#[derive(Debug, Clone)]
pub(crate) struct Completer {
    tx: mpsc::Sender<Item>,
}

impl Completer {
    /// Starts the batcher task on `store`; it ends once every handle is dropped.
    pub fn start<S: JobStore + 'static>(store: Arc<S>) -> (Self, JoinHandle<()>) {
        let (tx, rx) = mpsc::channel(QUEUED);
        (Self { tx }, tokio::spawn(run(store, rx)))
    }

    /// Completes the leased job with `result`, in the next batch; returns
    /// once that batch is committed.
    ///
    /// # Errors
    /// As [`JobStore::complete`]; [`Error::Batch`] if the batch failed as a
    /// whole or the batcher is gone (the pool is being dropped).
    pub async fn complete(&self, lease: Lease, result: Value) -> Result<Job, Error> {
        let (reply, answer) = oneshot::channel();
        let item = Item {
            lease,
            result,
            reply,
        };
        if self.tx.send(item).await.is_err() {
            return Err(gone());
        }
        answer.await.unwrap_or_else(|_| Err(gone()))
    }
}

fn gone() -> Error {
    Error::Batch("the worker pool's completion batcher has stopped".to_owned())
}

async fn run<S: JobStore>(store: Arc<S>, mut rx: mpsc::Receiver<Item>) {
    let mut items = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut items, MAX_BATCH).await > 0 {
        // Runs that finished in the same instant are still on their way:
        // let them hand theirs over before the batch is cut.
        tokio::task::yield_now().await;
        if items.len() < MAX_BATCH {
            while let Ok(item) = rx.try_recv() {
                items.push(item);
                if items.len() == MAX_BATCH {
                    break;
                }
            }
        }
        let (done, replies): (Vec<_>, Vec<_>) = items
            .drain(..)
            .map(|i| ((i.lease, i.result), i.reply))
            .unzip();
        match store.complete_many(done).await {
            Ok(results) => {
                for (reply, result) in replies.into_iter().zip(results) {
                    let _ = reply.send(result);
                }
            }
            Err(e) => {
                let msg = describe(&e);
                for reply in replies {
                    let _ = reply.send(Err(Error::Batch(msg.clone())));
                }
            }
        }
    }
}

/// `e` with its sources: "database error" alone says too little.
fn describe(e: &Error) -> String {
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}
