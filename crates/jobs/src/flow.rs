//! Flows: a parent job that runs once its children are done, stored in
//! one transaction ([`Store::enqueue_flow`](crate::Store::enqueue_flow)).
//!
//! The parent waits `scheduled` until every child completed; the store's
//! triggers count the children down in the transaction of each one's
//! end, so no path that ends a child (a worker, a rescue, the operator)
//! can forget its parent. A child that goes dead or is cancelled fails
//! the parent ([`ChildFailure::Fail`]: the parent goes dead naming it) or
//! counts as done ([`ChildFailure::Ignore`]). Cancelling the parent
//! cancels its children (and theirs) that have not started. A child may
//! be a flow itself; its parent is then the outer parent's child.
//!
//! ```
//! use serde_json::json;
//! use sluice_jobs::flow::{ChildFailure, NewFlow};
//! use sluice_jobs::{JobState, JobStore, NewJob, SqliteStore, StoreConfig};
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), sluice_jobs::Error> {
//! let store = SqliteStore::in_memory(StoreConfig::default()).await?;
//! let flow = NewFlow::new(NewJob::new("q", "report.merge", json!({})))
//!     .child(NewJob::new("q", "report.part", json!({"part": 1})))
//!     .child(NewJob::new("q", "report.part", json!({"part": 2})))
//!     .on_child_failure(ChildFailure::Fail);
//! let jobs = store.enqueue_flow(flow).await?;
//! let (parent, children) = (&jobs[0], &jobs[1..]);
//! assert_eq!((parent.state, parent.pending_children), (JobState::Scheduled, 2));
//! assert!(children.iter().all(|c| c.parent == Some(parent.id)));
//! # Ok(())
//! # }
//! ```

use crate::new_job::{NewJob, invalid};

/// The most jobs one flow holds, nested flows included.
pub const MAX_FLOW_JOBS: usize = 100;
/// The deepest nesting: a flow in a flow in a flow in a flow.
pub const MAX_FLOW_DEPTH: usize = 4;

/// What a child that goes dead or is cancelled does to its parent.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub enum ChildFailure {
    /// The parent goes dead, naming the child (the default).
    #[default]
    Fail,
    /// It counts as done: the parent runs once the others are.
    Ignore,
}

impl ChildFailure {
    /// `fail` or `ignore`, as stored and shown.
    pub const fn as_str(self) -> &'static str {
        match self {
            ChildFailure::Fail => "fail",
            ChildFailure::Ignore => "ignore",
        }
    }
}

/// A child of a flow: a job, or a flow of its own.
#[derive(Debug, Clone)]
pub enum Child {
    /// A job.
    Job(NewJob),
    /// A flow, whose parent is this flow's child.
    Flow(NewFlow),
}

/// A flow to store.
#[derive(Debug, Clone)]
pub struct NewFlow {
    /// The job that runs after the children.
    pub parent: NewJob,
    /// The children, at least one.
    pub children: Vec<Child>,
    /// What a failed child does to the parent.
    pub on_child_failure: ChildFailure,
}

impl NewFlow {
    /// A flow of `parent` without children yet.
    pub fn new(parent: NewJob) -> Self {
        Self {
            parent,
            children: Vec::new(),
            on_child_failure: ChildFailure::Fail,
        }
    }

    /// Adds a job as a child.
    #[must_use]
    pub fn child(mut self, job: NewJob) -> Self {
        self.children.push(Child::Job(job));
        self
    }

    /// Adds a flow as a child.
    #[must_use]
    pub fn child_flow(mut self, flow: NewFlow) -> Self {
        self.children.push(Child::Flow(flow));
        self
    }

    /// Sets what a failed child does.
    #[must_use]
    pub fn on_child_failure(mut self, policy: ChildFailure) -> Self {
        self.on_child_failure = policy;
        self
    }

    /// How many jobs it holds, nested flows included.
    pub fn size(&self) -> usize {
        1 + self
            .children
            .iter()
            .map(|c| match c {
                Child::Job(_) => 1,
                Child::Flow(f) => f.size(),
            })
            .sum::<usize>()
    }

    /// How deep it nests (1 without nested flows).
    pub fn depth(&self) -> usize {
        1 + self
            .children
            .iter()
            .map(|c| match c {
                Child::Job(_) => 0,
                Child::Flow(f) => f.depth(),
            })
            .max()
            .unwrap_or(0)
    }

    /// Checks every job, the bounds, and that no child has an
    /// idempotency key or a `run_at` (only the outermost parent may have a
    /// key: a repeated flow returns its parent).
    ///
    /// # Errors
    /// [`Error::Invalid`](crate::Error::Invalid) naming the problem.
    pub fn validate(&self) -> Result<(), crate::Error> {
        if self.size() > MAX_FLOW_JOBS {
            return Err(invalid("children", "a flow holds at most 100 jobs"));
        }
        if self.depth() > MAX_FLOW_DEPTH {
            return Err(invalid("children", "flows nest at most 4 deep"));
        }
        self.check(true)
    }

    fn check(&self, outermost: bool) -> Result<(), crate::Error> {
        self.parent.validate()?;
        if self.children.is_empty() {
            return Err(invalid("children", "must hold at least one job"));
        }
        if self.parent.run_at.is_some() {
            return Err(invalid(
                "parent.run_at",
                "a flow's parent runs after its children",
            ));
        }
        if !outermost && self.parent.idempotency_key.is_some() {
            return Err(invalid(
                "children.idempotency_key",
                "only the flow's own parent takes an idempotency key",
            ));
        }
        for child in &self.children {
            match child {
                Child::Job(job) => {
                    job.validate()?;
                    if job.idempotency_key.is_some() {
                        return Err(invalid(
                            "children.idempotency_key",
                            "only the flow's own parent takes an idempotency key",
                        ));
                    }
                    if job.tenant != self.parent.tenant {
                        return Err(invalid("children.tenant", "must be the parent's tenant"));
                    }
                }
                Child::Flow(flow) => {
                    if flow.parent.tenant != self.parent.tenant {
                        return Err(invalid("children.tenant", "must be the parent's tenant"));
                    }
                    flow.check(false)?;
                }
            }
        }
        Ok(())
    }
}
