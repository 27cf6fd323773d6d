//! What a SQL backend provides to the store logic that both share.
//!
//! The logic ([`crate::ops`]) is written once against [`Conn`]: a
//! connection that runs a statement with a few kinds of argument and reads
//! back jobs, integers, strings or counts. Each backend implements it for
//! its connection type (one macro in [`crate::conn`]) and says how to start
//! and commit a writing transaction ([`Backend`]). The items are `pub` in
//! a private module: the public [`Store`](crate::Store) names them in its
//! bounds, users cannot.

use std::future::Future;
use std::ops::DerefMut;

use crate::error::Error;
use crate::job::{Job, JobId, JobState};
use crate::sql::Dialect;

pub use sluice_store::{Arg, Args, args};

impl From<JobId> for Arg {
    fn from(id: JobId) -> Self {
        Arg::Int(Some(id.0))
    }
}

impl From<JobState> for Arg {
    fn from(s: JobState) -> Self {
        Arg::Text(Some(s.as_str().to_owned()))
    }
}

/// A connection (or transaction) that runs the shared statements.
pub trait Conn: Send {
    /// Runs `sql` and reads every row as a job.
    fn jobs(
        &mut self,
        sql: &'static str,
        args: Args,
    ) -> impl Future<Output = Result<Vec<Job>, Error>> + Send;
    /// Runs `sql` and reads every row as a job with the integer columns
    /// `group_served` and `tenant_served` ([`Dialect::claim`]).
    fn claimed(
        &mut self,
        sql: &'static str,
        args: Args,
    ) -> impl Future<Output = Result<Vec<(Job, i64, i64)>, Error>> + Send;
    /// Runs `sql` and reads every row as a job without payload and result.
    fn summaries(
        &mut self,
        sql: &'static str,
        args: Args,
    ) -> impl Future<Output = Result<Vec<crate::job::JobSummary>, Error>> + Send;
    /// Runs `sql` and reads the first column of every row as an integer.
    fn ints(
        &mut self,
        sql: &'static str,
        args: Args,
    ) -> impl Future<Output = Result<Vec<i64>, Error>> + Send;
    /// Runs `sql` and reads the first column of every row as a string.
    fn texts(
        &mut self,
        sql: &'static str,
        args: Args,
    ) -> impl Future<Output = Result<Vec<String>, Error>> + Send;
    /// Runs `sql` and reads the first two columns of every row as strings.
    fn pairs(
        &mut self,
        sql: &'static str,
        args: Args,
    ) -> impl Future<Output = Result<Vec<(String, String)>, Error>> + Send;
    /// Runs `sql` and reads rows of (string, string, integer).
    fn counts(
        &mut self,
        sql: &'static str,
        args: Args,
    ) -> impl Future<Output = Result<Vec<(String, String, i64)>, Error>> + Send;
    /// Runs `sql` and reads every row with `decode`, which takes its
    /// columns by name (rows of tables other than `jobs`).
    fn records<T: Send>(
        &mut self,
        sql: &'static str,
        args: Args,
        decode: fn(&dyn sluice_store::Columns) -> Result<T, Error>,
    ) -> impl Future<Output = Result<Vec<T>, Error>> + Send;
    /// Runs `sql` and returns how many rows it changed.
    fn execute(
        &mut self,
        sql: &'static str,
        args: Args,
    ) -> impl Future<Output = Result<u64, Error>> + Send;
}

/// A database that a [`Store`](crate::Store) runs on. No method has a
/// default: a backend that wraps others ([`AnyBackend`](crate::AnyBackend))
/// must say what each one does.
pub trait Backend: Send + Sync + std::fmt::Debug + 'static {
    /// A writing transaction, rolled back if dropped uncommitted.
    type Tx: DerefMut<Target: Conn + Sized> + Send;
    /// A connection for reading.
    type Read: DerefMut<Target: Conn + Sized> + Send;
    /// Its statements that differ from the shared ones.
    fn dialect(&self) -> &'static Dialect;
    /// Starts a writing transaction.
    fn begin(&self) -> impl Future<Output = Result<Self::Tx, Error>> + Send;
    /// Starts the writing transaction of a claim, which need not reach the
    /// disk before it is acknowledged: a claim lost to a power cut leaves
    /// the job available, as if rescued without using an attempt, and the
    /// next durable commit makes it durable anyway (see
    /// [`SqliteStore`](crate::SqliteStore)).
    fn begin_claim(&self) -> impl Future<Output = Result<Self::Tx, Error>> + Send;
    /// Commits it.
    fn commit(tx: Self::Tx) -> impl Future<Output = Result<(), Error>> + Send;
    /// A connection for reads outside a transaction.
    fn read(&self) -> impl Future<Output = Result<Self::Read, Error>> + Send;
    /// Closes its pools, waiting for connections in use to be returned.
    fn close(&self) -> impl Future<Output = ()> + Send;
}
