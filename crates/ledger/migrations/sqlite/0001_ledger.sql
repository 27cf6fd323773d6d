-- The usage ledger: one row per model call, proxied API call or job
-- attempt. Times are milliseconds since the Unix epoch; cost is in
-- nanodollars (integers: millions of rows sum exactly).
CREATE TABLE usage_records (
    id                INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms             INTEGER NOT NULL,
    request_id        TEXT    NOT NULL,
    tenant            TEXT    NOT NULL,
    key_id            TEXT,
    user_tag          TEXT,
    feature           TEXT,
    kind              TEXT    NOT NULL,
    provider          TEXT    NOT NULL,
    model             TEXT    NOT NULL,
    endpoint          TEXT    NOT NULL,
    status            INTEGER NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cached_tokens     INTEGER NOT NULL,
    reasoning_tokens  INTEGER NOT NULL,
    estimated         INTEGER NOT NULL,
    cost_nanos        INTEGER NOT NULL,
    latency_ms        INTEGER NOT NULL,
    queue_ms          INTEGER NOT NULL,
    retries           INTEGER NOT NULL,
    cache_hit         INTEGER NOT NULL
);
CREATE INDEX usage_records_at ON usage_records (at_ms);
CREATE INDEX usage_records_tenant ON usage_records (tenant, at_ms);

-- Sums per minute, hour and day per tenant, key, model and feature,
-- kept up to date in the transaction that inserts the records ('' for
-- no key or feature).
CREATE TABLE usage_rollups (
    granularity       TEXT    NOT NULL,
    bucket_ms         INTEGER NOT NULL,
    tenant            TEXT    NOT NULL,
    key_id            TEXT    NOT NULL,
    model             TEXT    NOT NULL,
    feature           TEXT    NOT NULL,
    requests          INTEGER NOT NULL,
    errors            INTEGER NOT NULL,
    prompt_tokens     INTEGER NOT NULL,
    completion_tokens INTEGER NOT NULL,
    cached_tokens     INTEGER NOT NULL,
    reasoning_tokens  INTEGER NOT NULL,
    cost_nanos        INTEGER NOT NULL,
    PRIMARY KEY (granularity, bucket_ms, tenant, key_id, model, feature)
);
CREATE INDEX usage_rollups_tenant ON usage_rollups (granularity, tenant, bucket_ms);
