//! [`Conn`](crate::backend::Conn) for sqlx connections, and reading a job
//! back from a row.

use serde_json::Value;
use sluice_store::Columns;

use crate::error::Error;
use crate::job::{Job, JobId, JobState, JobSummary, Lease};
use sluice_store::Timestamp;

/// Declares a struct of column positions, one field a column of the same
/// name, found by name in a row.
macro_rules! positions {
    ($(#[$doc:meta])* $name:ident { $($col:ident),* $(,)? }) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy)]
        pub struct $name {
            $($col: usize,)*
        }

        impl $name {
            /// Where the columns are in `row` (and every row of its result).
            ///
            /// # Errors
            /// A column missing.
            pub fn of(row: &(impl Columns + ?Sized)) -> Result<Self, Error> {
                Ok(Self { $($col: row.index_of(stringify!($col))?,)* })
            }
        }
    };
}

positions! {
    /// Where a [`JobSummary`]'s columns are in a result's rows: looked up
    /// by name once a result, not once a row (a claim returns hundreds).
    SummaryColumns {
        id, queue, kind, tenant, grp, priority, idempotency_key, attempts,
        max_attempts, reschedules, run_at, state, last_error, lease_owner,
        lease_token, lease_expires_at, created_at, updated_at, finished_at,
    }
}

positions! {
    /// The columns of a [`Job`] beyond its summary's, likewise.
    DetailColumns {
        payload, result, traceparent, progress, schedule, schedule_tick,
        parent_id, pending_children, on_child_failure,
    }
}

/// Where a whole [`Job`]'s columns are in a result's rows.
#[derive(Debug, Clone, Copy)]
pub struct JobColumns {
    summary: SummaryColumns,
    detail: DetailColumns,
}

impl JobColumns {
    /// Where the columns are in `row` (and every row of its result).
    ///
    /// # Errors
    /// A column missing.
    pub fn of(row: &(impl Columns + ?Sized)) -> Result<Self, Error> {
        Ok(Self {
            summary: SummaryColumns::of(row)?,
            detail: DetailColumns::of(row)?,
        })
    }
}

/// Decodes every row of a result with `decode`, the columns' positions
/// found once, in its first row, by `of`.
pub fn decode_rows<R, C, T>(
    rows: &[R],
    of: impl FnOnce(&R) -> Result<C, Error>,
    decode: impl Fn(&R, &C) -> Result<T, Error>,
) -> Result<Vec<T>, Error> {
    let Some(first) = rows.first() else {
        return Ok(Vec::new());
    };
    let cols = of(first)?;
    rows.iter().map(|row| decode(row, &cols)).collect()
}

/// Reads a row of `jobs` (all columns) as a [`Job`], its columns where
/// `cols` says.
pub fn decode_job_at(row: &(impl Columns + ?Sized), cols: &JobColumns) -> Result<Job, Error> {
    let summary = decode_summary_at(row, &cols.summary)?;
    let c = &cols.detail;
    let id = summary.id;
    let json = |col: &'static str, s: String| {
        serde_json::from_str::<Value>(&s)
            .map_err(|e| Error::Corrupt(format!("job {id}: {col}: {e}")))
    };
    let payload = json("payload", required(row.text_at(c.payload)?, "payload")?)?;
    let result = row
        .text_at(c.result)?
        .map(|s| json("result", s))
        .transpose()?;
    let traceparent = row.text_at(c.traceparent)?;
    let progress = row
        .text_at(c.progress)?
        .map(|s| json("progress", s))
        .transpose()?;
    let mut job = Job::from_summary(summary, payload, result, traceparent);
    job.schedule = row.text_at(c.schedule)?;
    job.schedule_tick = row.int_at(c.schedule_tick)?.map(Timestamp::from_millis);
    job.progress = progress;
    job.parent = row.int_at(c.parent_id)?.map(JobId);
    job.pending_children = u32::try_from(row.int_at(c.pending_children)?.unwrap_or(0)).unwrap_or(0);
    job.on_child_failure = row.text_at(c.on_child_failure)?;
    Ok(job)
}

