-- Jobs, their idempotency keys, paused queues and the fairness rotation.
-- Times are milliseconds since the Unix epoch; ids are never reused.

CREATE TABLE jobs (
    id               INTEGER PRIMARY KEY AUTOINCREMENT,
    queue            TEXT    NOT NULL,
    kind             TEXT    NOT NULL,
    payload          TEXT    NOT NULL,
    tenant           TEXT    NOT NULL,
    grp              TEXT    NOT NULL,
    priority         INTEGER NOT NULL DEFAULT 0,
    idempotency_key  TEXT,
    attempts         INTEGER NOT NULL DEFAULT 0,
    max_attempts     INTEGER NOT NULL DEFAULT 3 CHECK (max_attempts >= 1),
    reschedules      INTEGER NOT NULL DEFAULT 0,
    run_at           INTEGER NOT NULL,
    state            TEXT    NOT NULL CHECK (state IN
                         ('available', 'scheduled', 'running', 'retryable', 'completed', 'dead', 'cancelled')),
    last_error       TEXT,
    result           TEXT,
    lease_owner      TEXT,
    lease_token      INTEGER NOT NULL DEFAULT 0,
    lease_expires_at INTEGER,
    created_at       INTEGER NOT NULL,
    updated_at       INTEGER NOT NULL,
    finished_at      INTEGER
);

-- Claims: the due jobs of a queue, per group in claim order.
CREATE INDEX jobs_ready ON jobs (queue, grp, priority DESC, run_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable');
-- Rescue: running jobs by lease expiry.
CREATE INDEX jobs_running ON jobs (lease_expires_at) WHERE state = 'running';
-- Counts, listing, retry and purge of dead jobs.
CREATE INDEX jobs_queue_state ON jobs (queue, state);
-- Retention.
CREATE INDEX jobs_finished ON jobs (state, finished_at) WHERE finished_at IS NOT NULL;

-- One row per (tenant, key) while the key deduplicates; job_id is NULL only
-- inside the enqueue transaction that claimed the key.
CREATE TABLE idempotency_keys (
    tenant     TEXT    NOT NULL,
    idem_key   TEXT    NOT NULL,
    job_id     INTEGER REFERENCES jobs (id) ON DELETE CASCADE,
    expires_at INTEGER NOT NULL,
    PRIMARY KEY (tenant, idem_key)
);
CREATE INDEX idempotency_keys_job ON idempotency_keys (job_id);
CREATE INDEX idempotency_keys_expiry ON idempotency_keys (expires_at);

CREATE TABLE queues (
    name       TEXT    PRIMARY KEY,
    paused     BOOLEAN NOT NULL DEFAULT FALSE,
    updated_at INTEGER NOT NULL
);

-- When each group of a queue was last served by a claim (a counter, not a
-- time): the group served longest ago goes first.
CREATE TABLE queue_groups (
    queue  TEXT    NOT NULL,
    grp    TEXT    NOT NULL,
    served INTEGER NOT NULL,
    PRIMARY KEY (queue, grp)
);
