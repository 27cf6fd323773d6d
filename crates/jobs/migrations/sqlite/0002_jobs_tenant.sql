-- A tenant's jobs in id order: `GET /v1/jobs` filters by tenant in the
-- query instead of reading every tenant's jobs and skipping others'.
CREATE INDEX jobs_tenant ON jobs (tenant, id);
