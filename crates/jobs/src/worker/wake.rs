//! Waking a queue's claim loop before its next poll: when a retry this
//! pool scheduled falls due, or when someone enqueued a job. Polling
//! remains the fallback (jobs enqueued elsewhere, retries of other
//! processes), so a lost wake-up only costs one poll interval.

use std::cmp::Reverse;
use std::collections::{BinaryHeap, HashMap};
use std::sync::Mutex;
use std::time::Duration;

use tokio::sync::Notify;
use tokio::time::Instant;

/// Due times remembered per queue at most; beyond, polling covers them.
const MAX_DUE: usize = 4_096;
/// Added to a due time: the store compares whole milliseconds of its own
/// clock, so a claim at the very instant could find the job not yet due.
const MARGIN: Duration = Duration::from_millis(2);

/// One queue's wake-ups.
#[derive(Debug, Default)]
pub(crate) struct QueueWake {
    notify: Notify,
    due: Mutex<BinaryHeap<Reverse<Instant>>>,
}

impl QueueWake {
    /// Claim again now.
    pub fn now(&self) {
        self.notify.notify_one();
    }

    /// Claim again in `after`.
    pub fn after(&self, after: Duration) {
        let at = Instant::now() + after + MARGIN;
        {
            let mut due = self.due.lock().unwrap_or_else(|p| p.into_inner());
            if due.len() >= MAX_DUE {
                return;
            }
            due.push(Reverse(at));
        }
        // The loop may be asleep until a later instant: let it look again.
        self.notify.notify_one();
    }

    /// When to look next: `None` if something is due already, else the
    /// earlier of the next due time and `poll_at`.
    pub fn next(&self, now: Instant, poll_at: Instant) -> Option<Instant> {
        let mut due = self.due.lock().unwrap_or_else(|p| p.into_inner());
        let mut any_due = false;
        while let Some(Reverse(at)) = due.peek().copied() {
            if at > now {
                break;
            }
            due.pop();
            any_due = true;
        }
        if any_due {
            return None;
        }
        Some(due.peek().map_or(poll_at, |Reverse(at)| (*at).min(poll_at)))
    }

    /// Waits for [`now`](Self::now) or [`after`](Self::after).
    pub async fn notified(&self) {
        self.notify.notified().await;
    }
}

/// Every queue's wake-ups, fixed when the pool starts.
pub(crate) type Wakes = HashMap<String, std::sync::Arc<QueueWake>>;

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn due_times_come_before_the_poll() {
        let w = QueueWake::default();
        let now = Instant::now();
        let poll = now + Duration::from_secs(1);
        assert_eq!(w.next(now, poll), Some(poll));
        w.after(Duration::from_millis(100));
        assert_eq!(w.next(now, poll), Some(now + Duration::from_millis(102)));
        assert_eq!(w.next(now + Duration::from_millis(200), poll), None);
        assert_eq!(w.next(now, poll), Some(poll), "a due time wakes once");
    }
}
