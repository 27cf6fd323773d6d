-- Fewer index entries at each change of a job's state (issue 40, the
-- burn-down's cost). A claim or a completion is a new row version with an
-- entry in every index whose condition it meets; `jobs_queue_state`
-- (queue, state) took one at each, for the counts by queue and state
-- alone.
--
-- The counts now read the indexes each state already has, each holding
-- its state: the ready ones (`jobs_ready`, `jobs_waiting`), the running
-- ones (`jobs_running`, by row: a pool's leases, not the backlog) and the
-- finished ones (`jobs_finished`, led by state then queue so that the
-- counts come grouped and retention seeks each queue's oldest).
DROP INDEX jobs_queue_state;

DROP INDEX jobs_ready;
CREATE INDEX jobs_ready ON jobs (queue, tenant, grp, priority DESC, run_at, id, state, due)
    WHERE state IN ('available', 'scheduled', 'retryable') AND due;

DROP INDEX jobs_waiting;
CREATE INDEX jobs_waiting ON jobs (queue, run_at, state, due)
    WHERE state IN ('available', 'scheduled', 'retryable') AND NOT due;

DROP INDEX jobs_finished;
CREATE INDEX jobs_finished ON jobs (state, queue, finished_at) WHERE finished_at IS NOT NULL;
