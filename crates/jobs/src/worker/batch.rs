//! The outcome batcher: a pool's runs hand their completions and failures
//! to one task, which writes all that are waiting with one
//! [`JobStore::complete_many_ids`] and one [`JobStore::fail_many`] (a
//! transaction each, every item still guarded by its lease) while the next
//! ones queue up behind it. A run's call returns only once its own outcome
//! is committed, so nothing is reported done before it is durable; under
//! load one commit serves many jobs.

use std::sync::Arc;

use serde_json::Value;
use tokio::sync::{mpsc, oneshot};
use tokio::task::JoinHandle;

use crate::error::Error;
use crate::job::{Job, JobId, Lease};
use crate::store::{JobStore, RetryDecision};

/// The most completions one transaction writes.
pub(crate) const MAX_BATCH: usize = 512;

/// How long the batcher waits for more outcomes once one has come.
const LINGER: std::time::Duration = std::time::Duration::from_millis(1);

/// Completions waiting for the batcher at most; runs beyond it wait to
/// hand theirs over (bounded memory).
const QUEUED: usize = 4 * MAX_BATCH;

/// What a run ended in, and where its answer goes.
enum Op {
    Complete(Value, Reply<JobId>),
    Fail(String, RetryDecision, Reply<Job>),
}

struct Item {
    lease: Lease,
    op: Op,
}

type Reply<T> = oneshot::Sender<Result<T, Error>>;

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
    pub async fn complete(&self, lease: Lease, result: Value) -> Result<JobId, Error> {
        let (reply, answer) = oneshot::channel();
        self.submit(lease, Op::Complete(result, reply)).await;
        answer.await.unwrap_or_else(|_| Err(gone()))
    }

    /// Records a failed run of the leased job, in the next batch; returns
    /// once that batch is committed.
    ///
    /// # Errors
    /// As [`JobStore::fail`]; [`Error::Batch`] as for [`complete`](Self::complete).
    pub async fn fail(
        &self,
        lease: Lease,
        error: String,
        decision: RetryDecision,
    ) -> Result<Job, Error> {
        let (reply, answer) = oneshot::channel();
        self.submit(lease, Op::Fail(error, decision, reply)).await;
        answer.await.unwrap_or_else(|_| Err(gone()))
    }

    /// Queues `op`; if the batcher is gone, its reply is dropped with it,
    /// which answers [`gone`].
    async fn submit(&self, lease: Lease, op: Op) {
        let _ = self.tx.send(Item { lease, op }).await;
    }
}

fn gone() -> Error {
    Error::Batch("the worker pool's completion batcher has stopped".to_owned())
}

async fn run<S: JobStore>(store: Arc<S>, mut rx: mpsc::Receiver<Item>) {
    let mut items = Vec::with_capacity(MAX_BATCH);
    while rx.recv_many(&mut items, MAX_BATCH).await > 0 {
        // Runs that finished about the same time are still on their way
        // (those the last commit freed slots for start and end within
        // it): let them hand theirs over, for up to `LINGER`, before the
        // batch is cut. One commit for all of them costs less than one
        // each, and a commit that waits for the disk takes longer than
        // this wait.
        //
        // One sleep, then what came: a wait on the channel would wake
        // this task (and set a timer) once an outcome. A batch that fills
        // meanwhile waits out the rest of the millisecond; what is beyond
        // `MAX_BATCH` goes in the next one.
        if items.len() < MAX_BATCH {
            tokio::time::sleep(LINGER).await;
            while items.len() < MAX_BATCH {
                match rx.try_recv() {
                    Ok(item) => items.push(item),
                    Err(_) => break,
                }
            }
        }
        let mut done = Vec::new();
        let mut done_replies = Vec::new();
        let mut failed = Vec::new();
        let mut failed_replies = Vec::new();
        for item in items.drain(..) {
            match item.op {
                Op::Complete(result, reply) => {
                    done.push((item.lease, result));
                    done_replies.push(reply);
                }
                Op::Fail(error, decision, reply) => {
                    failed.push((item.lease, error, decision));
                    failed_replies.push(reply);
                }
            }
        }
        if !done.is_empty() {
            answer(done_replies, store.complete_many_ids(done).await);
        }
        if !failed.is_empty() {
            answer(failed_replies, store.fail_many(failed).await);
        }
    }
}

/// Sends each run its answer, or the batch's error to all of them.
fn answer<T>(replies: Vec<Reply<T>>, results: Result<Vec<Result<T, Error>>, Error>) {
    match results {
        Ok(results) => {
            for (reply, result) in replies.into_iter().zip(results) {
                let _ = reply.send(result);
            }
        }
        Err(e) => {
            // Each run must still tell a damaged file from a database
            // that may answer on the next try.
            let damaged = e.is_damaged();
            let msg = match damaged {
                true => crate::worker::health::innermost(&e),
                false => describe(&e),
            };
            for reply in replies {
                let err = match damaged {
                    true => Error::Damaged(msg.clone()),
                    false => Error::Batch(msg.clone()),
                };
                let _ = reply.send(Err(err));
            }
        }
    }
}

/// `e` with its sources: "database error" alone says too little.
pub(crate) fn describe(e: &Error) -> String {
    let mut msg = e.to_string();
    let mut source = std::error::Error::source(e);
    while let Some(s) = source {
        msg.push_str(": ");
        msg.push_str(&s.to_string());
        source = s.source();
    }
    msg
}
