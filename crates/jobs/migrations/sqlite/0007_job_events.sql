-- Every change of a job, in commit order: what `GET /v1/jobs/events`
-- streams. Written by triggers, so that no path that changes a job (an
-- enqueue, a claim, a batch of outcomes, a rescue, the operator) can
-- forget one, in the transaction of the change. `seq` is the event's id;
-- SQLite's one writer makes its order the commit order. A completed
-- event's result is read from its job (not copied here). Kept for
-- `Retention::events`.
CREATE TABLE job_events (
    seq      INTEGER PRIMARY KEY AUTOINCREMENT,
    xid      INTEGER NOT NULL DEFAULT 0,
    job_id   INTEGER NOT NULL,
    tenant   TEXT    NOT NULL,
    queue    TEXT    NOT NULL,
    kind     TEXT    NOT NULL,
    event    TEXT    NOT NULL,
    attempts INTEGER NOT NULL,
    run_at   INTEGER NOT NULL,
    error    TEXT,
    progress TEXT,
    at       INTEGER NOT NULL
);
CREATE INDEX job_events_at ON job_events (at);

CREATE TRIGGER job_events_insert AFTER INSERT ON jobs
BEGIN
    INSERT INTO job_events (job_id, tenant, queue, kind, event, attempts, run_at, at)
    VALUES (NEW.id, NEW.tenant, NEW.queue, NEW.kind, 'enqueued', NEW.attempts, NEW.run_at, NEW.updated_at);
END;

CREATE TRIGGER job_events_state AFTER UPDATE OF state ON jobs
WHEN NEW.state <> OLD.state
BEGIN
    INSERT INTO job_events (job_id, tenant, queue, kind, event, attempts, run_at, error, at)
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
            NEW.updated_at);
END;

CREATE TRIGGER job_events_progress AFTER UPDATE OF progress ON jobs
WHEN NEW.progress IS NOT NULL AND NEW.progress IS NOT OLD.progress
BEGIN
    INSERT INTO job_events (job_id, tenant, queue, kind, event, attempts, run_at, progress, at)
    VALUES (NEW.id, NEW.tenant, NEW.queue, NEW.kind, 'progress', NEW.attempts, NEW.run_at, NEW.progress, NEW.updated_at);
END;
