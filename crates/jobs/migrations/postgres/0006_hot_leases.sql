-- Leases renewed in place, and stale entries cleaned sooner.
--
-- A heartbeat rewrites `lease_expires_at`; while that column was the key
-- of `jobs_running`, every renewal was a new row version with a new entry
-- in each of the table's indexes. Keyed on `id` (which never changes),
-- with room left on each page (`fillfactor`), a renewal is a HOT update:
-- the new version stays on its page and no index is touched. The rescuer
-- reads the running jobs (a pool's leases, not the backlog) and tests
-- their expiry on the row.
ALTER TABLE jobs SET (fillfactor = 80);
DROP INDEX jobs_running;
CREATE INDEX jobs_running ON jobs (id) WHERE state = 'running';

-- A claimed or finished job leaves its old entries in the indexes until
-- VACUUM removes them, and the claim's walk of `jobs_ready` steps over
-- those at the front of each group. By default a table is vacuumed once a
-- fifth of it is dead rows, which for a table that keeps finished jobs
-- for their retention means a long wait; vacuum after 1 % (and 1,000)
-- instead.
ALTER TABLE jobs SET (autovacuum_vacuum_scale_factor = 0.01, autovacuum_vacuum_threshold = 1000);
