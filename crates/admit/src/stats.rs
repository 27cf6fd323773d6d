//! Plain numbers for metrics.

use crate::Priority;

/// A snapshot of the admission queue, for metrics and `/readyz`.
///
/// Counters are totals since the queue was built; the gateway turns them
/// into Prometheus counters. Per-tenant depth is not here on purpose (label
/// cardinality): ask [`AdmissionQueue::tenant_depth`](crate::AdmissionQueue::tenant_depth).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
#[non_exhaustive]
pub struct Stats {
    /// Entries waiting in each class, highest first.
    pub queued_by_priority: [usize; 3],
    /// Tenants with at least one entry waiting.
    pub queued_tenants: usize,
    /// Slots held: admitted requests still running.
    pub in_flight: usize,
    /// Deduplication keys whose leader is queued or running.
    pub flights: usize,
    /// Whether the backlog exceeds twice the concurrency.
    pub busy: bool,
    /// Entries given a slot.
    pub dispatched: u64,
    /// Tickets refused: by a depth limit, or, from
    /// [`try_admit`](crate::AdmissionQueue::try_admit), because they would
    /// have waited.
    pub rejected: u64,
    /// Tickets whose deadline passed while waiting (queued or joined).
    pub expired: u64,
    /// Tickets that joined an identical request instead of queuing.
    pub deduplicated: u64,
    /// Entries whose caller gave up (dropped the future) while queued.
    pub cancelled: u64,
}

impl Stats {
    /// Entries waiting, all classes.
    pub fn queued(&self) -> usize {
        self.queued_by_priority.iter().sum()
    }

    /// Entries waiting in `priority`.
    pub fn queued_in(&self, priority: Priority) -> usize {
        self.queued_by_priority[priority.index()]
    }
}

/// One lane of the admission queue (a model or API), for dashboards.
#[derive(Debug, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub struct LaneStats {
    /// The lane: the resource its tickets named.
    pub lane: std::sync::Arc<str>,
    /// Entries waiting in each class, highest first.
    pub queued_by_priority: [usize; 3],
    /// Slots held in the lane.
    pub in_flight: usize,
}

impl LaneStats {
    /// Entries waiting, all classes.
    pub fn queued(&self) -> usize {
        self.queued_by_priority.iter().sum()
    }
}
