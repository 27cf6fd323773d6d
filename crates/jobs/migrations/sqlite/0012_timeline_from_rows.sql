-- A job's timeline without an index entry for each run's events (issue
-- 40, the burn-down's cost). `job_events_job` (job, seq) took an entry for
-- every event, and a burn-down writes two a job: `active` at its claim,
-- `completed` at its completion. It now holds the other events only, and
-- a timeline puts those two back from what the rows keep:
--
-- * the job keeps when its last run started (`started_at`, set by the
--   claim, which also wrote the `active` event);
-- * an event that ends a run (from `running` to any other state) keeps
--   that run's start and the attempts used before it (`run_started`,
--   `run_attempts`): the `active` event's time and attempts;
-- * a completed job's `completed` event is its `finished_at`, attempts
--   and `run_at`; the run that completed started at `started_at`.
--
-- The `active` and `completed` events stay in `job_events` for the stream
-- in commit order; only the index by job no longer lists them.
ALTER TABLE jobs ADD COLUMN started_at INTEGER;
ALTER TABLE job_events ADD COLUMN run_started INTEGER;
ALTER TABLE job_events ADD COLUMN run_attempts INTEGER;

-- The events written before this: a run's end follows its `active`
-- event, with only `progress` between them.
UPDATE job_events SET (run_started, run_attempts) = (
    SELECT CASE WHEN p.event = 'active' THEN p.at END,
           CASE WHEN p.event = 'active' THEN p.attempts END
    FROM job_events p
    WHERE p.job_id = job_events.job_id AND p.seq < job_events.seq AND p.event <> 'progress'
    ORDER BY p.seq DESC LIMIT 1)
WHERE event NOT IN ('enqueued', 'active', 'progress');
UPDATE jobs SET started_at = (
    SELECT a.at FROM job_events a WHERE a.job_id = jobs.id AND a.event = 'active'
    ORDER BY a.seq DESC LIMIT 1)
WHERE state IN ('running', 'completed');

DROP TRIGGER job_events_state;
CREATE TRIGGER job_events_state AFTER UPDATE OF state ON jobs
WHEN NEW.state <> OLD.state
BEGIN
    INSERT INTO job_events (job_id, tenant, queue, kind, event, attempts, run_at, error, at,
                            run_started, run_attempts)
    VALUES (NEW.id, NEW.tenant, NEW.queue, NEW.kind,
            CASE NEW.state
                WHEN 'running' THEN 'active'
                WHEN 'completed' THEN 'completed'
                WHEN 'retryable' THEN 'failed'
                WHEN 'dead' THEN 'dead'
                WHEN 'cancelled' THEN 'cancelled'
                WHEN 'scheduled' THEN 'delayed'
                ELSE 'waiting'
            END,
            NEW.attempts, NEW.run_at,
            CASE WHEN NEW.state IN ('retryable', 'dead') THEN NEW.last_error END,
            NEW.updated_at,
            CASE WHEN OLD.state = 'running' THEN OLD.started_at END,
            CASE WHEN OLD.state = 'running' THEN OLD.attempts END);
END;

DROP INDEX job_events_job;
CREATE INDEX job_events_job ON job_events (job_id, seq) WHERE event NOT IN ('active', 'completed');
