//! What a store has asked of its database: statements and commits,
//! counted as they run, so that what a job costs can be read without a
//! clock (a loaded machine slows every figure in seconds, not these).

use std::sync::atomic::{AtomicU64, Ordering};

use crate::backend::{Args, Conn};
use crate::error::Error;
use crate::job::{Job, JobSummary};

/// Statements and commits a [`Store`](crate::Store) has run since it was
/// opened ([`Store::tally`](crate::Store::tally)). Subtract two readings
/// to cost a stretch of work: per job, per claim.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct Tally {
    /// Statements sent to the database, reads included; `BEGIN` and
    /// `COMMIT` are not counted.
    pub statements: u64,
    /// Writing transactions committed.
    pub commits: u64,
    /// Of [`commits`](Self::commits), those that wait for the disk where
    /// the store syncs (SQLite with [`full_sync`](crate::SqliteOptions::full_sync),
    /// PostgreSQL): every commit but a claim's.
    pub synced_commits: u64,
}

impl std::ops::Sub for Tally {
    type Output = Tally;

    fn sub(self, earlier: Tally) -> Tally {
        Tally {
            statements: self.statements.saturating_sub(earlier.statements),
            commits: self.commits.saturating_sub(earlier.commits),
            synced_commits: self.synced_commits.saturating_sub(earlier.synced_commits),
        }
    }
}

/// The running counts behind [`Tally`].
#[derive(Debug, Default)]
pub(crate) struct Counter {
    statements: AtomicU64,
    commits: AtomicU64,
    synced_commits: AtomicU64,
}

impl Counter {
    pub fn read(&self) -> Tally {
        Tally {
            statements: self.statements.load(Ordering::Relaxed),
            commits: self.commits.load(Ordering::Relaxed),
            synced_commits: self.synced_commits.load(Ordering::Relaxed),
        }
    }

    /// Counts a commit, `synced` if it waited for the disk.
    pub fn commit(&self, synced: bool) {
        self.commits.fetch_add(1, Ordering::Relaxed);
        if synced {
            self.synced_commits.fetch_add(1, Ordering::Relaxed);
        }
    }

    fn statement(&self) {
        self.statements.fetch_add(1, Ordering::Relaxed);
    }
}

/// A connection whose statements are counted.
pub(crate) struct Counted<'a, C> {
    pub conn: &'a mut C,
    pub counter: &'a Counter,
}

/// Each method counts one statement and hands it to the connection.
macro_rules! counted {
    ($($name:ident -> $out:ty;)*) => {
        impl<C: Conn> Conn for Counted<'_, C> {
            $(
                async fn $name(&mut self, sql: &'static str, args: Args) -> Result<$out, Error> {
                    self.counter.statement();
                    self.conn.$name(sql, args).await
                }
            )*

            async fn records<T: Send>(
                &mut self,
                sql: &'static str,
                args: Args,
                decode: fn(&dyn sluice_store::Columns) -> Result<T, Error>,
            ) -> Result<Vec<T>, Error> {
                self.counter.statement();
                self.conn.records(sql, args, decode).await
            }
        }
    };
}

counted! {
    jobs -> Vec<Job>;
    claimed -> Vec<(Job, i64, i64)>;
    summaries -> Vec<JobSummary>;
    ints -> Vec<i64>;
    texts -> Vec<String>;
    pairs -> Vec<(String, String)>;
    counts -> Vec<(String, String, i64)>;
    execute -> u64;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_tally_subtracts_field_by_field() {
        let later = Tally {
            statements: 10,
            commits: 4,
            synced_commits: 3,
        };
        let earlier = Tally {
            statements: 4,
            commits: 1,
            synced_commits: 1,
        };
        assert_eq!(
            later - earlier,
            Tally {
                statements: 6,
                commits: 3,
                synced_commits: 2,
            }
        );
        assert_eq!(earlier - later, Tally::default());
    }
}
