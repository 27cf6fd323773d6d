//! The statements that differ between SQLite and PostgreSQL: the claim's
//! (walking an index, locking) and the JSON functions of batches.

/// The statements that differ between backends.
#[derive(Debug)]
pub struct Dialect {
    /// Marks due (`due = TRUE`) up to `$3` ready jobs of queue `$1` whose
    /// `run_at` has passed at `$2`, earliest first.
    pub promote: &'static str,
    /// Ids of up to `$3` due jobs of queue `$1` at time `$2`, in claim
    /// order: tenants take turns (least recently served first), and within
    /// a tenant its groups take turns: the first job of each of its groups
    /// (least recently served group first), then the second, and so on.
    pub pick: &'static str,
    /// Marks the jobs whose ids are the JSON array `$4` running, leased to
    /// `$1` until `$2`, at time `$3`; returns them.
    pub take: &'static str,
    /// Completes, at time `$1`, the jobs of the JSON array `$2` of
    /// `{"id", "owner", "token", "result"}` (the result as JSON text) whose
    /// lease still holds; returns the completed jobs.
    pub complete_many: &'static str,
    /// How a batch of jobs is inserted (see [`Insert`]).
    pub insert: Insert,
    /// Takes, until `$1`, the idempotency keys of the arrays `$3`
    /// (tenants) and `$4` (keys) that are free or expired at `$2`; returns
    /// the (tenant, key) pairs it took. The pairs must be distinct.
    pub claim_keys: &'static str,
    /// The jobs that the keys of the arrays `$1` (tenants) and `$2` (keys)
    /// point at.
    pub keyed_jobs: &'static str,
    /// Points the keys of the arrays `$1` (tenants) and `$2` (keys) at the
    /// jobs of the array `$3`.
    pub set_key_jobs: &'static str,
}

