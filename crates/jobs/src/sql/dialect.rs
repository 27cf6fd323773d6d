//! The statements that differ between SQLite and PostgreSQL: the claim's
//! (walking an index, locking) and the JSON functions of batches.

/// The statements that differ between backends.
#[derive(Debug)]
pub struct Dialect {
    /// Marks due (`due = TRUE`) up to `$3` ready jobs of queue `$1` whose
    /// `run_at` has passed at `$2`, earliest first.
    pub promote: &'static str,
    /// Leases up to `$3` due jobs of queue `$1` at time `$2` to worker
    /// `$4` until `$5` (marks them running), unless the queue is paused,
    /// in one statement; returns them, each with its group's and tenant's
    /// last turns (`group_served`, `tenant_served`) for
    /// [`claim_order`](crate::ops::claim). Which jobs: tenants take turns
    /// (least recently served first), and within a tenant its groups take
    /// turns: the first job of each of its groups (least recently served
    /// group first), then the second, and so on.
    pub claim: &'static str,
    /// Serves, in queue `$1`, the tenants of the array `$2` at the turns
    /// of the array `$3` after the queue's last one.
    pub serve_tenants: &'static str,
    /// Serves, in queue `$1`, the groups of the arrays `$2` (tenants) and
    /// `$3` (groups) at the turns of the array `$4` after the queue's last
    /// one.
    pub serve_groups: &'static str,
    /// Completes, at time `$1`, the jobs of the JSON array `$2` of
    /// `{"id", "owner", "token", "result"}` (the result as JSON text) whose
    /// lease still holds; returns the completed jobs.
    pub complete_many: &'static str,
    /// [`Dialect::complete_many`] returning only the ids of the jobs
    /// completed: a worker pool's batches read nothing else back, and
    /// every column of every row returned is copied out of the database
    /// and decoded.
    pub complete_ids: &'static str,
    /// Extends to `$1`, at time `$2`, the leases whose jobs, owners and
    /// tokens are the arrays `$3`, `$4` and `$5`, where they still hold;
    /// returns the renewed jobs.
    pub heartbeat_many: &'static str,
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
    /// Up to `$3` job events after the cursor (`$1` xid, `$2` seq) in
    /// commit order, and only those no transaction can still commit one
    /// before (see the `job_events` migrations).
    pub events_after: &'static str,
    /// `id` and `result` of the jobs of the array `$1`.
    pub results_of: &'static str,
    /// `xid` and `seq` of the last event that [`Dialect::events_after`]
    /// would give now.
    pub events_last: &'static str,
}

