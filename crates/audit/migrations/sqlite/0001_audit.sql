-- The audit trail. Times are milliseconds since the Unix epoch; `before`
-- and `after` are JSON text (NULL when there was nothing).
CREATE TABLE audit_log (
    id         INTEGER PRIMARY KEY AUTOINCREMENT,
    at_ms      INTEGER NOT NULL,
    actor      TEXT    NOT NULL,
    kind       TEXT    NOT NULL,
    target     TEXT    NOT NULL,
    before     TEXT,
    after      TEXT,
    request_id TEXT
);
CREATE INDEX audit_log_at ON audit_log (at_ms);
CREATE INDEX audit_log_actor ON audit_log (actor, at_ms);
CREATE INDEX audit_log_kind ON audit_log (kind, at_ms);
