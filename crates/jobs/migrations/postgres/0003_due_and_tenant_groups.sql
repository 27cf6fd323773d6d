-- Claims walk only due jobs, and fairness groups belong to a tenant.
--
-- `due` is set once a job's run_at has passed (at enqueue, or when a claim
-- promotes it), so that jobs scheduled far ahead stay out of `jobs_ready`,
-- which each claim walks group by group: a claim costs what is due, not
-- every group ever scheduled. Only ready states read it.
ALTER TABLE jobs ADD COLUMN due BOOLEAN NOT NULL DEFAULT FALSE;
UPDATE jobs SET due = TRUE WHERE state = 'available';

DROP INDEX jobs_ready;
-- Claims: the due jobs of a queue, per tenant and group in claim order.
CREATE INDEX jobs_ready ON jobs (queue, tenant, grp, priority DESC, run_at, id)
    WHERE state IN ('available', 'scheduled', 'retryable') AND due;
-- Promotion: ready jobs not yet due, by run_at.
CREATE INDEX jobs_waiting ON jobs (queue, run_at)
    WHERE state IN ('available', 'scheduled', 'retryable') AND NOT due;

-- A group is a tenant's: two tenants naming the same group take separate
-- turns. The rotation restarts (every group as if never served).
DROP TABLE queue_groups;
CREATE TABLE queue_groups (
    queue  TEXT    NOT NULL,
    tenant TEXT    NOT NULL,
    grp    TEXT    NOT NULL,
    served BIGINT  NOT NULL,
    PRIMARY KEY (queue, tenant, grp)
);
-- When each tenant of a queue was last served: tenants take turns first,
-- then the groups of the tenant whose turn it is.
CREATE TABLE queue_tenants (
    queue  TEXT    NOT NULL,
    tenant TEXT    NOT NULL,
    served BIGINT  NOT NULL,
    PRIMARY KEY (queue, tenant)
);
