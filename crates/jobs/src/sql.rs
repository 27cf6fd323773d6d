//! The statements both backends run. SQLite and PostgreSQL share one SQL
//! text wherever they agree (both take `$n` parameters, `RETURNING`,
//! `ON CONFLICT … DO UPDATE` and window functions); [`Dialect`] holds the
//! rest. Every transition names the state it starts from in its `WHERE`,
//! which is what makes it safe against a concurrent one.

mod dialect;

#[cfg(test)]
pub use dialect::SQLITE_WALKED;
pub use dialect::{Dialect, Insert, POSTGRES, SQLITE};

use std::sync::OnceLock;

/// Values an [`Insert::Rows`] row binds: every column of [`Insert`], the
/// time twice (`created_at`, `updated_at`).
pub const ROW_VALUES: usize = 14;

/// The multi-row insert of `rows` jobs ([`Insert::Rows`]), `rows` a power
/// of two up to 512: the few sizes there are keep their prepared
/// statements cached, where a statement per batch size would not.
///
/// Its parameters are anonymous (`?`), bound in order: sqlx looks each
/// named one (`$n`, `?n`) up by index through SQLite's list of names, a
/// walk of that list, which made binding 5,000 of them quadratic (a third
/// of an enqueue's time, measured).
///
/// # Panics
/// If `rows` is not one of those sizes (a bug of the caller's).
pub fn insert_rows(rows: usize) -> &'static str {
    static SIZES: [OnceLock<String>; 10] = [const { OnceLock::new() }; 10];
    assert!(rows.is_power_of_two() && rows <= 512, "{rows} rows");
    let size = &SIZES[rows.trailing_zeros() as usize];
    size.get_or_init(|| {
        let row = format!("({})", ["?"; ROW_VALUES].join(", "));
        let mut sql = String::from(dialect::insert_columns!());
        sql.push_str("VALUES ");
        sql.push_str(&vec![row; rows].join(", "));
        sql.push_str(" RETURNING *");
        sql
    })
}

pub const GET: &str = "SELECT * FROM jobs WHERE id = $1";

/// The columns of a [`JobSummary`](crate::JobSummary): all but `payload`
/// and `result`.
macro_rules! summary {
    () => {
        "SELECT id, queue, kind, tenant, grp, priority, idempotency_key, attempts, max_attempts, \
                reschedules, run_at, state, last_error, lease_owner, lease_token, lease_expires_at, \
                created_at, updated_at, finished_at FROM jobs "
    };
}

/// Every tenant's jobs of queue `$1` (or any) in state `$2` (or any) after
/// id `$3`, `$4` at most, by primary key.
pub const LIST: &str = concat!(
    summary!(),
    "WHERE ($1 IS NULL OR queue = $1) AND ($2 IS NULL OR state = $2) AND id > $3 \
     ORDER BY id LIMIT $4"
);

/// As [`LIST`] for tenant `$5` alone, on `jobs_tenant` (tenant, id, queue,
/// and on PostgreSQL state): the tenant's entries in id order, the queue
/// tested on the index entry, so another tenant's jobs are never read.
/// SQLite tests the state on the row: an index holding it would move at
/// every change of state (migration 11). (A separate statement: `($5 IS
/// NULL OR tenant = $5)` would keep SQLite from using the index at all.)
pub const LIST_TENANT: &str = concat!(
    summary!(),
    "WHERE tenant = $5 AND id > $3 AND ($1 IS NULL OR queue = $1) AND ($2 IS NULL OR state = $2) \
     ORDER BY id LIMIT $4"
);

pub const PAUSED: &str = "SELECT name FROM queues WHERE paused";

pub const SET_PAUSED: &str = "INSERT INTO queues (name, paused, updated_at) VALUES ($1, $2, $3) \
    ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at";

/// The guard every call on a leased job shares: still running under the
/// same claim of the same worker.
macro_rules! leased {
    () => {
        " WHERE id = $1 AND state = 'running' AND lease_owner = $2 AND lease_token = $3 RETURNING *"
    };
}

pub const HEARTBEAT: &str = concat!(
    "UPDATE jobs SET lease_expires_at = $4, updated_at = $5",
    leased!()
);

pub const PROGRESS: &str = concat!("UPDATE jobs SET progress = $4, updated_at = $5", leased!());

pub const COMPLETE: &str = concat!(
    "UPDATE jobs SET state = 'completed', result = $4, attempts = attempts + 1, \
     lease_owner = NULL, lease_expires_at = NULL, updated_at = $5, finished_at = $5",
    leased!()
);

/// `$4` attempts used (0 or 1), `$5` reschedules (0 or 1), `$6` dead now,
/// `$7` the state otherwise, `$8` run at, `$9` error, `$10` now. Using the
/// last attempt makes the job dead whatever was asked.
pub const FAIL: &str = concat!(
    "UPDATE jobs SET attempts = attempts + $4, reschedules = reschedules + $5, \
     state = CASE WHEN $6 OR attempts + $4 >= max_attempts THEN 'dead' ELSE $7 END, \
     finished_at = CASE WHEN $6 OR attempts + $4 >= max_attempts THEN $10 ELSE NULL END, \
     run_at = $8, due = $8 <= $10, last_error = $9, lease_owner = NULL, lease_expires_at = NULL, \
     updated_at = $10",
    leased!()
);

