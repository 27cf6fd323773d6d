#!/usr/bin/env python3
"""The row changes of a `sluice bench jobs` burn-down on PostgreSQL, as
plain statements by id for psql: PostgreSQL's own work, without Sluice.

    replay_pg.py setup JOBS           # JOBS jobs in inserts of 1,000, one transaction each
    replay_pg.py floor JOBS BATCH     # claims and completions by id

The schema is the job store's (crates/jobs/migrations/postgres, applied by
run-postgres.sh: its triggers and indexes as they are). Each round claims
BATCH jobs in a transaction that does not wait for its commit to reach the
disk (`synchronous_commit = off`, as Sluice's claims) and completes them in
one that does (as Sluice's batch completions): one UPDATE by id list each,
returning what a worker needs (the claim every column, the completion the
ids), as bench/jobs-floor/replay.py's `floor` does on SQLite.
"""
import sys

NOW = 1_700_000_001_000


def setup(jobs):
    out = []
    for s in range(0, jobs, 1000):
        rows = ",".join(
            f"('burn','noop','{{\"i\":{i}}}','default','default',0,NULL,3,{NOW},'available',TRUE,NULL,{NOW},{NOW})"
            for i in range(s, min(s + 1000, jobs)))
        out.append(
            "INSERT INTO jobs (queue, kind, payload, tenant, grp, priority, "
            "idempotency_key, max_attempts, run_at, state, due, traceparent, created_at, updated_at) "
            "VALUES " + rows + " RETURNING id;")
    return out


def floor(jobs, batch):
    out = []
    for lo in range(1, jobs + 1, batch):
        hi = min(lo + batch, jobs + 1)
        ids = ",".join(str(i) for i in range(lo, hi))
        out.append("BEGIN; SET LOCAL synchronous_commit = off;")
        out.append(
            f"UPDATE jobs SET state = 'running', lease_owner = 'w', lease_expires_at = {NOW + 30000}, "
            f"lease_token = lease_token + 1, updated_at = {NOW} WHERE id IN ({ids}) "
            "AND state IN ('available', 'scheduled', 'retryable') RETURNING *;")
        out.append("COMMIT;")
        out.append(
            "UPDATE jobs SET state = 'completed', result = 'null', attempts = attempts + 1, "
            f"lease_owner = NULL, lease_expires_at = NULL, updated_at = {NOW}, finished_at = {NOW} "
            f"WHERE id IN ({ids}) AND state = 'running' AND lease_owner = 'w' RETURNING id;")
    return out


def main():
    what, jobs = sys.argv[1], int(sys.argv[2])
    if what == "setup":
        out = setup(jobs)
    elif what == "floor":
        out = floor(jobs, int(sys.argv[3]))
    else:
        sys.exit(f"unknown part {what!r}: setup or floor")
    print("\n".join(out))


if __name__ == "__main__":
    main()
