//! The statements both backends run. SQLite and PostgreSQL share one SQL
//! text wherever they agree (both take `$n` parameters, `RETURNING`,
//! `ON CONFLICT … DO UPDATE` and window functions); [`Dialect`] holds the
//! rest. Every transition names the state it starts from in its `WHERE`,
//! which is what makes it safe against a concurrent one.

/// The statements that differ between backends.
#[derive(Debug)]
pub struct Dialect {
    /// Ids of up to `$3` due jobs of queue `$1` at time `$2`, in claim
    /// order: the first job of every group (least recently served group
    /// first), then the second of every group, and so on.
    pub pick: &'static str,
    /// Marks the jobs whose ids are the JSON array `$4` running, leased to
    /// `$1` until `$2`, at time `$3`; returns them.
    pub take: &'static str,
    /// Completes, at time `$1`, the jobs of the JSON array `$2` of
    /// `{"id", "owner", "token", "result"}` (the result as JSON text) whose
    /// lease still holds; returns the completed jobs.
    pub complete_many: &'static str,
}

macro_rules! take {
    ($ids:literal) => {
        concat!(
            "UPDATE jobs SET state = 'running', lease_owner = $1, lease_expires_at = $2, \
                    lease_token = lease_token + 1, updated_at = $3 \
             WHERE id IN (",
            $ids,
            ") AND state IN ('available', 'scheduled', 'retryable') AND run_at <= $3 \
             RETURNING *"
        )
    };
}

/// The `SET` of a completion at time `$1`, the result in `d.result`.
macro_rules! completed {
    () => {
        "UPDATE jobs SET state = 'completed', result = d.result, attempts = attempts + 1, \
                lease_owner = NULL, lease_expires_at = NULL, updated_at = $1, finished_at = $1 "
    };
}

/// The lease guard of a batch row `d`.
macro_rules! batch_leased {
    () => {
        " WHERE jobs.id = d.id AND jobs.state = 'running' AND jobs.lease_owner = d.owner \
            AND jobs.lease_token = d.token "
    };
}

/// SQLite: one writer at a time (the claim runs in an `IMMEDIATE`
/// transaction), so no row locks are needed.
///
/// Ranking every due job of the queue would read them all on each claim
/// (28 ms at 20k jobs); instead the queue's groups are walked one index
/// seek each (a loose index scan of `jobs_ready`), and only the first `$3`
/// due jobs of each group, read in index order, are ranked (1 ms).
pub const SQLITE: Dialect = Dialect {
    pick: "WITH RECURSIVE grps(grp) AS ( \
             SELECT (SELECT MIN(grp) FROM jobs WHERE queue = $1 \
                     AND state IN ('available', 'scheduled', 'retryable')) \
             UNION ALL \
             SELECT (SELECT MIN(grp) FROM jobs WHERE queue = $1 \
                     AND state IN ('available', 'scheduled', 'retryable') AND grp > grps.grp) \
             FROM grps WHERE grps.grp IS NOT NULL), \
           firsts AS ( \
             SELECT j.id, j.grp, j.priority, j.run_at FROM grps JOIN jobs j ON j.id IN ( \
               SELECT id FROM jobs WHERE queue = $1 AND grp = grps.grp \
                 AND state IN ('available', 'scheduled', 'retryable') AND run_at <= $2 \
               ORDER BY priority DESC, run_at, id LIMIT $3)), \
           r AS ( \
             SELECT id, grp, priority, run_at, \
                    row_number() OVER (PARTITION BY grp ORDER BY priority DESC, run_at, id) AS rn \
             FROM firsts) \
         SELECT r.id FROM r LEFT JOIN queue_groups g ON g.queue = $1 AND g.grp = r.grp \
         ORDER BY r.rn, COALESCE(g.served, 0), r.priority DESC, r.run_at, r.id \
         LIMIT $3",
    take: take!("SELECT value FROM json_each($4)"),
    complete_many: concat!(
        completed!(),
        "FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.owner') AS owner, \
                      json_extract(value, '$.token') AS token, \
                      json_extract(value, '$.result') AS result \
               FROM json_each($2)) AS d",
        batch_leased!(),
        "RETURNING *"
    ),
};

