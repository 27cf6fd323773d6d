//! What a caller asks admission for.

use std::num::NonZeroU32;
use std::sync::Arc;

use tokio::time::Instant;

use crate::Priority;

/// One request's claim to a place in the queue.
///
/// Every ticket has a deadline: an entry never waits past it.
/// [`AdmissionQueue::try_admit`](crate::AdmissionQueue::try_admit) does not
/// wait at all and does not read it.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Ticket {
    /// The tenant (workspace) it is queued and counted under.
    pub tenant: Arc<str>,
    /// Its class.
    pub priority: Priority,
    /// Requests of the same tenant with the same key run once: a second one
    /// joins the first and receives a clone of its result. Keys are scoped
    /// to the tenant, so one tenant never receives another's result.
    pub dedup_key: Option<String>,
    /// When to give up waiting (in the queue, or for the leader it joined)
    /// in [`AdmissionQueue::admit`](crate::AdmissionQueue::admit).
    pub deadline: Instant,
    /// The lane it waits in: typically the resource the request will wait
    /// for next (a model, an API). Each lane has its own
    /// [`concurrency`](crate::QueueConfig::concurrency) slots and fair queue,
    /// so requests for a slow resource never hold the slots that requests
    /// for an idle one need. `None`: the one shared lane.
    pub lane: Option<Arc<str>>,
    /// Its weight in fair queuing, when the caller has one of its own (an
    /// API key's, set at run time); `None`: its tenant's from
    /// [`QueueConfig::weights`](crate::QueueConfig::weights). Each
    /// dispatch of it advances its tenant's share by `1 / weight`.
    pub weight: Option<NonZeroU32>,
}

impl Ticket {
    /// A `Normal` ticket without a dedup key.
    pub fn new(tenant: impl Into<Arc<str>>, deadline: Instant) -> Self {
        Ticket {
            tenant: tenant.into(),
            priority: Priority::Normal,
            dedup_key: None,
            deadline,
            lane: None,
            weight: None,
        }
    }

    /// This ticket, in class `priority`.
    #[must_use]
    pub fn with_priority(mut self, priority: Priority) -> Self {
        self.priority = priority;
        self
    }

    /// This ticket, in lane `lane` (see [`Ticket::lane`]).
    #[must_use]
    pub fn with_lane(mut self, lane: impl Into<Arc<str>>) -> Self {
        self.lane = Some(lane.into());
        self
    }

    /// This ticket, weighing `weight` in fair queuing (see
    /// [`Ticket::weight`]).
    #[must_use]
    pub fn with_weight(mut self, weight: NonZeroU32) -> Self {
        self.weight = Some(weight);
        self
    }

    /// This ticket, deduplicated on `key` (a request id, for example).
    #[must_use]
    pub fn with_dedup_key(mut self, key: impl Into<String>) -> Self {
        self.dedup_key = Some(key.into());
        self
    }
}