pub const RESCUE: &str = "UPDATE jobs SET attempts = attempts + 1, \
    state = CASE WHEN attempts + 1 >= max_attempts THEN 'dead' ELSE 'retryable' END, \
    finished_at = CASE WHEN attempts + 1 >= max_attempts THEN $1 ELSE NULL END, \
    run_at = $1, due = TRUE, last_error = 'lease expired: worker ' || lease_owner || ' stopped heartbeating', \
    lease_owner = NULL, lease_expires_at = NULL, updated_at = $1 \
    WHERE state = 'running' AND lease_expires_at <= $1 RETURNING *";

pub const RETRY: &str = "UPDATE jobs SET state = 'available', attempts = 0, reschedules = 0, \
    run_at = $2, due = TRUE, finished_at = NULL, updated_at = $2 WHERE id = $1 AND state = 'dead' RETURNING *";

pub const RETRY_DEAD: &str = "UPDATE jobs SET state = 'available', attempts = 0, reschedules = 0, \
    run_at = $2, due = TRUE, finished_at = NULL, updated_at = $2 \
    WHERE queue = $1 AND state = 'dead' AND finished_at IS NOT NULL";

pub const CANCEL: &str = "UPDATE jobs SET state = 'cancelled', lease_owner = NULL, \
    lease_expires_at = NULL, updated_at = $2, finished_at = $2 \
    WHERE id = $1 AND state IN ('available', 'scheduled', 'running', 'retryable') RETURNING *";

/// Every dead job, through `jobs_finished` (a finished job, and only
/// one, has its `finished_at`: every statement that ends a job sets it,
/// every one that revives a job clears it).
pub const PURGE_DEAD: &str = "DELETE FROM jobs \
    WHERE state = 'dead' AND finished_at IS NOT NULL AND ($1 IS NULL OR queue = $1)";

/// The ready jobs of each queue by state, among the due ones (`$due` is
/// `due`) or those not yet due (`NOT due`): one pass over `jobs_ready` or
/// `jobs_waiting` (whose condition this repeats), grouped in its order.
macro_rules! ready_counts {
    ($due:literal) => {
        concat!(
            "SELECT queue, SUM(CASE WHEN state = 'available' THEN 1 ELSE 0 END) AS a, \
                    SUM(CASE WHEN state = 'scheduled' THEN 1 ELSE 0 END) AS s, \
                    SUM(CASE WHEN state = 'retryable' THEN 1 ELSE 0 END) AS r \
             FROM jobs WHERE state IN ('available', 'scheduled', 'retryable') AND ",
            $due,
            " GROUP BY queue"
        )
    };
}

/// (queue, state, jobs) rows, a state possibly in more than one row of a
/// queue (add them up), read from the index each state is in, so that no
/// index need hold every job's state (each would move at every change of
/// state: migration 11 on SQLite, 13 on PostgreSQL): the ready jobs
/// through `jobs_ready` (due) and `jobs_waiting` (not yet), counted by
/// state in one pass each; the running ones through `jobs_running`; the
/// finished ones through `jobs_finished`, in its order (state, queue).
pub const COUNTS: &str = concat!(
    "WITH ready AS MATERIALIZED (",
    ready_counts!("due"),
    " UNION ALL ",
    ready_counts!("NOT due"),
    ") SELECT queue, 'available', a FROM ready \
     UNION ALL SELECT queue, 'scheduled', s FROM ready \
     UNION ALL SELECT queue, 'retryable', r FROM ready \
     UNION ALL SELECT queue, 'running', COUNT(*) FROM jobs WHERE state = 'running' GROUP BY queue \
     UNION ALL SELECT queue, state, COUNT(*) FROM jobs \
       WHERE finished_at IS NOT NULL AND state IN ('completed', 'dead', 'cancelled') \
       GROUP BY state, queue"
);

/// Jobs in state `$1` finished at or before `$2`, unless a key live at
/// `$3` still points at them. `jobs_finished` holds a state's jobs by
/// queue, then by age: the statement steps from one queue to the next
/// (`qs`) and seeks each queue's oldest, so it reads only what it deletes
/// and the first kept job of each queue.
pub const EXPIRE_JOBS: &str = "WITH RECURSIVE qs(q) AS (\
      SELECT (SELECT MIN(queue) FROM jobs WHERE state = $1 AND finished_at IS NOT NULL) \
      UNION ALL \
      SELECT (SELECT MIN(queue) FROM jobs \
              WHERE state = $1 AND finished_at IS NOT NULL AND queue > qs.q) \
      FROM qs WHERE qs.q IS NOT NULL) \
    DELETE FROM jobs WHERE id IN (SELECT j.id FROM qs, jobs j \
      WHERE j.state = $1 AND j.queue = qs.q AND j.finished_at IS NOT NULL AND j.finished_at <= $2) \
    AND NOT EXISTS (SELECT 1 FROM idempotency_keys k WHERE k.job_id = jobs.id AND k.expires_at > $3)";

pub const EXPIRE_KEYS: &str = "DELETE FROM idempotency_keys WHERE expires_at <= $1";

/// Forgets the rotation of groups that have no jobs left, so that the
/// table stays as small as the set of live groups.
pub const FORGET_GROUPS: &str = "DELETE FROM queue_groups \
    WHERE (queue, tenant, grp) NOT IN (SELECT DISTINCT queue, tenant, grp FROM jobs)";

/// As [`FORGET_GROUPS`] for tenants.
pub const FORGET_TENANTS: &str = "DELETE FROM queue_tenants \
    WHERE (queue, tenant) NOT IN (SELECT DISTINCT queue, tenant FROM jobs)";
