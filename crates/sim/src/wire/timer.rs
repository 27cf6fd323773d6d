//! Sleeps precise to tens of microseconds, for the latencies the sim
//! plays.
//!
//! tokio's timer rounds a sleep up to its millisecond wheel, and its
//! driver's wait to whole milliseconds again: a 20 ms latency took 21 to
//! 22 ms, and where in that millisecond an answer fell depended on when
//! its request arrived. In front of the sim, a proxy's added time was
//! then partly hidden (a request arriving 0.2 ms later still met the same
//! tick) or rounded up to a whole millisecond, run by run. Here one
//! thread keeps the deadlines in a heap and waits on a condition variable
//! with the earliest as its timeout (the kernel's high-resolution timers,
//! within the thread's timer slack, 50 µs by default), then wakes each
//! sleeper through a oneshot channel.

use std::cmp::Reverse;
use std::collections::BinaryHeap;
use std::sync::{Condvar, Mutex, OnceLock};
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

/// Sleeps until `wait` has passed, on the sim's timer thread.
pub(crate) async fn sleep(wait: Duration) {
    sleep_until(Instant::now() + wait).await;
}

/// Sleeps until `at`, on the sim's timer thread.
pub(crate) async fn sleep_until(at: Instant) {
    let (tx, rx) = oneshot::channel();
    timers().add(at, tx);
    // An error means the timer thread is gone (it never ends while the
    // process runs): do not hang on it.
    let _ = rx.await;
}

/// The deadlines, earliest first, and the sleepers to wake.
struct Timers {
    due: Mutex<Heap>,
    changed: Condvar,
}

#[derive(Default)]
struct Heap {
    entries: BinaryHeap<Reverse<Entry>>,
    /// Orders entries with the same deadline by arrival.
    seq: u64,
}

struct Entry {
    at: Instant,
    seq: u64,
    wake: oneshot::Sender<()>,
}

impl PartialEq for Entry {
    fn eq(&self, other: &Self) -> bool {
        (self.at, self.seq) == (other.at, other.seq)
    }
}

impl Eq for Entry {}

impl PartialOrd for Entry {
    fn partial_cmp(&self, other: &Self) -> Option<std::cmp::Ordering> {
        Some(self.cmp(other))
    }
}

impl Ord for Entry {
    fn cmp(&self, other: &Self) -> std::cmp::Ordering {
        (self.at, self.seq).cmp(&(other.at, other.seq))
    }
}

/// The process's timer thread, started on first use.
fn timers() -> &'static Timers {
    static TIMERS: OnceLock<&'static Timers> = OnceLock::new();
    TIMERS.get_or_init(|| {
        let timers: &'static Timers = Box::leak(Box::new(Timers {
            due: Mutex::new(Heap::default()),
            changed: Condvar::new(),
        }));
        std::thread::Builder::new()
            .name("sluice-sim-timer".into())
            .spawn(move || timers.run())
            .expect("spawn the sim's timer thread");
        timers
    })
}

impl Timers {
    fn add(&self, at: Instant, wake: oneshot::Sender<()>) {
        let mut heap = self.due.lock().unwrap_or_else(|e| e.into_inner());
        heap.seq += 1;
        let seq = heap.seq;
        let earliest = heap.entries.peek().is_none_or(|Reverse(e)| at < e.at);
        heap.entries.push(Reverse(Entry { at, seq, wake }));
        drop(heap);
        if earliest {
            self.changed.notify_one();
        }
    }

    /// Wakes each sleeper at its deadline, for ever.
    fn run(&self) {
        let mut woken = Vec::new();
        let mut heap = self.due.lock().unwrap_or_else(|e| e.into_inner());
        loop {
            let now = Instant::now();
            while heap.entries.peek().is_some_and(|Reverse(e)| e.at <= now) {
                if let Some(Reverse(e)) = heap.entries.pop() {
                    woken.push(e.wake);
                }
            }
            if !woken.is_empty() {
                // Woken outside the lock, in deadline order; a sleeper
                // that gave up (its request dropped) is simply skipped.
                drop(heap);
                for wake in woken.drain(..) {
                    let _ = wake.send(());
                }
                heap = self.due.lock().unwrap_or_else(|e| e.into_inner());
                continue;
            }
            heap = match heap.entries.peek() {
                None => self.changed.wait(heap).unwrap_or_else(|e| e.into_inner()),
                Some(Reverse(e)) => {
                    let left = e.at.saturating_duration_since(now);
                    let waited = self.changed.wait_timeout(heap, left);
                    waited.unwrap_or_else(|e| e.into_inner()).0
                }
            };
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use super::*;

    #[tokio::test]
    async fn a_sleep_lasts_at_least_its_wait() {
        let start = Instant::now();
        sleep(Duration::from_millis(15)).await;
        assert!(start.elapsed() >= Duration::from_millis(15));
    }

    #[tokio::test]
    async fn sleepers_wake_in_deadline_order() {
        let order = Arc::new(Mutex::new(Vec::new()));
        let mut tasks = Vec::new();
        let base = Instant::now();
        for ms in [30u64, 10, 20, 0, 10] {
            let order = Arc::clone(&order);
            tasks.push(tokio::spawn(async move {
                sleep_until(base + Duration::from_millis(ms)).await;
                order.lock().unwrap().push(ms);
            }));
        }
        for t in tasks {
            t.await.unwrap();
        }
        assert_eq!(*order.lock().unwrap(), [0, 10, 10, 20, 30]);
    }

    #[tokio::test]
    async fn a_dropped_sleeper_does_not_stop_the_others() {
        let gone = tokio::spawn(sleep(Duration::from_millis(5)));
        gone.abort();
        let start = Instant::now();
        sleep(Duration::from_millis(10)).await;
        assert!(start.elapsed() >= Duration::from_millis(10));
    }
}