/// PostgreSQL: concurrent claimers lock what they pick and skip what others
/// locked, so they never wait for each other nor take the same job. As on
/// SQLite the groups are walked by index (a loose index scan) and only the
/// first jobs of each group are ranked, so a claim does not read the whole
/// backlog; but each group offers four times `$3` candidates, not `$3`:
/// the first ones may be locked by another claimer, and skipping them must
/// leave the next ones. (More than four claimers racing on one group can
/// come back short, never wrong; the pool claims again.) The state and
/// `run_at` are tested again on the locked row, which may have changed
/// since the ranking's snapshot.
pub const POSTGRES: Dialect = Dialect {
    pick: "WITH RECURSIVE grps(grp) AS ( \
             (SELECT grp FROM jobs WHERE queue = $1 \
                AND state IN ('available', 'scheduled', 'retryable') ORDER BY grp LIMIT 1) \
             UNION ALL \
             SELECT (SELECT j.grp FROM jobs j WHERE j.queue = $1 \
                       AND j.state IN ('available', 'scheduled', 'retryable') AND j.grp > grps.grp \
                     ORDER BY j.grp LIMIT 1) \
             FROM grps WHERE grps.grp IS NOT NULL), \
           r AS ( \
             SELECT f.id, f.grp, f.priority, f.run_at, \
                    row_number() OVER (PARTITION BY f.grp ORDER BY f.priority DESC, f.run_at, f.id) AS rn \
             FROM grps CROSS JOIN LATERAL ( \
               SELECT id, grp, priority, run_at FROM jobs \
               WHERE queue = $1 AND grp = grps.grp \
                 AND state IN ('available', 'scheduled', 'retryable') AND run_at <= $2 \
               ORDER BY priority DESC, run_at, id LIMIT 4 * $3) f) \
         SELECT j.id FROM jobs j JOIN r ON r.id = j.id \
         LEFT JOIN queue_groups g ON g.queue = $1 AND g.grp = r.grp \
         WHERE j.state IN ('available', 'scheduled', 'retryable') AND j.run_at <= $2 \
         ORDER BY r.rn, COALESCE(g.served, 0), r.priority DESC, r.run_at, r.id \
         LIMIT $3 \
         FOR UPDATE OF j SKIP LOCKED",
    take: take!("SELECT (jsonb_array_elements_text($4::jsonb))::bigint"),
    complete_many: concat!(
        completed!(),
        "FROM jsonb_to_recordset($2::jsonb) AS d(id bigint, owner text, token bigint, result text)",
        batch_leased!(),
        "RETURNING jobs.*"
    ),
};

pub const INSERT_JOB: &str = "INSERT INTO jobs \
    (queue, kind, payload, tenant, grp, priority, idempotency_key, max_attempts, run_at, state, \
     created_at, updated_at) \
    VALUES ($1, $2, $3, $4, $5, $6, $7, $8, $9, $10, $11, $11) RETURNING *";

/// Takes key (`$1`, `$2`) until `$3` if it is free or expired at `$4`;
/// returns a row only if it did.
pub const CLAIM_KEY: &str = "INSERT INTO idempotency_keys (tenant, idem_key, job_id, expires_at) \
    VALUES ($1, $2, NULL, $3) \
    ON CONFLICT (tenant, idem_key) DO UPDATE SET job_id = NULL, expires_at = excluded.expires_at \
    WHERE idempotency_keys.expires_at <= $4 \
    RETURNING expires_at";

pub const SET_KEY_JOB: &str =
    "UPDATE idempotency_keys SET job_id = $3 WHERE tenant = $1 AND idem_key = $2";

