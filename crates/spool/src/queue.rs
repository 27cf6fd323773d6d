//! The hand-over between the callers and the writer: a bounded queue
//! behind a mutex, and a wake-up only when the writer has something to
//! start. A record that joins a batch already waiting for the writer
//! wakes no one: on a machine of two cores a wake-up handed from a
//! request's thread to the writer's costs tens of microseconds of
//! latency, and a record per request must not pay it.

use std::sync::{Mutex, MutexGuard, PoisonError};

use tokio::sync::Notify;

/// Records waiting for the writer.
#[derive(Debug)]
pub(crate) struct Queue<T> {
    state: Mutex<State<T>>,
    capacity: usize,
    batch: usize,
    /// The writer waits here; see [`Queue::push`] for who wakes it.
    wake: Notify,
}

#[derive(Debug)]
struct State<T> {
    records: Vec<T>,
    closed: bool,
}

impl<T> Queue<T> {
    /// A queue of at most `capacity` records, written `batch` at a time.
    pub(crate) fn new(capacity: usize, batch: usize) -> Queue<T> {
        Queue {
            state: Mutex::new(State {
                records: Vec::new(),
                closed: false,
            }),
            capacity: capacity.max(1),
            batch: batch.max(1),
            wake: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A panic while the lock was held cannot leave the vector
        // half-pushed: the queue is still a queue.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `record`; gives it back when the queue is full or closed.
    /// The writer is woken by the first record of a batch (it then waits
    /// up to the linger for more) and by the one that fills a batch (it
    /// writes at once); the others only join the batch.
    pub(crate) fn push(&self, record: T) -> Result<(), T> {
        let mut s = self.lock();
        if s.closed || s.records.len() >= self.capacity {
            return Err(record);
        }
        s.records.push(record);
        let n = s.records.len();
        drop(s);
        if n == 1 || n == self.batch {
            self.wake.notify_one();
        }
        Ok(())
    }

    /// Refuses records from now on and wakes the writer to drain.
    pub(crate) fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_one();
    }

    /// Records waiting, and whether the queue is closed.
    pub(crate) fn state(&self) -> (usize, bool) {
        let s = self.lock();
        (s.records.len(), s.closed)
    }

    /// Records waiting.
    pub(crate) fn len(&self) -> usize {
        self.lock().records.len()
    }

    /// Until a [`push`](Self::push) or [`close`](Self::close) wakes the
    /// writer (at once if one did since the last wait).
    pub(crate) async fn woken(&self) {
        self.wake.notified().await;
    }

    /// Moves the oldest records, a batch at most, into `into` (empty):
    /// the whole queue is swapped with it when it fits, so that neither
    /// side allocates once both vectors have grown.
    pub(crate) fn take(&self, into: &mut Vec<T>) {
        debug_assert!(into.is_empty());
        let mut s = self.lock();
        if s.records.len() <= self.batch {
            std::mem::swap(&mut s.records, into);
        } else {
            into.extend(s.records.drain(..self.batch));
        }
    }
}
