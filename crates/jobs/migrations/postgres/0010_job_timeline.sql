-- A job's own events, newest last: the job browser's timeline reads them
-- by job, not by scanning every event.
CREATE INDEX job_events_job ON job_events (job_id, seq);
