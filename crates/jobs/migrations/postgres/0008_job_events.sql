-- Every change of a job, in commit order: what `GET /v1/jobs/events`
-- streams. Written by statement triggers (one INSERT … SELECT per
-- statement, whatever its rows), so that no path that changes a job can
-- forget one, in the transaction of the change. A completed event's
-- result is read from its job (not copied here). Kept for
-- `Retention::events`.
--
-- `seq` numbers are taken before commit, so two transactions can commit
-- them out of order: a reader that went by `seq` alone could pass one
-- that commits late. Each event keeps its transaction's id (`xid`), and a
-- reader takes only events of transactions older than every transaction
-- still running (`pg_snapshot_xmin`), in (`xid`, `seq`) order: no
-- transaction can commit one before them any more.
CREATE TABLE job_events (
    seq      BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,
    xid      BIGINT NOT NULL DEFAULT (pg_current_xact_id()::text::bigint),
    job_id   BIGINT NOT NULL,
    tenant   TEXT   NOT NULL,
    queue    TEXT   NOT NULL,
    kind     TEXT   NOT NULL,
    event    TEXT   NOT NULL,
    attempts BIGINT NOT NULL,
    run_at   BIGINT NOT NULL,
    error    TEXT,
    progress TEXT,
    at       BIGINT NOT NULL
);
CREATE INDEX job_events_order ON job_events (xid, seq);
CREATE INDEX job_events_at ON job_events (at);

-- The functions find `job_events` in the schema the migration ran in,
-- whatever the search path of the session that changes a job.
CREATE FUNCTION job_events_insert() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO job_events (job_id, tenant, queue, kind, event, attempts, run_at, at)
    SELECT n.id, n.tenant, n.queue, n.kind, 'enqueued', n.attempts, n.run_at, n.updated_at
    FROM new_rows n ORDER BY n.id;
    RETURN NULL;
END $$;

CREATE FUNCTION job_events_update() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
BEGIN
    INSERT INTO job_events (job_id, tenant, queue, kind, event, attempts, run_at, error, progress, at)
    SELECT n.id, n.tenant, n.queue, n.kind,
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
           NULL, n.updated_at
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE n.state <> o.state
    UNION ALL
    SELECT n.id, n.tenant, n.queue, n.kind, 'progress', n.attempts, n.run_at, NULL, n.progress, n.updated_at
    FROM new_rows n JOIN old_rows o ON o.id = n.id
    WHERE n.progress IS NOT NULL AND n.progress IS DISTINCT FROM o.progress;
    RETURN NULL;
END $$;

CREATE TRIGGER job_events_insert AFTER INSERT ON jobs
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION job_events_insert();
CREATE TRIGGER job_events_update AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION job_events_update();
