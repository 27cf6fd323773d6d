//! Jobs per queue and state.

use serde::{Deserialize, Serialize};

use crate::job::JobState;

/// Job counts of one queue.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct QueueCounts {
    /// The queue.
    pub queue: String,
    /// Whether claims are paused.
    pub paused: bool,
    /// Jobs by state.
    pub counts: StateCounts,
}

/// A number of jobs per state.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
#[allow(missing_docs)] // one field per JobState, named after it
pub struct StateCounts {
    pub available: u64,
    pub scheduled: u64,
    pub running: u64,
    pub retryable: u64,
    pub completed: u64,
    pub dead: u64,
    pub cancelled: u64,
}

impl StateCounts {
    /// The count for `state`.
    pub fn get(&self, state: JobState) -> u64 {
        *self.slot(state)
    }

    /// The count over every state.
    pub fn total(&self) -> u64 {
        JobState::ALL.into_iter().map(|s| self.get(s)).sum()
    }

    pub(crate) fn slot(&self, state: JobState) -> &u64 {
        match state {
            JobState::Available => &self.available,
            JobState::Scheduled => &self.scheduled,
            JobState::Running => &self.running,
            JobState::Retryable => &self.retryable,
            JobState::Completed => &self.completed,
            JobState::Dead => &self.dead,
            JobState::Cancelled => &self.cancelled,
        }
    }

    /// Adds `n` to the count for `state`.
    pub(crate) fn add(&mut self, state: JobState, n: u64) {
        let slot = match state {
            JobState::Available => &mut self.available,
            JobState::Scheduled => &mut self.scheduled,
            JobState::Running => &mut self.running,
            JobState::Retryable => &mut self.retryable,
            JobState::Completed => &mut self.completed,
            JobState::Dead => &mut self.dead,
            JobState::Cancelled => &mut self.cancelled,
        };
        *slot += n;
    }
}