pub const JOB_BY_KEY: &str = "SELECT j.* FROM jobs j \
    JOIN idempotency_keys k ON k.job_id = j.id WHERE k.tenant = $1 AND k.idem_key = $2";

pub const GET: &str = "SELECT * FROM jobs WHERE id = $1";

pub const LIST: &str = "SELECT * FROM jobs \
    WHERE ($1 IS NULL OR queue = $1) AND ($2 IS NULL OR state = $2) AND id > $3 \
      AND ($5 IS NULL OR tenant = $5) \
    ORDER BY id LIMIT $4";

pub const IS_PAUSED: &str = "SELECT name FROM queues WHERE name = $1 AND paused";

pub const PAUSED: &str = "SELECT name FROM queues WHERE paused";

pub const SET_PAUSED: &str = "INSERT INTO queues (name, paused, updated_at) VALUES ($1, $2, $3) \
    ON CONFLICT (name) DO UPDATE SET paused = excluded.paused, updated_at = excluded.updated_at";

pub const LAST_SERVED: &str = "SELECT COALESCE(MAX(served), 0) FROM queue_groups WHERE queue = $1";

pub const SERVE: &str = "INSERT INTO queue_groups (queue, grp, served) VALUES ($1, $2, $3) \
    ON CONFLICT (queue, grp) DO UPDATE SET served = excluded.served";

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
     run_at = $8, last_error = $9, lease_owner = NULL, lease_expires_at = NULL, updated_at = $10",
    leased!()
);

pub const RESCUE: &str = "UPDATE jobs SET attempts = attempts + 1, \
    state = CASE WHEN attempts + 1 >= max_attempts THEN 'dead' ELSE 'retryable' END, \
    finished_at = CASE WHEN attempts + 1 >= max_attempts THEN $1 ELSE NULL END, \
    run_at = $1, last_error = 'lease expired: worker ' || lease_owner || ' stopped heartbeating', \
    lease_owner = NULL, lease_expires_at = NULL, updated_at = $1 \
    WHERE state = 'running' AND lease_expires_at <= $1 RETURNING *";

pub const RETRY: &str = "UPDATE jobs SET state = 'available', attempts = 0, reschedules = 0, \
    run_at = $2, finished_at = NULL, updated_at = $2 WHERE id = $1 AND state = 'dead' RETURNING *";

pub const RETRY_DEAD: &str = "UPDATE jobs SET state = 'available', attempts = 0, reschedules = 0, \
    run_at = $2, finished_at = NULL, updated_at = $2 WHERE queue = $1 AND state = 'dead'";

pub const CANCEL: &str = "UPDATE jobs SET state = 'cancelled', lease_owner = NULL, \
    lease_expires_at = NULL, updated_at = $2, finished_at = $2 \
    WHERE id = $1 AND state IN ('available', 'scheduled', 'running', 'retryable') RETURNING *";

pub const PURGE_DEAD: &str = "DELETE FROM jobs WHERE state = 'dead' AND ($1 IS NULL OR queue = $1)";

pub const COUNTS: &str = "SELECT queue, state, COUNT(*) FROM jobs GROUP BY queue, state";

/// Jobs in state `$1` finished at or before `$2`, unless a key live at
/// `$3` still points at them.
pub const EXPIRE_JOBS: &str = "DELETE FROM jobs WHERE state = $1 AND finished_at <= $2 \
    AND NOT EXISTS (SELECT 1 FROM idempotency_keys k WHERE k.job_id = jobs.id AND k.expires_at > $3)";

pub const EXPIRE_KEYS: &str = "DELETE FROM idempotency_keys WHERE expires_at <= $1";

/// Forgets the rotation of groups that have no jobs left, so that the
/// table stays as small as the set of live groups.
pub const FORGET_GROUPS: &str = "DELETE FROM queue_groups \
    WHERE (queue, grp) NOT IN (SELECT DISTINCT queue, grp FROM jobs)";