/// How a backend inserts a batch of jobs, `RETURNING *`, with the
/// enqueue's time in `$1` and, per job, its queue, kind, payload, tenant,
/// group, priority, idempotency key, max attempts, run at, state and due.
#[derive(Debug)]
pub enum Insert {
    /// One multi-row `VALUES` statement per chunk of at most this many
    /// jobs, the job's values as `$2`, `$3`, … row after row
    /// ([`insert_rows`](crate::sql::insert_rows)).
    Rows(usize),
    /// One statement for the whole batch, each value an array of one
    /// element per job.
    Arrays(&'static str),
}

/// The columns an insert of a batch writes, in the order of [`Insert`].
macro_rules! insert_columns {
    () => {
        "INSERT INTO jobs (queue, kind, payload, tenant, grp, priority, idempotency_key, \
         max_attempts, run_at, state, due, created_at, updated_at) "
    };
}
pub(crate) use insert_columns;

/// The `ON CONFLICT` of a key claim: a live key stays with its job.
macro_rules! claim_keys_tail {
    () => {
        " ON CONFLICT (tenant, idem_key) DO UPDATE SET job_id = NULL, expires_at = excluded.expires_at \
         WHERE idempotency_keys.expires_at <= $2 \
         RETURNING tenant, idem_key"
    };
}

/// The condition of `jobs_ready`: a job a claim may take once its
/// `run_at` has passed. A query must repeat it to use the index.
macro_rules! ready {
    ($j:literal) => {
        concat!(
            $j,
            "state IN ('available', 'scheduled', 'retryable') AND ",
            $j,
            "due"
        )
    };
}

/// The ranking shared by both backends, from `r` (candidates with `rn`,
/// their place in their group): within a tenant, groups interleave (the
/// first job of every group, least recently served group first, then the
/// second, …); across tenants, the first pick of every tenant (least
/// recently served tenant first), then the second, and so on. So one
/// tenant's many groups take one tenant's turn, not one turn each.
macro_rules! ranked {
    () => {
        "ranked AS ( \
           SELECT r.id, r.priority, r.run_at, COALESCE(t.served, 0) AS ts, \
                  row_number() OVER (PARTITION BY r.tenant \
                    ORDER BY r.rn, COALESCE(g.served, 0), r.priority DESC, r.run_at, r.id) AS tr \
           FROM r LEFT JOIN queue_groups g ON g.queue = $1 AND g.tenant = r.tenant AND g.grp = r.grp \
           LEFT JOIN queue_tenants t ON t.queue = $1 AND t.tenant = r.tenant) "
    };
}

/// SQLite's walk of the due (tenant, group) pairs of queue `$1`, one index
/// seek each (a loose index scan of `jobs_ready`): `grps` ends with one
/// NULL group per tenant.
macro_rules! sqlite_walk {
    () => {
        concat!(
            "WITH RECURSIVE tenants(t) AS ( \
               SELECT (SELECT MIN(tenant) FROM jobs WHERE queue = $1 AND ",
            ready!(""),
            ") UNION ALL \
               SELECT (SELECT MIN(tenant) FROM jobs WHERE queue = $1 AND ",
            ready!(""),
            " AND tenant > tenants.t) FROM tenants WHERE tenants.t IS NOT NULL), \
             grps(tenant, grp) AS ( \
               SELECT t, (SELECT MIN(grp) FROM jobs WHERE queue = $1 AND ",
            ready!(""),
            " AND tenant = tenants.t) FROM tenants WHERE tenants.t IS NOT NULL \
               UNION ALL \
               SELECT tenant, (SELECT MIN(grp) FROM jobs WHERE queue = $1 AND ",
            ready!(""),
            " AND tenant = grps.tenant AND grp > grps.grp) FROM grps WHERE grps.grp IS NOT NULL) "
        )
    };
}

/// How many (tenant, group) pairs SQLite's claim walks in queue `$1`: what
/// a claim costs, for tests.
#[cfg(test)]
pub const SQLITE_WALKED: &str = concat!(
    sqlite_walk!(),
    "SELECT COUNT(*) FROM grps WHERE grp IS NOT NULL"
);

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

/// The ready jobs of queue `$1` that are not yet marked due but whose
/// `run_at` passed by `$2`, `$3` at most, earliest first (`jobs_waiting`).
macro_rules! waiting {
    () => {
        "SELECT id FROM jobs WHERE queue = $1 \
           AND state IN ('available', 'scheduled', 'retryable') AND NOT due AND run_at <= $2 \
         ORDER BY run_at LIMIT $3"
    };
}

/// SQLite: one writer at a time (the claim runs in an `IMMEDIATE`
/// transaction), so no row locks are needed.
///
/// Ranking every due job of the queue would read them all on each claim
/// (28 ms at 20k jobs); instead the due (tenant, group) pairs are walked
/// one index seek each, and only the first `$3` due jobs of each group,
/// read in index order, are ranked (1 ms). Jobs not yet due are not in
/// the index the walk reads, so a year of scheduled jobs costs nothing.
pub const SQLITE: Dialect = Dialect {
    promote: concat!("UPDATE jobs SET due = TRUE WHERE id IN (", waiting!(), ")"),
    pick: concat!(
        sqlite_walk!(),
        ", firsts AS ( \
             SELECT j.id, j.tenant, j.grp, j.priority, j.run_at FROM grps JOIN jobs j ON j.id IN ( \
               SELECT id FROM jobs WHERE queue = $1 AND tenant = grps.tenant AND grp = grps.grp \
                 AND ",
        ready!(""),
        " AND run_at <= $2 ORDER BY priority DESC, run_at, id LIMIT $3) \
             WHERE grps.grp IS NOT NULL), \
           r AS ( \
             SELECT id, tenant, grp, priority, run_at, \
                    row_number() OVER (PARTITION BY tenant, grp \
                      ORDER BY priority DESC, run_at, id) AS rn \
             FROM firsts), ",
        ranked!(),
        "SELECT id FROM ranked ORDER BY tr, ts, priority DESC, run_at, id LIMIT $3"
    ),
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
    // 11 variables a job: 512 jobs take 5,633 of SQLite's 32,766.
    insert: Insert::Rows(512),
    // SQLite has no arrays: the JSON arrays are zipped by index. (`WHERE
    // TRUE` tells its parser that `ON CONFLICT` is not a join's.)
    claim_keys: concat!(
        "INSERT INTO idempotency_keys (tenant, idem_key, job_id, expires_at) \
         SELECT t.value, k.value, NULL, $1 FROM json_each($3) t JOIN json_each($4) k ON k.key = t.key \
         WHERE TRUE",
        claim_keys_tail!()
    ),
    keyed_jobs: "SELECT j.* FROM json_each($1) t JOIN json_each($2) k ON k.key = t.key \
        JOIN idempotency_keys i ON i.tenant = t.value AND i.idem_key = k.value \
        JOIN jobs j ON j.id = i.job_id",
    set_key_jobs: "UPDATE idempotency_keys SET job_id = s.job_id \
        FROM (SELECT t.value AS tenant, k.value AS idem_key, i.value AS job_id \
              FROM json_each($1) t JOIN json_each($2) k ON k.key = t.key \
              JOIN json_each($3) i ON i.key = t.key) AS s \
        WHERE idempotency_keys.tenant = s.tenant AND idempotency_keys.idem_key = s.idem_key",
};

/// PostgreSQL: concurrent claimers lock what they pick and skip what others
/// locked, so they never wait for each other nor take the same job. As on
/// SQLite the due (tenant, group) pairs are walked by index (a loose index
/// scan) and only the first jobs of each group are ranked, so a claim does
/// not read the whole backlog; but each group offers four times `$3`
/// candidates, not `$3`: the first ones may be locked by another claimer,
/// and skipping them must leave the next ones. (More than four claimers
/// racing on one group can come back short, never wrong; the pool claims
/// again.) Only the first `4 * $3` of the ranking are tried, for the same
/// reason, and so that the planner looks each up by id rather than scan
/// the table for them. The state and `run_at` are tested again on the
/// locked row, which may have changed since the ranking's snapshot. The promotion
/// skips rows another claimer is promoting: it marks them due itself.
pub const POSTGRES: Dialect = Dialect {
    promote: concat!(
        "UPDATE jobs SET due = TRUE WHERE id IN (",
        waiting!(),
        " FOR UPDATE SKIP LOCKED)"
    ),
    pick: concat!(
        "WITH RECURSIVE tenants(t) AS ( \
           (SELECT tenant FROM jobs WHERE queue = $1 AND ",
        ready!(""),
        " ORDER BY tenant LIMIT 1) \
           UNION ALL \
           SELECT (SELECT j.tenant FROM jobs j WHERE j.queue = $1 AND ",
        ready!("j."),
        " AND j.tenant > tenants.t ORDER BY j.tenant LIMIT 1) \
           FROM tenants WHERE tenants.t IS NOT NULL), \
         grps(tenant, grp) AS ( \
           SELECT t, (SELECT j.grp FROM jobs j WHERE j.queue = $1 AND ",
        ready!("j."),
        " AND j.tenant = tenants.t ORDER BY j.grp LIMIT 1) \
           FROM tenants WHERE tenants.t IS NOT NULL \
           UNION ALL \
           SELECT tenant, (SELECT j.grp FROM jobs j WHERE j.queue = $1 AND ",
        ready!("j."),
        " AND j.tenant = grps.tenant AND j.grp > grps.grp ORDER BY j.grp LIMIT 1) \
           FROM grps WHERE grps.grp IS NOT NULL), \
         r AS ( \
           SELECT f.id, f.tenant, f.grp, f.priority, f.run_at, \
                  row_number() OVER (PARTITION BY f.tenant, f.grp \
                    ORDER BY f.priority DESC, f.run_at, f.id) AS rn \
           FROM grps CROSS JOIN LATERAL ( \
             SELECT id, tenant, grp, priority, run_at FROM jobs \
             WHERE queue = $1 AND tenant = grps.tenant AND grp = grps.grp AND ",
        ready!(""),
        " AND run_at <= $2 ORDER BY priority DESC, run_at, id LIMIT 4 * $3) f \
           WHERE grps.grp IS NOT NULL), ",
        ranked!(),
        "SELECT j.id FROM jobs j JOIN ( \
           SELECT * FROM ranked ORDER BY tr, ts, priority DESC, run_at, id LIMIT 4 * $3) r \
           ON r.id = j.id \
         WHERE j.state IN ('available', 'scheduled', 'retryable') AND j.run_at <= $2 \
         ORDER BY r.tr, r.ts, r.priority DESC, r.run_at, r.id \
         LIMIT $3 \
         FOR UPDATE OF j SKIP LOCKED"
    ),
    take: take!("SELECT (jsonb_array_elements_text($4::jsonb))::bigint"),
    complete_many: concat!(
        completed!(),
        "FROM jsonb_to_recordset($2::jsonb) AS d(id bigint, owner text, token bigint, result text)",
        batch_leased!(),
        "RETURNING jobs.*"
    ),
    insert: Insert::Arrays(concat!(
        insert_columns!(),
        "SELECT u.*, $1, $1 FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], \
           $6::text[], $7::bigint[], $8::text[], $9::bigint[], $10::bigint[], $11::text[], \
           $12::boolean[]) AS u \
         RETURNING *"
    )),
    claim_keys: concat!(
        "INSERT INTO idempotency_keys (tenant, idem_key, job_id, expires_at) \
         SELECT u.tenant, u.idem_key, NULL::bigint, $1::bigint \
         FROM unnest($3::text[], $4::text[]) AS u(tenant, idem_key)",
        claim_keys_tail!()
    ),
    keyed_jobs: "SELECT j.* FROM unnest($1::text[], $2::text[]) AS u(tenant, idem_key) \
        JOIN idempotency_keys i ON i.tenant = u.tenant AND i.idem_key = u.idem_key \
        JOIN jobs j ON j.id = i.job_id",
    set_key_jobs: "UPDATE idempotency_keys SET job_id = u.job_id \
        FROM unnest($1::text[], $2::text[], $3::bigint[]) AS u(tenant, idem_key, job_id) \
        WHERE idempotency_keys.tenant = u.tenant AND idempotency_keys.idem_key = u.idem_key",
};
