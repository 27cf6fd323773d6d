//! What can go wrong, named for what went wrong.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

/// Which depth limit refused an entry.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Scope {
    /// The tenant (workspace) already has its maximum queued.
    Tenant,
    /// The queue as a whole is at its maximum.
    Total,
}

impl fmt::Display for Scope {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Scope::Tenant => "tenant",
            Scope::Total => "total",
        })
    }
}

/// Admission errors.
///
/// Waiting is kept apart from never: [`Error::QueueFull`] and
/// [`Error::WouldWait`] carry how long to wait before trying again (it
/// becomes `Retry-After`); the others say this attempt is over.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[non_exhaustive]
pub enum Error {
    /// A depth limit refused the entry; nothing was queued.
    #[error("queue full ({scope} depth limit), retry after {}ms", retry_after.as_millis())]
    QueueFull {
        /// The limit that refused it.
        scope: Scope,
        /// A hint: how long the backlog in front of the caller takes to drain
        /// at the dispatch rate observed lately.
        retry_after: Duration,
    },

    /// A ticket that does not wait
    /// ([`AdmissionQueue::try_admit`](crate::AdmissionQueue::try_admit))
    /// would have had to: every slot of its lane is held, or an identical
    /// request is still running. Nothing was queued.
    #[error("admission would have to wait and the caller will not, retry after {}ms", retry_after.as_millis())]
    WouldWait {
        /// A hint: how long the lane's backlog takes to drain at the
        /// dispatch rate observed lately.
        retry_after: Duration,
    },

    /// The deadline passed while waiting: in the queue, for a bulkhead or for
    /// the leader of a deduplicated request. Nothing is held.
    #[error("deadline exceeded while waiting for admission")]
    DeadlineExceeded,

    /// The queue or the bulkhead was closed.
    #[error("admission closed")]
    Closed,

    /// The bulkhead's waiting line is full.
    #[error("bulkhead {pool:?} full: its waiting line is at its maximum")]
    BulkheadFull {
        /// The pool's name.
        pool: Arc<str>,
    },

    /// This request joined an identical one that left without a result
    /// (dropped, expired or closed). Retrying with the same key elects a new
    /// leader.
    #[error("the deduplicated request this one joined was cancelled")]
    LeaderCancelled,
}

/// A priority name that is not `high`, `normal` or `low`.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown priority {0:?}: expected \"high\", \"normal\" or \"low\"")]
pub struct ParsePriorityError(pub String);

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_are_lowercase_and_name_the_cause() {
        let full = Error::QueueFull {
            scope: Scope::Tenant,
            retry_after: Duration::from_millis(1500),
        };
        assert_eq!(
            full.to_string(),
            "queue full (tenant depth limit), retry after 1500ms"
        );
        let bulkhead = Error::BulkheadFull {
            pool: "model".into(),
        };
        assert_eq!(
            bulkhead.to_string(),
            "bulkhead \"model\" full: its waiting line is at its maximum"
        );
        let would_wait = Error::WouldWait {
            retry_after: Duration::from_secs(1),
        };
        assert_eq!(
            would_wait.to_string(),
            "admission would have to wait and the caller will not, retry after 1000ms"
        );
        for e in [
            Error::DeadlineExceeded,
            Error::Closed,
            Error::LeaderCancelled,
        ] {
            let s = e.to_string();
            assert_eq!(s, s.to_lowercase());
        }
    }
}
