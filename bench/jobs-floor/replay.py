#!/usr/bin/env python3
"""The SQL of a `sluice bench jobs` burn-down, for replay.c: SQLite's work
without sqlx, tokio or the worker pool, on the job store's schema.

    replay.py MIGRATIONS_DIR setup JOBS             # schema, then JOBS jobs in inserts of 1,000
    replay.py MIGRATIONS_DIR floor JOBS BATCH       # claims and completions by id
    replay.py MIGRATIONS_DIR sluice JOBS BATCH      # the statements Sluice sends

Each round claims BATCH jobs (synchronous = NORMAL, as Sluice's claims)
and completes them (synchronous = FULL). `floor` changes the same rows as
plainly as SQLite allows: one UPDATE by id list each, returning what a
worker needs (the claim every column, the completion the ids). `sluice`
sends the burn-down's own statements (crates/jobs/src/sql/dialect.rs, the
SQLite dialect, values inlined): the promotion, the claim with its walk,
ranking and turns, the two rotation upserts, the JSON batch completion.
"""
import glob
import sys

READY = "state IN ('available', 'scheduled', 'retryable') AND due"
Q = "'burn'"
NOW = 1_700_000_001_000


def setup(mig, jobs):
    out = ["PRAGMA journal_mode=WAL;"]
    for f in sorted(glob.glob(mig + "/*.sql")):
        out.append(open(f).read())
    out.append("PRAGMA recursive_triggers=ON; PRAGMA synchronous=FULL;")
    for s in range(0, jobs, 1000):
        rows = ",".join(
            f"('burn','noop','{{\"i\":{i}}}','default','default',0,NULL,3,{NOW},'available',1,NULL,{NOW},{NOW})"
            for i in range(s, min(s + 1000, jobs)))
        out.append(
            "BEGIN IMMEDIATE; INSERT INTO jobs (queue, kind, payload, tenant, grp, priority, "
            "idempotency_key, max_attempts, run_at, state, due, traceparent, created_at, updated_at) "
            "VALUES " + rows + " RETURNING id; COMMIT;")
    return out


def claim(n):
    return f"""WITH RECURSIVE tenants(t) AS (
 SELECT (SELECT MIN(tenant) FROM jobs WHERE queue = {Q} AND {READY}) UNION ALL
 SELECT (SELECT MIN(tenant) FROM jobs WHERE queue = {Q} AND {READY} AND tenant > tenants.t) FROM tenants WHERE tenants.t IS NOT NULL),
grps(tenant, grp) AS (
 SELECT t, (SELECT MIN(grp) FROM jobs WHERE queue = {Q} AND {READY} AND tenant = tenants.t) FROM tenants WHERE tenants.t IS NOT NULL
 UNION ALL
 SELECT tenant, (SELECT MIN(grp) FROM jobs WHERE queue = {Q} AND {READY} AND tenant = grps.tenant AND grp > grps.grp) FROM grps WHERE grps.grp IS NOT NULL),
firsts AS (
 SELECT j.id, j.tenant, j.grp, j.priority, j.run_at FROM grps JOIN jobs j ON j.id IN (
  SELECT id FROM jobs WHERE queue = {Q} AND tenant = grps.tenant AND grp = grps.grp AND {READY} AND run_at <= {NOW}
  ORDER BY priority DESC, run_at, id LIMIT {n})
 WHERE grps.grp IS NOT NULL AND NOT EXISTS (SELECT 1 FROM one)),
r AS (SELECT id, tenant, grp, priority, run_at,
  row_number() OVER (PARTITION BY tenant, grp ORDER BY priority DESC, run_at, id) AS rn FROM firsts),
one AS (SELECT tenant, grp FROM grps WHERE grp IS NOT NULL AND (SELECT COUNT(*) FROM grps WHERE grp IS NOT NULL) = 1),
ranked AS (
 SELECT r.id, r.priority, r.run_at, COALESCE(t.served, 0) AS ts,
  row_number() OVER (PARTITION BY r.tenant ORDER BY r.rn, COALESCE(g.served, 0), r.priority DESC, r.run_at, r.id) AS tr
 FROM r LEFT JOIN queue_groups g ON g.queue = {Q} AND g.tenant = r.tenant AND g.grp = r.grp
 LEFT JOIN queue_tenants t ON t.queue = {Q} AND t.tenant = r.tenant)
UPDATE jobs SET state = 'running', lease_owner = 'w', lease_expires_at = {NOW + 30000},
  lease_token = lease_token + 1, updated_at = {NOW}
WHERE (id IN (SELECT id FROM jobs WHERE queue = {Q} AND tenant = (SELECT tenant FROM one)
   AND grp = (SELECT grp FROM one) AND {READY} AND run_at <= {NOW} ORDER BY priority DESC, run_at, id LIMIT {n})
 OR id IN (SELECT id FROM ranked ORDER BY tr, ts, priority DESC, run_at, id LIMIT {n}))
 AND state IN ('available', 'scheduled', 'retryable') AND run_at <= {NOW}
 AND NOT EXISTS (SELECT 1 FROM queues q WHERE q.name = {Q} AND q.paused)
RETURNING *,
 CASE WHEN EXISTS (SELECT 1 FROM one) THEN 0 ELSE COALESCE((SELECT g.served FROM queue_groups g
   WHERE g.queue = jobs.queue AND g.tenant = jobs.tenant AND g.grp = jobs.grp), 0) END AS group_served,
 CASE WHEN EXISTS (SELECT 1 FROM one) THEN 0 ELSE COALESCE((SELECT t.served FROM queue_tenants t
   WHERE t.queue = jobs.queue AND t.tenant = jobs.tenant), 0) END AS tenant_served;"""


