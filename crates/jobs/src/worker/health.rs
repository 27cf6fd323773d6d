//! Whether the job store was found damaged. A corrupt page makes every
//! outcome that touches it fail to record; a pool that went on claiming
//! would run each job again every time its lease expired, for ever, while
//! the gateway reported itself ready. So the first error that says the
//! file is damaged stops the pool claiming (the jobs it holds are left to
//! their leases) and is kept here for `/readyz` to report.

use std::sync::{Arc, OnceLock};

use crate::error::Error;
use crate::worker::batch::describe;

/// A job store's damage, once found; shared by clones.
#[derive(Debug, Clone, Default)]
pub struct StoreHealth {
    damaged: Arc<OnceLock<String>>,
}

impl StoreHealth {
    /// A store not known to be damaged.
    pub fn new() -> StoreHealth {
        StoreHealth::default()
    }

    /// Records `e` if it says the store is damaged (logged once, as an
    /// error). Returns whether the store is known damaged, now or before.
    pub fn observe(&self, e: &Error) -> bool {
        if e.is_damaged() {
            let mut first = false;
            self.damaged.get_or_init(|| {
                first = true;
                innermost(e)
            });
            if first {
                tracing::error!(
                    error = %describe(e),
                    "jobs: the job store is damaged; no more jobs are claimed here (a job whose \
                     outcome cannot be recorded would run again each time its lease expired) and \
                     /readyz reports not ready. Stop sluice, check the file (`sluice check-config \
                     --stores`) and restore it from a backup"
                );
            }
        }
        self.is_damaged()
    }

    /// Whether the store was found damaged.
    pub fn is_damaged(&self) -> bool {
        self.damaged.get().is_some()
    }

    /// What was found, if the store is damaged.
    pub fn damage(&self) -> Option<&str> {
        self.damaged.get().map(String::as_str)
    }

    /// Marks the store damaged for `reason` (for a check of its own, or
    /// a test).
    pub fn mark(&self, reason: impl Into<String>) {
        let _ = self.damaged.set(reason.into());
    }
}

/// What the database itself said: the last of `e`'s sources (sqlx
/// repeats it along the chain).
pub(crate) fn innermost(e: &Error) -> String {
    if let Error::Damaged(said) = e {
        return said.clone();
    }
    let mut last: &dyn std::error::Error = e;
    while let Some(s) = last.source() {
        last = s;
    }
    last.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_damage_marks_the_store_and_the_first_cause_is_kept() {
        let h = StoreHealth::new();
        assert!(!h.observe(&Error::Batch("database is locked".into())));
        assert!(!h.observe(&Error::Database(sqlx::Error::PoolTimedOut)));
        assert!(!h.is_damaged());
        assert!(h.observe(&Error::Damaged("database disk image is malformed".into())));
        assert!(h.clone().observe(&Error::Batch("later".into())));
        assert!(
            h.damage().unwrap().contains("malformed"),
            "{:?}",
            h.damage()
        );
    }
}
