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

use crate::clock::Timestamp;
use crate::error::Error;
use crate::job::{Job, JobId, JobState};
use crate::sql::Dialect;

/// One statement argument.
#[derive(Debug, Clone)]
pub enum Arg {
    /// An integer or NULL.
    Int(Option<i64>),
    /// A string or NULL.
    Text(Option<String>),
    /// A boolean.
    Bool(bool),
    /// An array of integers or NULLs: a `BIGINT[]` on PostgreSQL, a JSON
    /// array (read with `json_each`) on SQLite.
    Ints(Vec<Option<i64>>),
    /// An array of strings or NULLs, bound as [`Ints`](Self::Ints) is.
    Texts(Vec<Option<String>>),
    /// An array of booleans, bound as [`Ints`](Self::Ints) is.
    Bools(Vec<bool>),
}

impl From<i64> for Arg {
    fn from(v: i64) -> Self {
        Arg::Int(Some(v))
    }
}

impl From<Option<i64>> for Arg {
    fn from(v: Option<i64>) -> Self {
        Arg::Int(v)
    }
}

impl From<Timestamp> for Arg {
    fn from(t: Timestamp) -> Self {
        Arg::Int(Some(t.as_millis()))
    }
}

impl From<JobId> for Arg {
    fn from(id: JobId) -> Self {
        Arg::Int(Some(id.0))
    }
}

impl From<&str> for Arg {
    fn from(v: &str) -> Self {
        Arg::Text(Some(v.to_owned()))
    }
}

impl From<String> for Arg {
    fn from(v: String) -> Self {
        Arg::Text(Some(v))
    }
}

impl From<Option<&str>> for Arg {
    fn from(v: Option<&str>) -> Self {
        Arg::Text(v.map(str::to_owned))
    }
}

impl From<JobState> for Arg {
    fn from(s: JobState) -> Self {
        Arg::Text(Some(s.as_str().to_owned()))
    }
}

impl From<bool> for Arg {
    fn from(v: bool) -> Self {
        Arg::Bool(v)
    }
}

/// Statement arguments, `$1` first.
pub type Args = Vec<Arg>;

/// `args![a, b, …]`: statement arguments from anything that converts to [`Arg`].
macro_rules! args {
    ($($arg:expr),* $(,)?) => {
        vec![$($crate::backend::Arg::from($arg)),*]
    };
}
pub(crate) use args;

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
    /// Runs `sql` and returns how many rows it changed.
    fn execute(
        &mut self,
        sql: &'static str,
        args: Args,
    ) -> impl Future<Output = Result<u64, Error>> + Send;
}

/// A database that a [`Store`](crate::Store) runs on.
pub trait Backend: Send + Sync + std::fmt::Debug + 'static {
    /// Its connection.
    type Conn: Conn;
    /// A writing transaction, rolled back if dropped uncommitted.
    type Tx: DerefMut<Target = Self::Conn> + Send;
    /// A connection for reading.
    type Read: DerefMut<Target = Self::Conn> + Send;
    /// Its statements that differ from the shared ones.
    const DIALECT: &'static Dialect;
    /// Starts a writing transaction.
    fn begin(&self) -> impl Future<Output = Result<Self::Tx, Error>> + Send;
    /// Starts the writing transaction of a claim, which need not reach the
    /// disk before it is acknowledged: a claim lost to a power cut leaves
    /// the job available, as if rescued without using an attempt, and the
    /// next durable commit makes it durable anyway (see
    /// [`SqliteStore`](crate::SqliteStore)). The default is [`begin`](Self::begin).
    fn begin_claim(&self) -> impl Future<Output = Result<Self::Tx, Error>> + Send {
        self.begin()
    }
    /// Commits it.
    fn commit(tx: Self::Tx) -> impl Future<Output = Result<(), Error>> + Send;
    /// A connection for reads outside a transaction.
    fn read(&self) -> impl Future<Output = Result<Self::Read, Error>> + Send;
}
