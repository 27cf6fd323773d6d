//! The trace writer's wait for more traces, which the traces themselves
//! do not wake (the spool has its own, `sluice_spool`'s queue).

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::Notify;
use tokio::time::Instant;

/// The wait of a background writer that holds a few records and would
/// rather write a fuller batch: it sleeps until the linger is over or
/// until, with what is queued, it has a batch ([`Linger::pushed`]), and
/// does not poll its queue meanwhile. A writer that polled its queue
/// while it lingered was woken by every record: a wake-up (often of
/// another thread) per request; this one wakes once per batch.
#[derive(Debug)]
pub(super) struct Linger {
    full: Notify,
    batch: usize,
    /// Records queued that make a batch with those the lingering writer
    /// holds; [`NOT_LINGERING`] when it is not lingering or has been told.
    needed: AtomicUsize,
}

/// [`Linger::needed`] when nobody is to be told.
const NOT_LINGERING: usize = usize::MAX;

impl Linger {
    /// For batches of `batch` records (at least 1).
    pub(super) fn new(batch: usize) -> Linger {
        Linger {
            full: Notify::new(),
            batch: batch.max(1),
            needed: AtomicUsize::new(NOT_LINGERING),
        }
    }

    /// Call after queueing a record, with the number now queued: ends the
    /// linger once they make a batch with what the writer holds (once:
    /// later records do not notify again).
    pub(super) fn pushed(&self, queued: usize) {
        let needed = self.needed.load(Ordering::SeqCst);
        if queued >= needed
            && self
                .needed
                .compare_exchange(needed, NOT_LINGERING, Ordering::SeqCst, Ordering::SeqCst)
                .is_ok()
        {
            self.full.notify_one();
        }
    }

    /// Sleeps until `until`, or until the queue (`queued` counts it)
    /// holds enough to make a batch with the `held` records.
    pub(super) async fn wait(&self, until: Instant, held: usize, queued: impl FnOnce() -> usize) {
        // A notice that came after the last wait had ended is not about
        // this one.
        tokio::select! {
            biased;
            () = self.full.notified() => {}
            () = std::future::ready(()) => {}
        }
        let needed = self.batch.saturating_sub(held).max(1);
        self.needed.store(needed, Ordering::SeqCst);
        let _lingering = Lingering(self);
        // Records queued before `needed` was set are counted here; those
        // queued after it see it.
        if queued() < needed {
            tokio::select! {
                () = tokio::time::sleep_until(until) => {}
                () = self.full.notified() => {}
            }
        }
    }
}

/// Tells pushers that the wait is over, however it ends (dropped too).
struct Lingering<'a>(&'a Linger);

impl Drop for Lingering<'_> {
    fn drop(&mut self) {
        self.0.needed.store(NOT_LINGERING, Ordering::SeqCst);
    }
}
