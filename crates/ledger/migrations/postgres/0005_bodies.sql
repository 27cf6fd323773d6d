-- Request and response bodies (issue 38), kept when `[request_log]
-- bodies` asks: redacted and cut by the gateway, one row per record
-- (the record's key), written in the transaction that inserts the
-- record, deleted by their own retention or with the record.
CREATE TABLE usage_bodies (
    uid            TEXT    PRIMARY KEY,
    at_ms          BIGINT  NOT NULL,
    request        TEXT    NOT NULL,
    request_bytes  BIGINT  NOT NULL,
    response       TEXT    NOT NULL,
    response_bytes BIGINT  NOT NULL
);
CREATE INDEX usage_bodies_at ON usage_bodies (at_ms);
