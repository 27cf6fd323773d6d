//! Admission control: priority classes, fair queuing, depth limits, single flight and bulkheads.
//!
//! ```
//! use std::sync::Arc;
//! use std::time::Duration;
//!
//! use sluice_admit::{Admission, AdmissionQueue, Bulkheads, Priority, QueueConfig, Ticket};
//! use tokio::time::Instant;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), sluice_admit::Error> {
//! // The seed's limits: 50 queued per tenant, 200 in all, 10 running.
//! let queue: AdmissionQueue<Arc<str>> = AdmissionQueue::new(QueueConfig::default());
//! let pools = Bulkheads::default();
//!
//! let deadline = Instant::now() + Duration::from_secs(30);
//! let ticket = Ticket::new("acme", deadline)
//!     .with_priority(Priority::High)
//!     .with_dedup_key("req-42");
//! let answer = match queue.admit(ticket).await? {
//!     Admission::Run(permit) => {
//!         // Leader: run the call in its pool, then share the result with
//!         // any identical request that joined meanwhile.
//!         let _slot = pools.acquire("model", deadline).await?;
//!         let answer: Arc<str> = Arc::from("hello");
//!         permit.complete(Arc::clone(&answer));
//!         answer
//!     }
//!     Admission::Joined(answer) => answer,
//! };
//! assert_eq!(&*answer, "hello");
//! assert!(!queue.is_busy());
//! # Ok(())
//! # }
//! ```

#![warn(missing_docs)]

mod bulkhead;
mod config;
mod error;
mod fair;
mod permit;
mod priority;
mod queue;
mod rate;
mod scheduler;
mod service;
mod stats;
mod ticket;

pub use bulkhead::{Bulkhead, BulkheadPermit, BulkheadStats, Bulkheads, PoolConfig};
pub use config::{QueueConfig, Weights};
pub use error::{Error, ParsePriorityError, Scope};
pub use permit::{Admission, Permit};
pub use priority::Priority;
pub use queue::AdmissionQueue;
pub use stats::{LaneStats, Stats};
pub use ticket::Ticket;
