-- Retention deletes the oldest events, in `seq` order, up to the first
-- one still kept: it walks the table's own order, so an event no longer
-- needs an entry in an index by time, which every change of every job
-- paid for (issue 40, the burn-down's cost).
DROP INDEX job_events_at;
