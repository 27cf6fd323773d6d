-- Schedules: a job template enqueued every so often, or at the ticks of
-- a cron expression in a time zone. A tick fires once however many
-- replicas look: the one whose conditional update moves `next_run` past
-- it enqueues its job, in the same transaction. `next_run` is NULL once
-- the schedule has ended (its limit, its end_at).
CREATE TABLE schedules (
    tenant     TEXT    NOT NULL,
    name       TEXT    NOT NULL,
    every_ms   BIGINT,
    cron       TEXT,
    tz         TEXT,
    job        TEXT    NOT NULL,
    start_at   BIGINT,
    end_at     BIGINT,
    run_limit  BIGINT,
    runs       BIGINT  NOT NULL DEFAULT 0,
    next_run   BIGINT,
    last_run   BIGINT,
    created_at BIGINT  NOT NULL,
    updated_at BIGINT  NOT NULL,
    PRIMARY KEY (tenant, name),
    CHECK ((every_ms IS NULL) <> (cron IS NULL))
);
-- The firing loop: due schedules by time.
CREATE INDEX schedules_due ON schedules (next_run) WHERE next_run IS NOT NULL;

-- The schedule that enqueued a job and the tick it fired for, and what
-- its kind last said of its progress (JSON).
ALTER TABLE jobs ADD COLUMN schedule TEXT;
ALTER TABLE jobs ADD COLUMN schedule_tick BIGINT;
ALTER TABLE jobs ADD COLUMN progress TEXT;