/// How a backend inserts a batch of jobs, `RETURNING *`: per job, its
/// queue, kind, payload, tenant, group, priority, idempotency key, max
/// attempts, run at, state and due, then the enqueue's time (`created_at`,
/// `updated_at`).
#[derive(Debug)]
pub enum Insert {
    /// One multi-row `VALUES` statement per chunk of at most this many
    /// jobs, every value of every row bound in order
    /// ([`insert_rows`](crate::sql::insert_rows)).
    Rows(usize),
    /// One statement for the whole batch, each value an array of one
    /// element per job but the time, one value in `$1`.
    Arrays(&'static str),
}

/// The columns an insert of a batch writes, in the order of [`Insert`].
macro_rules! insert_columns {
    () => {
        "INSERT INTO jobs (queue, kind, payload, tenant, grp, priority, idempotency_key, \
         max_attempts, run_at, state, due, traceparent, created_at, updated_at) "
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

/// A group's order, which `jobs_ready` keeps: highest priority, then
/// earliest `run_at`, then lowest id.
macro_rules! group_order {
    () => {
        "priority DESC, run_at, id"
    };
}

/// The first `$limit` due jobs (their columns `$cols`) of the group `$grp`
/// of tenant `$tenant` in queue `$1` at time `$2`, in the group's order,
/// read through `jobs_ready`; `$and` adds conditions.
macro_rules! group_head {
    ($cols:literal, $tenant:literal, $grp:literal, $and:expr, $limit:literal) => {
        concat!(
            "SELECT ",
            $cols,
            " FROM jobs WHERE queue = $1 AND tenant = ",
            $tenant,
            " AND grp = ",
            $grp,
            " AND ",
            ready!(""),
            " AND run_at <= $2",
            $and,
            " ORDER BY ",
            group_order!(),
            " LIMIT ",
            $limit
        )
    };
}

/// The queue's one due (tenant, group) pair, when the walk (`grps`) found
/// only one.
macro_rules! one {
    () => {
        "one AS ( \
           SELECT tenant, grp FROM grps WHERE grp IS NOT NULL \
             AND (SELECT COUNT(*) FROM grps WHERE grp IS NOT NULL) = 1)"
    };
}

/// A group's head in `one`, the queue's one pair (see [`one!`]).
macro_rules! one_head {
    ($cols:literal, $and:expr) => {
        group_head!(
            $cols,
            "(SELECT tenant FROM one)",
            "(SELECT grp FROM one)",
            $and,
            "$3"
        )
    };
}

/// The ranking shared by both backends, named `$name`, from `$from`
/// (candidates with `rn`, their place in their group): within a tenant,
/// groups interleave (the first job of every group, least recently served
/// group first, then the second, …); across tenants, the first pick of
/// every tenant (least recently served tenant first), then the second, and
/// so on. So one tenant's many groups take one tenant's turn, not one turn
/// each. `$more` adds columns, over the same rows `r`.
macro_rules! ranked {
    ($name:literal, $from:literal, $more:literal) => {
        concat!(
            $name,
            " AS ( \
           SELECT r.id, r.priority, r.run_at, COALESCE(t.served, 0) AS ts, \
                  row_number() OVER (PARTITION BY r.tenant \
                    ORDER BY r.rn, COALESCE(g.served, 0), r.priority DESC, r.run_at, r.id) AS tr",
            $more,
            " FROM ",
            $from,
            " r LEFT JOIN queue_groups g ON g.queue = $1 AND g.tenant = r.tenant AND g.grp = r.grp \
           LEFT JOIN queue_tenants t ON t.queue = $1 AND t.tenant = r.tenant) "
        )
    };
}

/// The bounded first round of a claim of several (tenant, group) pairs,
/// after the walk (`grps`, `one`) and before the full round, in the CTEs
/// `pairs`, `lims`, `ranked1`, `sel1` and `inexact`; `$candidates` is the
/// CTE `r1`: each group of `lims` with its first `lim` due jobs (or more),
/// their `rn`, `cg` (how many of the group it read), `ng` and `ni` (how
/// many groups the tenant has, and how many of them `lims` kept).
///
/// A claim of `$3` jobs over `T` tenants gives each its share `q =
/// ceil($3 / T)`, and a tenant of `G` groups reads `lim = ceil(q / G)` of
/// each. With more groups than its share (`lim` is then 1) it reads only
/// its `q` groups served longest ago (`gr`, ties kept), as its first `q`
/// picks are the first job of each of them (on PostgreSQL, past another
/// claimer's locks, as `chosen!` says of tenants). About `$3 + pairs`
/// jobs in all, where ranking the first `$3` of every group read `$3`
/// times the pairs (all 50,000 jobs of 1,000 pairs on each claim of 200).
///
/// When every tenant has its share, the first `$3` of this bounded ranking
/// are those of the full one. They may not be when a tenant has less
/// (others then take more than their share). A tenant whose read was cut
/// (a group read to its `lim`, or groups left out) ranks its first unread
/// job at `nxt`: right after all the jobs it read, or, with groups left
/// out, right after the first job of each group kept (`ni + 1`: the groups
/// left out were served later). If the claim took all of that tenant's jobs before
/// `nxt`, and `nxt` is not after the last job taken (or fewer than `$3`
/// were taken), the bound changed the answer: `inexact` has a row, and the
/// claim ranks the first `$3` of every group instead (the full round).
macro_rules! first_round {
    ($($candidates:tt)+) => {
        concat!(
            "pairs AS ( \
               SELECT grps.tenant, grps.grp, COUNT(*) OVER (PARTITION BY grps.tenant) AS ng, \
                      rank() OVER (PARTITION BY grps.tenant ORDER BY COALESCE(g.served, 0)) AS gr \
               FROM grps LEFT JOIN queue_groups g \
                 ON g.queue = $1 AND g.tenant = grps.tenant AND g.grp = grps.grp \
               WHERE grps.grp IS NOT NULL AND NOT EXISTS (SELECT 1 FROM one)), \
             lims AS ( \
               SELECT p.tenant, p.grp, (s.q + p.ng - 1) / p.ng AS lim, p.ng, \
                      COUNT(*) OVER (PARTITION BY p.tenant) AS ni FROM pairs p, \
                 (SELECT ($3 + COUNT(DISTINCT tenant) - 1) / NULLIF(COUNT(DISTINCT tenant), 0) AS q \
                  FROM pairs) s \
               WHERE p.gr <= s.q), ",
            $($candidates)+,
            ", ",
            ranked!(
                "ranked1",
                "r1",
                ", r.tenant, \
                 MAX(CASE WHEN r.cg >= r.lim OR r.ng > r.ni THEN 1 ELSE 0 END) \
                   OVER (PARTITION BY r.tenant) AS cut, \
                 CASE WHEN r.ng > r.ni THEN r.ni ELSE COUNT(*) OVER (PARTITION BY r.tenant) END + 1 AS nxt"
            ),
            ", sel1 AS ( \
               SELECT id, tenant, tr, cut, nxt FROM ranked1 \
               ORDER BY tr, ts, ",
            group_order!(),
            " LIMIT $3), \
             inexact AS ( \
               SELECT tenant FROM sel1 GROUP BY tenant \
               HAVING MAX(cut) = 1 AND COUNT(*) >= MAX(nxt) - 1 \
                 AND ((SELECT COUNT(*) FROM sel1) < $3 OR MAX(nxt) <= (SELECT MAX(tr) FROM sel1))) "
        )
    };
}

/// The tenants of `tenants` (the walk's, with a NULL at its end) that a
/// claim of `$3` jobs can serve, as `chosen(t)`, before their groups are
/// walked: every tenant's first pick ranks before any tenant's second, and
/// among first picks the tenant served longest ago goes first; so when
/// there are at least `$3` tenants, the claim takes one job each from
/// `$3` of those served longest ago, and a tenant served more recently
/// than the `$3`-th of them (ties kept) cannot be among them. With fewer
/// tenants every one is chosen. (1,000 tenants of one group each: a claim
/// of 200 walks and ranks the groups of about 200.)
///
/// On PostgreSQL, a claimer that finds these tenants' first picks locked
/// by another claimer takes their next picks (each group offers four
/// times its bound): never a short claim, but for that moment those
/// tenants are served twice while the next ones wait for the next claim,
/// which takes them first. Weighing four times as many tenants would give
/// the next ones their turn at once, at four times the ranking's work on
/// every claim (1,000 tenants: 5.1k jobs/s instead of 8.6k, issue 40).
macro_rules! chosen {
    () => {
        "tts AS MATERIALIZED ( \
           SELECT tenants.t, COALESCE(qt.served, 0) AS ts FROM tenants \
           LEFT JOIN queue_tenants qt ON qt.queue = $1 AND qt.tenant = tenants.t \
           WHERE tenants.t IS NOT NULL), \
         chosen(t) AS ( \
           SELECT t FROM tts WHERE ts <= COALESCE( \
             (SELECT ts FROM tts ORDER BY ts LIMIT 1 OFFSET $3 - 1), \
               9223372036854775807))"
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
            " AND tenant > tenants.t) FROM tenants WHERE tenants.t IS NOT NULL), ",
            chosen!(),
            ", grps(tenant, grp) AS ( \
               SELECT t, (SELECT MIN(grp) FROM jobs WHERE queue = $1 AND ",
            ready!(""),
            " AND tenant = chosen.t) FROM chosen \
               UNION ALL \
               SELECT tenant, (SELECT MIN(grp) FROM jobs WHERE queue = $1 AND ",
            ready!(""),
            " AND tenant = grps.tenant AND grp > grps.grp) FROM grps WHERE grps.grp IS NOT NULL) "
        )
    };
}

/// How many (tenant, group) pairs SQLite's claim of `$3` jobs walks in
/// queue `$1`: what a claim costs, for tests.
#[cfg(test)]
pub const SQLITE_WALKED: &str = concat!(
    sqlite_walk!(),
    "SELECT COUNT(*) FROM grps WHERE grp IS NOT NULL"
);

/// The `SET` of a claim: leased to `$4` until `$5`, at time `$2`.
macro_rules! lease_to {
    () => {
        "UPDATE jobs SET state = 'running', lease_owner = $4, lease_expires_at = $5, \
                lease_token = lease_token + 1, updated_at = $2, started_at = $2 "
    };
}

/// What a claim returns: the job (`$all`: `*`, or `jobs.*` where the
/// statement has a `FROM`), and the last turns of its group and its tenant
/// (0 if never served), from which the claim order is rebuilt. A claim of
/// the queue's one (tenant, group) pair (`one`) has no turns to compare:
/// 0 for each, without looking them up.
macro_rules! claimed {
    ($all:literal) => {
        concat!(
            " RETURNING ",
            $all,
            ", \
           CASE WHEN EXISTS (SELECT 1 FROM one) THEN 0 ELSE COALESCE((SELECT g.served \
             FROM queue_groups g WHERE g.queue = jobs.queue AND g.tenant = jobs.tenant \
             AND g.grp = jobs.grp), 0) END AS group_served, \
           CASE WHEN EXISTS (SELECT 1 FROM one) THEN 0 ELSE COALESCE((SELECT t.served \
             FROM queue_tenants t WHERE t.queue = jobs.queue AND t.tenant = jobs.tenant), 0) END \
             AS tenant_served"
        )
    };
}

/// Queue `$1` is not paused.
macro_rules! not_paused {
    () => {
        "NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = $1 AND q.paused)"
    };
}

/// Serves the rows `s` (`tenant`, `turn`) of queue `$1`.
macro_rules! serve_tenants {
    ($rows:expr) => {
        concat!(
            "INSERT INTO queue_tenants (queue, tenant, served) \
             SELECT $1, s.tenant, m.last + s.turn FROM ",
            $rows,
            " AS s, (SELECT COALESCE(MAX(served), 0) AS last FROM queue_tenants WHERE queue = $1) AS m \
             WHERE TRUE \
             ON CONFLICT (queue, tenant) DO UPDATE SET served = excluded.served"
        )
    };
}

/// Serves the rows `s` (`tenant`, `grp`, `turn`) of queue `$1`.
macro_rules! serve_groups {
    ($rows:expr) => {
        concat!(
            "INSERT INTO queue_groups (queue, tenant, grp, served) \
             SELECT $1, s.tenant, s.grp, m.last + s.turn FROM ",
            $rows,
            " AS s, (SELECT COALESCE(MAX(served), 0) AS last FROM queue_groups WHERE queue = $1) AS m \
             WHERE TRUE \
             ON CONFLICT (queue, tenant, grp) DO UPDATE SET served = excluded.served"
        )
    };
}

/// SQLite's rows of the JSON arrays `$a` and `$b` (and `$c`), zipped by
/// index into columns named as given. Each array is materialized first:
/// joined directly, SQLite reads one `json_each` whole for every row of
/// the other (measured: 75 ms for 1,000 rows, 1.4 s for 4,000); joined
/// materialized, it indexes one of them on the fly (1 ms, 22 ms at 10,000).
macro_rules! zip {
    ($a:literal AS $na:literal, $b:literal AS $nb:literal) => {
        concat!(
            "(WITH a AS MATERIALIZED (SELECT key, value FROM json_each(",
            $a,
            ")), \
                   b AS MATERIALIZED (SELECT key, value FROM json_each(",
            $b,
            ")) \
              SELECT a.value AS ",
            $na,
            ", b.value AS ",
            $nb,
            " FROM a JOIN b ON b.key = a.key)"
        )
    };
    ($a:literal AS $na:literal, $b:literal AS $nb:literal, $c:literal AS $nc:literal) => {
        concat!(
            "(WITH a AS MATERIALIZED (SELECT key, value FROM json_each(",
            $a,
            ")), \
                   b AS MATERIALIZED (SELECT key, value FROM json_each(",
            $b,
            ")), \
                   c AS MATERIALIZED (SELECT key, value FROM json_each(",
            $c,
            ")) \
              SELECT a.value AS ",
            $na,
            ", b.value AS ",
            $nb,
            ", c.value AS ",
            $nc,
            " FROM a JOIN b ON b.key = a.key JOIN c ON c.key = a.key)"
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

/// SQLite's completion of the batch `$2` at time `$1`, without its
/// `RETURNING`. `jsonb_each` hands each object over in SQLite's binary
/// form, which `json_extract` reads as it is; `json_each` would hand it
/// over as text, parsed again by each of the four `json_extract`s (a
/// quarter of the statement's work; measured with bench/jobs-floor).
macro_rules! sqlite_complete {
    () => {
        concat!(
            completed!(),
            "FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.owner') AS owner, \
                          json_extract(value, '$.token') AS token, \
                          json_extract(value, '$.result') AS result \
                   FROM jsonb_each($2)) AS d",
            batch_leased!()
        )
    };
}

/// PostgreSQL's completion of the batch `$2` at time `$1`, without its
/// `RETURNING`. The jobs are looked up by id (`= ANY` of the batch's ids):
/// left to join them on `state = 'running'`, the planner read them through
/// `jobs_running`, whose entries of jobs finished since the last VACUUM it
/// cannot tell from live ones (8,000 entries and 480 pages for a batch of
/// 55, most of a completion's time, issue 40). Heartbeats likewise.
macro_rules! postgres_complete {
    () => {
        concat!(
            completed!(),
            "FROM jsonb_to_recordset($2::jsonb) AS d(id bigint, owner text, token bigint, result text)",
            batch_leased!(),
            "AND jobs.id = ANY(ARRAY(SELECT (e ->> 'id')::bigint FROM jsonb_array_elements($2::jsonb) AS e)) "
        )
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
/// one index seek each, and only the first due jobs of each group, read
/// in index order, are ranked (1 ms): each tenant's share of the claim
/// ([`first_round!`]), or the first `$3` where the share would change the
/// answer. Jobs not yet due are not in
/// the index the walk reads, so a year of scheduled jobs costs nothing.
///
/// When the walk finds one (tenant, group) pair only (`one`), as in a
/// queue that serves one tenant's jobs in one group, the ranking is the
/// index's order: the claim takes the first `$3` jobs of that group as
/// they come, and neither ranks them nor looks up their turns (the
/// window functions and lookups were a tenth of a burn-down's SQLite
/// work; bench/jobs-floor). `firsts` is then empty, so nothing is ranked.
pub const SQLITE: Dialect = Dialect {
    // One writer: `seq` order is commit order, and `xid` is always 0.
    events_after: "SELECT * FROM job_events WHERE seq > $2 AND $1 >= 0 ORDER BY seq LIMIT $3",
    results_of: "SELECT id, result FROM jobs WHERE id IN (SELECT value FROM json_each($1))",
    events_last: "SELECT xid, seq FROM job_events ORDER BY seq DESC LIMIT 1",
    promote: concat!("UPDATE jobs SET due = TRUE WHERE id IN (", waiting!(), ")"),
    claim: concat!(
        sqlite_walk!(),
        ", ",
        one!(),
        ", ",
        // SQLite's LIMIT cannot name a column of the outer query: each
        // group reads the largest `lim`, and keeps its own.
        first_round!(concat!(
            "c1 AS ( \
               SELECT j.id, j.tenant, j.grp, j.priority, j.run_at, lims.lim, lims.ng, lims.ni FROM lims \
               JOIN jobs j ON j.id IN (",
            group_head!(
                "id",
                "lims.tenant",
                "lims.grp",
                "",
                "(SELECT MAX(lim) FROM lims)"
            ),
            ")), \
             r1 AS ( \
               SELECT * FROM ( \
                 SELECT c1.*, row_number() OVER (PARTITION BY tenant, grp \
                          ORDER BY ",
            group_order!(),
            ") AS rn, \
                        COUNT(*) OVER (PARTITION BY tenant, grp) AS cg \
                 FROM c1) WHERE rn <= lim)"
        )),
        ", firsts AS ( \
             SELECT j.id, j.tenant, j.grp, j.priority, j.run_at FROM grps JOIN jobs j ON j.id IN (",
        group_head!("id", "grps.tenant", "grps.grp", "", "$3"),
        ") WHERE grps.grp IS NOT NULL AND EXISTS (SELECT 1 FROM inexact)), \
           r AS ( \
             SELECT id, tenant, grp, priority, run_at, \
                    row_number() OVER (PARTITION BY tenant, grp ORDER BY ",
        group_order!(),
        ") AS rn FROM firsts), ",
        ranked!("ranked", "r", ""),
        lease_to!(),
        "WHERE (id IN (",
        one_head!("id", ""),
        ") OR id IN (SELECT id FROM sel1 WHERE NOT EXISTS (SELECT 1 FROM inexact)) \
             OR id IN (SELECT id FROM ranked ORDER BY tr, ts, ",
        group_order!(),
        " LIMIT $3)) \
           AND state IN ('available', 'scheduled', 'retryable') AND run_at <= $2 AND ",
        not_paused!(),
        claimed!("*")
    ),
    serve_tenants: serve_tenants!(zip!("$2" AS "tenant", "$3" AS "turn")),
    serve_groups: serve_groups!(zip!("$2" AS "tenant", "$3" AS "grp", "$4" AS "turn")),
    complete_many: concat!(sqlite_complete!(), "RETURNING *"),
    complete_ids: concat!(sqlite_complete!(), "RETURNING id"),
    heartbeat_many: concat!(
        "UPDATE jobs SET lease_expires_at = $1, updated_at = $2 FROM ",
        zip!("$3" AS "id", "$4" AS "owner", "$5" AS "token"),
        " AS d",
        batch_leased!(),
        "RETURNING *"
    ),
    // 13 variables a job: 512 jobs take 6,656 of SQLite's 32,766.
    insert: Insert::Rows(512),
    // SQLite has no arrays: the JSON arrays are zipped by index. (`WHERE
    // TRUE` tells its parser that `ON CONFLICT` is not a join's.)
    claim_keys: concat!(
        "INSERT INTO idempotency_keys (tenant, idem_key, job_id, expires_at) \
         SELECT s.tenant, s.idem_key, NULL, $1 FROM ",
        zip!("$3" AS "tenant", "$4" AS "idem_key"),
        " AS s WHERE TRUE",
        claim_keys_tail!()
    ),
    keyed_jobs: concat!(
        "SELECT j.* FROM ",
        zip!("$1" AS "tenant", "$2" AS "idem_key"),
        " AS s JOIN idempotency_keys i ON i.tenant = s.tenant AND i.idem_key = s.idem_key \
         JOIN jobs j ON j.id = i.job_id"
    ),
    set_key_jobs: concat!(
        "UPDATE idempotency_keys SET job_id = s.job_id FROM ",
        zip!("$1" AS "tenant", "$2" AS "idem_key", "$3" AS "job_id"),
        " AS s WHERE idempotency_keys.tenant = s.tenant AND idempotency_keys.idem_key = s.idem_key"
    ),
};

/// PostgreSQL: concurrent claimers lock what they pick and skip what others
/// locked, so they never wait for each other nor take the same job. As on
/// SQLite the due (tenant, group) pairs are walked by index (a loose index
/// scan) and only the first jobs of each group are ranked, so a claim does
/// not read the whole backlog ([`first_round!`]); but each group offers
/// four times its bound: the first ones may be locked by another claimer,
/// and skipping them must leave the next ones. (More than four claimers
/// racing on one group can come back short, never wrong; the pool claims
/// again.) Only the first `4 * $3` of the ranking are tried, for the same
/// reason, and each is looked up by id (`= ANY` of their ids): joined to
/// `jobs` on the id alone, the planner (its statistics taken while the
/// table was filling) read every ready job through `jobs_queue_state` and
/// compared each with each candidate, a third of a claim of 200 (issue
/// 40). The state and `run_at` are tested again on the
/// locked row, which may have changed since the ranking's snapshot. The promotion
/// skips rows another claimer is promoting: it marks them due itself.
///
/// The walk goes backwards (`DESC`): a job claimed leaves its entry in
/// `jobs_ready` until VACUUM, at the front of its group (the oldest and
/// highest priority jobs go first), and a scan steps over every such
/// entry, reading the row of each that no scan has yet found dead to
/// every transaction (all of them while a long transaction is open).
/// Walked from the back, a group is found by its last entry, the job
/// claimed last, so only the ranking's own read of each group's first
/// jobs crosses the stale entries, not the two probes that find the
/// tenants and groups too.
///
/// As on SQLite, a queue whose walk finds one (tenant, group) pair is
/// claimed without a ranking (`one_picked`): its first `$3` due jobs in
/// the index's order, skipping those another claimer locked, which
/// `SKIP LOCKED` does on its own; the candidates and their ranking are
/// then empty.
pub const POSTGRES: Dialect = Dialect {
    events_after: "SELECT * FROM job_events WHERE (xid, seq) > ($1, $2) \
        AND xid < pg_snapshot_xmin(pg_current_snapshot())::text::bigint \
        ORDER BY xid, seq LIMIT $3",
    results_of: "SELECT id, result FROM jobs WHERE id = ANY($1::bigint[])",
    events_last: "SELECT xid, seq FROM job_events \
        WHERE xid < pg_snapshot_xmin(pg_current_snapshot())::text::bigint \
        ORDER BY xid DESC, seq DESC LIMIT 1",
    promote: concat!(
        "UPDATE jobs SET due = TRUE WHERE id IN (",
        waiting!(),
        " FOR UPDATE SKIP LOCKED)"
    ),
    claim: concat!(
        "WITH RECURSIVE tenants(t) AS ( \
           (SELECT tenant FROM jobs WHERE queue = $1 AND ",
        ready!(""),
        " ORDER BY tenant DESC LIMIT 1) \
           UNION ALL \
           SELECT (SELECT j.tenant FROM jobs j WHERE j.queue = $1 AND ",
        ready!("j."),
        " AND j.tenant < tenants.t ORDER BY j.tenant DESC LIMIT 1) \
           FROM tenants WHERE tenants.t IS NOT NULL), ",
        chosen!(),
        ", grps(tenant, grp) AS ( \
           SELECT t, (SELECT j.grp FROM jobs j WHERE j.queue = $1 AND ",
        ready!("j."),
        " AND j.tenant = chosen.t ORDER BY j.grp DESC LIMIT 1) \
           FROM chosen \
           UNION ALL \
           SELECT tenant, (SELECT j.grp FROM jobs j WHERE j.queue = $1 AND ",
        ready!("j."),
        " AND j.tenant = grps.tenant AND j.grp < grps.grp ORDER BY j.grp DESC LIMIT 1) \
           FROM grps WHERE grps.grp IS NOT NULL), ",
        one!(),
        ", one_picked AS (",
        one_head!("id", concat!(" AND ", not_paused!())),
        " FOR UPDATE SKIP LOCKED), ",
        first_round!(concat!(
            "r1 AS ( \
               SELECT f.*, 4 * lims.lim AS lim, lims.ng, lims.ni, \
                      row_number() OVER (PARTITION BY f.tenant, f.grp ORDER BY ",
            group_order!(),
            ") AS rn, \
                      COUNT(*) OVER (PARTITION BY f.tenant, f.grp) AS cg \
               FROM lims CROSS JOIN LATERAL (",
            group_head!(
                "id, tenant, grp, priority, run_at",
                "lims.tenant",
                "lims.grp",
                "",
                "4 * lims.lim"
            ),
            ") f)"
        )),
        ", r AS ( \
           SELECT f.*, row_number() OVER (PARTITION BY f.tenant, f.grp ORDER BY ",
        group_order!(),
        ") AS rn \
           FROM grps CROSS JOIN LATERAL (",
        group_head!(
            "id, tenant, grp, priority, run_at",
            "grps.tenant",
            "grps.grp",
            "",
            "4 * $3"
        ),
        ") f WHERE grps.grp IS NOT NULL AND EXISTS (SELECT 1 FROM inexact)), ",
        ranked!("ranked", "r", ""),
        ", tried AS ( \
           SELECT * FROM ( \
             SELECT id, tr, ts, priority, run_at FROM ranked1 WHERE NOT EXISTS (SELECT 1 FROM inexact) \
             UNION ALL SELECT id, tr, ts, priority, run_at FROM ranked) u \
           ORDER BY tr, ts, ",
        group_order!(),
        " LIMIT 4 * $3), \
         picked AS ( \
           SELECT j.id FROM jobs j JOIN tried r ON r.id = j.id \
           WHERE j.id = ANY(ARRAY(SELECT id FROM tried)) \
             AND j.state IN ('available', 'scheduled', 'retryable') AND j.run_at <= $2 AND ",
        not_paused!(),
        " ORDER BY r.tr, r.ts, r.priority DESC, r.run_at, r.id \
           LIMIT $3 \
           FOR UPDATE OF j SKIP LOCKED) ",
        lease_to!(),
        "FROM (SELECT id FROM picked UNION ALL SELECT id FROM one_picked) AS picked \
         WHERE jobs.id = picked.id \
           AND jobs.state IN ('available', 'scheduled', 'retryable') AND jobs.run_at <= $2",
        claimed!("jobs.*")
    ),
    serve_tenants: serve_tenants!(
        "(SELECT * FROM unnest($2::text[], $3::bigint[]) AS u(tenant, turn))"
    ),
    serve_groups: serve_groups!(
        "(SELECT * FROM unnest($2::text[], $3::text[], $4::bigint[]) AS u(tenant, grp, turn))"
    ),
    complete_many: concat!(postgres_complete!(), "RETURNING jobs.*"),
    complete_ids: concat!(postgres_complete!(), "RETURNING jobs.id"),
    heartbeat_many: concat!(
        "UPDATE jobs SET lease_expires_at = $1, updated_at = $2 \
         FROM unnest($3::bigint[], $4::text[], $5::bigint[]) AS d(id, owner, token)",
        batch_leased!(),
        "AND jobs.id = ANY($3::bigint[]) RETURNING jobs.*"
    ),
    insert: Insert::Arrays(concat!(
        insert_columns!(),
        "SELECT u.*, $1, $1 FROM unnest($2::text[], $3::text[], $4::text[], $5::text[], \
           $6::text[], $7::bigint[], $8::text[], $9::bigint[], $10::bigint[], $11::text[], \
           $12::boolean[], $13::text[]) AS u \
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
