//! [`Conn`](crate::backend::Conn) for sqlx connections, and reading a job
//! back from a row.

use serde_json::Value;
use sluice_store::Columns;

use crate::error::Error;
use crate::job::{Job, JobId, JobState, JobSummary, Lease};
use sluice_store::Timestamp;

/// Reads a row of `jobs` (all columns) as a [`Job`].
pub fn decode_job(row: &impl Columns) -> Result<Job, Error> {
    let summary = decode_summary(row)?;
    let id = summary.id;
    let json = |col: &'static str, s: String| {
        serde_json::from_str::<Value>(&s)
            .map_err(|e| Error::Corrupt(format!("job {id}: {col}: {e}")))
    };
    let payload = json("payload", required(row.text("payload")?, "payload")?)?;
    let result = row.text("result")?.map(|s| json("result", s)).transpose()?;
    let traceparent = row.text("traceparent")?;
    let progress = row
        .text("progress")?
        .map(|s| json("progress", s))
        .transpose()?;
    let mut job = Job::from_summary(summary, payload, result, traceparent);
    job.schedule = row.text("schedule")?;
    job.schedule_tick = row.int("schedule_tick")?.map(Timestamp::from_millis);
    job.progress = progress;
    job.parent = row.int("parent_id")?.map(JobId);
    job.pending_children = u32::try_from(row.int("pending_children")?.unwrap_or(0)).unwrap_or(0);
    job.on_child_failure = row.text("on_child_failure")?;
    Ok(job)
}

/// Reads a row of `jobs` as a [`JobSummary`]: every column but `payload`
/// and `result`, which the row need not hold.
pub fn decode_summary(row: &impl Columns) -> Result<JobSummary, Error> {
    let id = JobId(required(row.int("id")?, "id")?);
    let corrupt =
        |what: &str, e: &dyn std::fmt::Display| Error::Corrupt(format!("job {id}: {what}: {e}"));
    let int = |col: &'static str| -> Result<i64, Error> { required(row.int(col)?, col) };
    let text = |col: &'static str| -> Result<String, Error> { required(row.text(col)?, col) };
    let count = |col: &'static str| -> Result<u32, Error> {
        u32::try_from(int(col)?).map_err(|e| corrupt(col, &e))
    };
    let state: JobState = text("state")?.parse().map_err(|e| corrupt("state", &e))?;
    let lease = match (row.text("lease_owner")?, row.int("lease_expires_at")?) {
        (Some(owner), Some(expires)) => Some(Lease {
            job: id,
            owner,
            token: int("lease_token")?,
            expires_at: Timestamp::from_millis(expires),
        }),
        _ => None,
    };
    Ok(JobSummary {
        id,
        queue: text("queue")?,
        kind: text("kind")?,
        tenant: text("tenant")?,
        group: text("grp")?,
        priority: i32::try_from(int("priority")?).map_err(|e| corrupt("priority", &e))?,
        idempotency_key: row.text("idempotency_key")?,
        attempts: count("attempts")?,
        max_attempts: count("max_attempts")?,
        reschedules: count("reschedules")?,
        run_at: Timestamp::from_millis(int("run_at")?),
        state,
        last_error: row.text("last_error")?,
        lease,
        created_at: Timestamp::from_millis(int("created_at")?),
        updated_at: Timestamp::from_millis(int("updated_at")?),
        finished_at: row.int("finished_at")?.map(Timestamp::from_millis),
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
                rows.iter().map($crate::conn::decode_job).collect()
            }

            async fn claimed(
                &mut self,
                sql: &'static str,
                args: $crate::backend::Args,
            ) -> Result<Vec<($crate::Job, i64, i64)>, $crate::Error> {
                let rows = sluice_store::bind(sqlx::query(sql), args)
                    .fetch_all(&mut *self)
                    .await?;
                rows.iter()
                    .map(|row| {
                        let job = $crate::conn::decode_job(row)?;
                        let served = |col| -> Result<i64, $crate::Error> {
                            Ok(sqlx::Row::try_get::<i64, _>(row, col)?)
                        };
                        Ok((job, served("group_served")?, served("tenant_served")?))
                    })
                    .collect()
            }

            async fn summaries(
                &mut self,
                sql: &'static str,
                args: $crate::backend::Args,
            ) -> Result<Vec<$crate::JobSummary>, $crate::Error> {
                let rows = sluice_store::bind(sqlx::query(sql), args)
                    .fetch_all(&mut *self)
                    .await?;
                rows.iter().map($crate::conn::decode_summary).collect()
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
