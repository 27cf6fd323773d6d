-- A tenant's list filters by queue and state on the index entry, without
-- reading the rows (and, on SQLite, the payloads stored before those
-- columns) of its jobs that do not match.
DROP INDEX jobs_tenant;
CREATE INDEX jobs_tenant ON jobs (tenant, id, queue, state);