/// Reads a row of `jobs` as a [`JobSummary`] (every column but `payload`
/// and `result`, which the row need not hold), its columns where `c` says.
pub fn decode_summary_at(
    row: &(impl Columns + ?Sized),
    c: &SummaryColumns,
) -> Result<JobSummary, Error> {
    let id = JobId(required(row.int_at(c.id)?, "id")?);
    let corrupt =
        |what: &str, e: &dyn std::fmt::Display| Error::Corrupt(format!("job {id}: {what}: {e}"));
    let int = |i: usize, col: &'static str| -> Result<i64, Error> { required(row.int_at(i)?, col) };
    let text =
        |i: usize, col: &'static str| -> Result<String, Error> { required(row.text_at(i)?, col) };
    let count = |i: usize, col: &'static str| -> Result<u32, Error> {
        u32::try_from(int(i, col)?).map_err(|e| corrupt(col, &e))
    };
    let state: JobState = text(c.state, "state")?
        .parse()
        .map_err(|e| corrupt("state", &e))?;
    let lease = match (row.text_at(c.lease_owner)?, row.int_at(c.lease_expires_at)?) {
        (Some(owner), Some(expires)) => Some(Lease {
            job: id,
            owner,
            token: int(c.lease_token, "lease_token")?,
            expires_at: Timestamp::from_millis(expires),
        }),
        _ => None,
    };
    Ok(JobSummary {
        id,
        queue: text(c.queue, "queue")?,
        kind: text(c.kind, "kind")?,
        tenant: text(c.tenant, "tenant")?,
        group: text(c.grp, "grp")?,
        priority: i32::try_from(int(c.priority, "priority")?)
            .map_err(|e| corrupt("priority", &e))?,
        idempotency_key: row.text_at(c.idempotency_key)?,
        attempts: count(c.attempts, "attempts")?,
        max_attempts: count(c.max_attempts, "max_attempts")?,
        reschedules: count(c.reschedules, "reschedules")?,
        run_at: Timestamp::from_millis(int(c.run_at, "run_at")?),
        state,
        last_error: row.text_at(c.last_error)?,
        lease,
        created_at: Timestamp::from_millis(int(c.created_at, "created_at")?),
        updated_at: Timestamp::from_millis(int(c.updated_at, "updated_at")?),
        finished_at: row.int_at(c.finished_at)?.map(Timestamp::from_millis),
    })
}

fn required<T>(v: Option<T>, col: &str) -> Result<T, Error> {
    v.ok_or_else(|| Error::Corrupt(format!("column {col} is NULL")))
}

