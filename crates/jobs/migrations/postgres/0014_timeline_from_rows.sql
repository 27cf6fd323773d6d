-- A job's timeline without an index entry for each run's events (issue
-- 40, the burn-down's cost): as SQLite's migration 12. `job_events_job`
-- no longer lists the `active` and `completed` events (two a job in a
-- burn-down); a timeline puts them back from the job's `started_at` (set
-- by the claim) and, on the event that ends a run, that run's start and
-- the attempts used before it (`run_started`, `run_attempts`).
ALTER TABLE jobs ADD COLUMN started_at BIGINT;
ALTER TABLE job_events ADD COLUMN run_started BIGINT;
ALTER TABLE job_events ADD COLUMN run_attempts BIGINT;

-- The events written before this: a run's end follows its `active`
-- event, with only `progress` between them.
UPDATE job_events e SET (run_started, run_attempts) = (
    SELECT CASE WHEN p.event = 'active' THEN p.at END,
           CASE WHEN p.event = 'active' THEN p.attempts END
    FROM job_events p
    WHERE p.job_id = e.job_id AND p.seq < e.seq AND p.event <> 'progress'
    ORDER BY p.seq DESC LIMIT 1)
WHERE e.event NOT IN ('enqueued', 'active', 'progress');
UPDATE jobs SET started_at = (
    SELECT a.at FROM job_events a WHERE a.job_id = jobs.id AND a.event = 'active'
    ORDER BY a.seq DESC LIMIT 1)
WHERE state IN ('running', 'completed');

CREATE OR REPLACE FUNCTION job_events_update() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT SET enable_nestloop = off AS $$
DECLARE
    x BIGINT := pg_current_xact_id()::text::bigint;
BEGIN
    INSERT INTO job_events (xid, job_id, tenant, queue, kind, event, attempts, run_at, error, progress, at,
                            run_started, run_attempts)
    SELECT x, n.id, n.tenant, n.queue, n.kind,
           CASE n.state
               WHEN 'running' THEN 'active'
               WHEN 'completed' THEN 'completed'
               WHEN 'retryable' THEN 'failed'
               WHEN 'dead' THEN 'dead'
               WHEN 'cancelled' THEN 'cancelled'
               WHEN 'scheduled' THEN 'delayed'
               ELSE 'waiting'
           END,
           n.attempts, n.run_at,
           CASE WHEN n.state IN ('retryable', 'dead') THEN n.last_error END,
           NULL, n.updated_at,
           CASE WHEN o.state = 'running' THEN o.started_at END,
           CASE WHEN o.state = 'running' THEN o.attempts END
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE n.state <> o.state
    UNION ALL
    SELECT x, n.id, n.tenant, n.queue, n.kind, 'progress', n.attempts, n.run_at, NULL, n.progress, n.updated_at,
           NULL, NULL
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE n.progress IS NOT NULL AND n.progress IS DISTINCT FROM o.progress;
    RETURN NULL;
END $$;

DROP INDEX job_events_job;
CREATE INDEX job_events_job ON job_events (job_id, seq) WHERE event NOT IN ('active', 'completed');
