//! The hand-over between the callers and a background writer: a bounded
//! queue behind a mutex, and a wake-up only when the writer has something
//! to start. A record that joins a batch already waiting for the writer
//! wakes no one: on a machine of two cores a wake-up handed from a
//! request's thread to the writer's costs tens of microseconds of
//! latency, and a record per request must not pay it.

use std::sync::{Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use tokio::sync::Notify;

/// Records waiting for a background writer, which takes them a batch at
/// a time ([`Queue::next_batch`]) and is woken twice per batch at most:
/// by its first record, and by the one that fills it (or the close).
/// [`Spool`](crate::Spool) writes through one; a writer that does not
/// spill (the gateway's trace writer) can use one alone.
///
/// ```
/// use std::time::Duration;
/// use sluice_spool::{Queue, Refused};
///
/// # #[tokio::main(flavor = "current_thread")]
/// # async fn main() {
/// let queue = Queue::new(2, 8);
/// assert!(queue.push(1).is_ok());
/// assert!(queue.push(2).is_ok());
/// assert!(matches!(queue.push(3), Err(Refused::Full(3))));
/// queue.close();
/// let mut batch = Vec::new();
/// // Closed: what is queued comes out at once, without the linger.
/// assert!(queue.next_batch(&mut batch, Duration::from_secs(60)).await);
/// assert_eq!(batch, [1, 2]);
/// batch.clear();
/// assert!(!queue.next_batch(&mut batch, Duration::from_secs(60)).await);
/// # }
/// ```
#[derive(Debug)]
pub struct Queue<T> {
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

/// A record the queue did not take, given back.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Refused<T> {
    /// The queue holds its capacity.
    Full(T),
    /// The queue was closed ([`Queue::close`]).
    Closed(T),
}

impl<T> Refused<T> {
    /// The record.
    pub fn into_inner(self) -> T {
        match self {
            Refused::Full(r) | Refused::Closed(r) => r,
        }
    }
}

impl<T> Queue<T> {
    /// A queue of at most `capacity` records (at least 1), taken `batch`
    /// at a time (at least 1, at most `capacity`).
    pub fn new(capacity: usize, batch: usize) -> Queue<T> {
        let capacity = capacity.max(1);
        Queue {
            state: Mutex::new(State {
                records: Vec::new(),
                closed: false,
            }),
            capacity,
            // A batch larger than the queue could never fill: its writer
            // would linger in full while records are refused.
            batch: batch.clamp(1, capacity),
            wake: Notify::new(),
        }
    }

    fn lock(&self) -> MutexGuard<'_, State<T>> {
        // A panic while the lock was held cannot leave the vector
        // half-pushed: the queue is still a queue.
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues `record` and returns at once.
    ///
    /// # Errors
    /// The record, given back, when the queue is full or closed.
    pub fn push(&self, record: T) -> Result<(), Refused<T>> {
        let mut s = self.lock();
        if s.closed {
            return Err(Refused::Closed(record));
        }
        if s.records.len() >= self.capacity {
            return Err(Refused::Full(record));
        }
        s.records.push(record);
        let n = s.records.len();
        drop(s);
        // The first record of a batch wakes the writer (which then
        // lingers for more), the one that fills it ends the linger; the
        // others only join the batch.
        if n == 1 || n == self.batch {
            self.wake.notify_one();
        }
        Ok(())
    }

    /// Refuses records from now on and wakes the writer to take what is
    /// queued without lingering.
    pub fn close(&self) {
        self.lock().closed = true;
        self.wake.notify_one();
    }

    /// Records waiting.
    pub fn len(&self) -> usize {
        self.lock().records.len()
    }

    /// Whether no record is waiting.
    pub fn is_empty(&self) -> bool {
        self.len() == 0
    }

    /// Takes every record waiting (the oldest first), for a writer that
    /// puts them elsewhere.
    pub fn drain(&self) -> Vec<T> {
        std::mem::take(&mut self.lock().records)
    }

    /// Records waiting, and whether the queue is closed.
    fn state(&self) -> (usize, bool) {
        let s = self.lock();
        (s.records.len(), s.closed)
    }

    /// Waits for the next batch and moves it into `into` (empty): the
    /// oldest records, a batch at most. Once a record waits, it waits up
    /// to `linger` more for a full batch (records that join meanwhile do
    /// not wake it: only the one that fills the batch, the close, or the
    /// end of the linger does); once closed it takes what is queued at
    /// once. `false` when the queue is closed and empty: nothing will
    /// come any more.
    pub async fn next_batch(&self, into: &mut Vec<T>, linger: Duration) -> bool {
        loop {
            let (queued, closed) = self.state();
            if queued == 0 {
                if closed {
                    return false;
                }
                // Until the first record of the next batch, or the close.
                self.wake.notified().await;
                continue;
            }
            if !closed && queued < self.batch {
                self.linger(linger).await;
            }
            self.take(into);
            return true;
        }
    }

    /// Waits up to `linger` for the queue to hold a full batch (or to
    /// close).
    async fn linger(&self, linger: Duration) {
        if linger.is_zero() {
            return;
        }
        let end = tokio::time::sleep(linger);
        tokio::pin!(end);
        loop {
            tokio::select! {
                () = &mut end => return,
                // A wake-up left from an earlier push is checked and
                // waited through like any other.
                () = self.wake.notified() => {
                    let (queued, closed) = self.state();
                    if closed || queued >= self.batch {
                        return;
                    }
                }
            }
        }
    }

    /// Moves the oldest records, a batch at most, into `into` (empty):
    /// the whole queue is swapped with it when it fits, so that neither
    /// side allocates once both vectors have grown.
    fn take(&self, into: &mut Vec<T>) {
        debug_assert!(into.is_empty());
        let mut s = self.lock();
        if s.records.len() <= self.batch {
            std::mem::swap(&mut s.records, into);
        } else {
            into.extend(s.records.drain(..self.batch));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    const LINGER: Duration = Duration::from_secs(10);

    #[tokio::test(start_paused = true)]
    async fn a_batch_waits_for_the_linger_unless_it_fills() {
        let queue = Arc::new(Queue::new(100, 3));
        let mut batch = Vec::new();
        queue.push(1).unwrap();
        let mut next = Box::pin(queue.next_batch(&mut batch, LINGER));
        // One record: the writer lingers for more.
        tokio::select! {
            biased;
            _ = &mut next => panic!("a batch of one before the linger ended"),
            () = tokio::time::sleep(LINGER / 2) => {}
        }
        queue.push(2).unwrap();
        tokio::select! {
            biased;
            _ = &mut next => panic!("a batch of two before the linger ended"),
            () = tokio::time::sleep(LINGER / 4) => {}
        }
        // The third fills the batch: taken at once, before the linger's end.
        queue.push(3).unwrap();
        queue.push(4).unwrap();
        let before = tokio::time::Instant::now();
        assert!(next.await);
        assert_eq!(tokio::time::Instant::now(), before);
        assert_eq!(batch, [1, 2, 3]);
        assert_eq!(queue.len(), 1);
        // The one left waits out a linger of its own.
        batch.clear();
        let before = tokio::time::Instant::now();
        assert!(queue.next_batch(&mut batch, LINGER).await);
        assert_eq!(tokio::time::Instant::now() - before, LINGER);
        assert_eq!(batch, [4]);
        assert!(queue.is_empty());
    }

    #[tokio::test(start_paused = true)]
    async fn the_close_ends_the_linger_and_the_last_batch_ends_the_writer() {
        let queue = Arc::new(Queue::new(200, 50));
        let writer = {
            let queue = Arc::clone(&queue);
            tokio::spawn(async move {
                let (mut batches, mut batch) = (Vec::new(), Vec::new());
                while queue.next_batch(&mut batch, LINGER).await {
                    batches.push(std::mem::take(&mut batch));
                }
                (batches, tokio::time::Instant::now())
            })
        };
        let start = tokio::time::Instant::now();
        for n in 0..120 {
            queue.push(n).unwrap();
        }
        tokio::time::sleep(LINGER / 2).await;
        queue.close();
        assert_eq!(queue.push(999), Err(Refused::Closed(999)));
        let (batches, ended) = writer.await.unwrap();
        // Two full batches at once, the rest at the close, not after the
        // linger; in order, none lost.
        assert_eq!(
            batches.iter().map(Vec::len).collect::<Vec<_>>(),
            [50, 50, 20]
        );
        assert_eq!(batches.concat(), (0..120).collect::<Vec<_>>());
        assert_eq!(ended - start, LINGER / 2);
    }

    #[test]
    fn a_full_queue_gives_the_record_back() {
        let queue = Queue::new(2, 10);
        assert_eq!(queue.push("a"), Ok(()));
        assert_eq!(queue.push("b"), Ok(()));
        assert_eq!(queue.push("c"), Err(Refused::Full("c")));
        assert_eq!(queue.push("d").unwrap_err().into_inner(), "d");
        assert_eq!(queue.len(), 2);
    }
}