/// Implements [`Conn`](crate::backend::Conn) for the sqlx connection type
/// `$conn` of database `$db`, whose rows are `$row`.
macro_rules! impl_conn {
    ($conn:ty, $row:ty) => {
        impl $crate::backend::Conn for $conn {
            async fn jobs(
                &mut self,
                sql: &'static str,
                args: $crate::backend::Args,
            ) -> Result<Vec<$crate::Job>, $crate::Error> {
                let rows = sluice_store::bind(sqlx::query(sql), args)
                    .fetch_all(&mut *self)
                    .await?;
                $crate::conn::decode_rows(
                    &rows,
                    $crate::conn::JobColumns::of,
                    $crate::conn::decode_job_at,
                )
            }

            async fn claimed(
                &mut self,
                sql: &'static str,
                args: $crate::backend::Args,
            ) -> Result<Vec<($crate::Job, i64, i64)>, $crate::Error> {
                let rows = sluice_store::bind(sqlx::query(sql), args)
                    .fetch_all(&mut *self)
                    .await?;
                let of = |first: &_| -> Result<_, $crate::Error> {
                    let index = |col| sluice_store::Columns::index_of(first, col);
                    Ok((
                        $crate::conn::JobColumns::of(first)?,
                        index("group_served")?,
                        index("tenant_served")?,
                    ))
                };
                $crate::conn::decode_rows(&rows, of, |row, (cols, group, tenant)| {
                    let job = $crate::conn::decode_job_at(row, cols)?;
                    let served = |i: usize| -> Result<i64, $crate::Error> {
                        Ok(sqlx::Row::try_get::<i64, _>(row, i)?)
                    };
                    Ok((job, served(*group)?, served(*tenant)?))
                })
            }

            async fn summaries(
                &mut self,
                sql: &'static str,
                args: $crate::backend::Args,
            ) -> Result<Vec<$crate::JobSummary>, $crate::Error> {
                let rows = sluice_store::bind(sqlx::query(sql), args)
                    .fetch_all(&mut *self)
                    .await?;
                $crate::conn::decode_rows(
                    &rows,
                    $crate::conn::SummaryColumns::of,
                    $crate::conn::decode_summary_at,
                )
            }

            async fn ints(
                &mut self,
                sql: &'static str,
                args: $crate::backend::Args,
            ) -> Result<Vec<i64>, $crate::Error> {
                let rows = sluice_store::bind(sqlx::query(sql), args)
                    .fetch_all(&mut *self)
                    .await?;
                let first = |row: &$row| sqlx::Row::try_get(row, 0);
                Ok(rows.iter().map(first).collect::<Result<_, _>>()?)
            }

            async fn texts(
                &mut self,
                sql: &'static str,
                args: $crate::backend::Args,
            ) -> Result<Vec<String>, $crate::Error> {
                let rows = sluice_store::bind(sqlx::query(sql), args)
                    .fetch_all(&mut *self)
                    .await?;
                let first = |row: &$row| sqlx::Row::try_get(row, 0);
                Ok(rows.iter().map(first).collect::<Result<_, _>>()?)
            }

            async fn pairs(
                &mut self,
                sql: &'static str,
                args: $crate::backend::Args,
            ) -> Result<Vec<(String, String)>, $crate::Error> {
                let rows = sluice_store::bind(sqlx::query(sql), args)
                    .fetch_all(&mut *self)
                    .await?;
                let pair = |row: &$row| -> Result<(String, String), sqlx::Error> {
                    Ok((sqlx::Row::try_get(row, 0)?, sqlx::Row::try_get(row, 1)?))
                };
                Ok(rows.iter().map(pair).collect::<Result<_, _>>()?)
            }

            async fn counts(
                &mut self,
                sql: &'static str,
                args: $crate::backend::Args,
            ) -> Result<Vec<(String, String, i64)>, $crate::Error> {
                let rows = sluice_store::bind(sqlx::query(sql), args)
                    .fetch_all(&mut *self)
                    .await?;
                let triple = |row: &$row| -> Result<(String, String, i64), sqlx::Error> {
                    Ok((
                        sqlx::Row::try_get(row, 0)?,
                        sqlx::Row::try_get(row, 1)?,
                        sqlx::Row::try_get(row, 2)?,
                    ))
                };
                Ok(rows.iter().map(triple).collect::<Result<_, _>>()?)
            }

            async fn records<T: Send>(
                &mut self,
                sql: &'static str,
                args: $crate::backend::Args,
                decode: fn(&dyn sluice_store::Columns) -> Result<T, $crate::Error>,
            ) -> Result<Vec<T>, $crate::Error> {
                let rows = sluice_store::bind(sqlx::query(sql), args)
                    .fetch_all(&mut *self)
                    .await?;
                rows.iter().map(|row| decode(row)).collect()
            }

            async fn execute(
                &mut self,
                sql: &'static str,
                args: $crate::backend::Args,
            ) -> Result<u64, $crate::Error> {
                let done = sluice_store::bind(sqlx::query(sql), args)
                    .execute(&mut *self)
                    .await?;
                Ok(done.rows_affected())
            }
        }
    };
}
pub(crate) use impl_conn;
