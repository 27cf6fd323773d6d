-- Fewer index entries moved at each change of a job's state (issue 40,
-- the burn-down's cost). A claim and a completion each rewrote the job's
-- entries in `jobs_queue_state` (queue, state) and in `jobs_tenant`,
-- whose last column was the state: two entries deleted and inserted
-- again on top of those that must move (`jobs_ready` to `jobs_running`
-- at a claim, `jobs_running` to `jobs_finished` at a completion).
--
-- The counts by queue and state now read the indexes each state already
-- has, each holding its state: the ready ones (`jobs_ready`,
-- `jobs_waiting`, which end with the state and `due` so that
-- the counts read no row), the running ones (`jobs_running`) and the finished
-- ones (`jobs_finished`, led by state then queue so that the counts come
-- grouped and retention seeks each queue's oldest). A tenant's list
-- tests the state on the row, after the index has given the tenant's
-- jobs of the queue in id order.
--
-- `jobs_finished` keeps its condition on `finished_at`, not on the
-- state: a partial index whose condition names the state is weighed at
-- every change of state, the claim's included.
DROP INDEX jobs_queue_state;

DROP INDEX jobs_tenant;
CREATE INDEX jobs_tenant ON jobs (tenant, id, queue);

DROP INDEX jobs_ready;
CREATE INDEX jobs_ready ON jobs (queue, tenant, grp, priority DESC, run_at, id, state, due)
    WHERE state IN ('available', 'scheduled', 'retryable') AND due;

DROP INDEX jobs_waiting;
CREATE INDEX jobs_waiting ON jobs (queue, run_at, state, due)
    WHERE state IN ('available', 'scheduled', 'retryable') AND NOT due;

DROP INDEX jobs_running;
CREATE INDEX jobs_running ON jobs (lease_expires_at, queue) WHERE state = 'running';

DROP INDEX jobs_finished;
CREATE INDEX jobs_finished ON jobs (state, queue, finished_at) WHERE finished_at IS NOT NULL;