def zipped(arrays, names):
    ctes = ", ".join(
        f"{c} AS MATERIALIZED (SELECT key, value FROM json_each('{a}'))"
        for c, a in zip("abc", arrays))
    cols = ", ".join(f"{c}.value AS {n}" for c, n in zip("abc", names))
    joins = " ".join(f"JOIN {c} ON {c}.key = a.key" for c in "abc"[1:len(arrays)])
    return f"(WITH {ctes} SELECT {cols} FROM a {joins})"


def burn(jobs, batch, sluice):
    out = ["PRAGMA recursive_triggers=ON;"]
    for lo in range(1, jobs + 1, batch):
        hi = min(lo + batch, jobs + 1)
        ids = ",".join(str(i) for i in range(lo, hi))
        out.append("PRAGMA synchronous=NORMAL; BEGIN IMMEDIATE;")
        if sluice:
            out.append(
                f"UPDATE jobs SET due = TRUE WHERE id IN (SELECT id FROM jobs WHERE queue = {Q} "
                f"AND state IN ('available', 'scheduled', 'retryable') AND NOT due AND run_at <= {NOW} "
                "ORDER BY run_at LIMIT 10000);")
            out.append(claim(batch))
            out.append(
                "INSERT INTO queue_tenants (queue, tenant, served) SELECT 'burn', s.tenant, m.last + s.turn FROM "
                + zipped(['["default"]', '[1]'], ["tenant", "turn"])
                + " AS s, (SELECT COALESCE(MAX(served), 0) AS last FROM queue_tenants WHERE queue = 'burn') AS m"
                " WHERE TRUE ON CONFLICT (queue, tenant) DO UPDATE SET served = excluded.served;")
            out.append(
                "INSERT INTO queue_groups (queue, tenant, grp, served) SELECT 'burn', s.tenant, s.grp, m.last + s.turn FROM "
                + zipped(['["default"]', '["default"]', '[1]'], ["tenant", "grp", "turn"])
                + " AS s, (SELECT COALESCE(MAX(served), 0) AS last FROM queue_groups WHERE queue = 'burn') AS m"
                " WHERE TRUE ON CONFLICT (queue, tenant, grp) DO UPDATE SET served = excluded.served;")
        else:
            out.append(
                f"UPDATE jobs SET state = 'running', lease_owner = 'w', lease_expires_at = {NOW + 30000}, "
                f"lease_token = lease_token + 1, updated_at = {NOW} WHERE id IN ({ids}) "
                "AND state IN ('available', 'scheduled', 'retryable') RETURNING *;")
        out.append("COMMIT; PRAGMA synchronous=FULL; BEGIN IMMEDIATE;")
        done = ("UPDATE jobs SET state = 'completed', result = {r}, attempts = attempts + 1, "
                f"lease_owner = NULL, lease_expires_at = NULL, updated_at = {NOW}, finished_at = {NOW} ")
        if sluice:
            arr = "[" + ",".join(
                '{"id":%d,"owner":"w","token":1,"result":"null"}' % i for i in range(lo, hi)) + "]"
            out.append(
                done.format(r="d.result")
                + "FROM (SELECT json_extract(value, '$.id') AS id, json_extract(value, '$.owner') AS owner, "
                "json_extract(value, '$.token') AS token, json_extract(value, '$.result') AS result "
                f"FROM jsonb_each('{arr}')) AS d WHERE jobs.id = d.id AND jobs.state = 'running' "
                "AND jobs.lease_owner = d.owner AND jobs.lease_token = d.token RETURNING id;")
        else:
            out.append(done.format(r="'null'")
                       + f"WHERE id IN ({ids}) AND state = 'running' AND lease_owner = 'w' RETURNING id;")
        out.append("COMMIT;")
    return out


def main():
    mig, what, jobs = sys.argv[1], sys.argv[2], int(sys.argv[3])
    if what == "setup":
        out = setup(mig, jobs)
    elif what in ("floor", "sluice"):
        out = burn(jobs, int(sys.argv[4]), what == "sluice")
    else:
        sys.exit(f"unknown part {what!r}: setup, floor or sluice")
    print("\n".join(out))


if __name__ == "__main__":
    main()
