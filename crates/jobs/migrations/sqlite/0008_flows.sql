-- Flows: a parent job waits for its children. A waiting parent is
-- `scheduled`, not due, with `pending_children` > 0 and a `run_at` no
-- promotion reaches; the triggers below, in the transaction of each
-- child's end, count it down (the last one makes the parent available)
-- or fail it (`on_child_failure = 'fail'` and a child dead or
-- cancelled). Cancelling a parent cancels its descendants that have not
-- started. The jobs' connections run with recursive triggers, so a flow
-- nested in a flow passes its end up the same way.
ALTER TABLE jobs ADD COLUMN parent_id INTEGER;
ALTER TABLE jobs ADD COLUMN pending_children INTEGER NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN on_child_failure TEXT;
CREATE INDEX jobs_parent ON jobs (parent_id) WHERE parent_id IS NOT NULL;

CREATE TRIGGER flows_child_ended AFTER UPDATE OF state ON jobs
WHEN NEW.parent_id IS NOT NULL AND NEW.state <> OLD.state
     AND NEW.state IN ('completed', 'dead', 'cancelled')
BEGIN
    UPDATE jobs SET state = 'dead', due = FALSE, pending_children = 0,
        last_error = 'child job ' || NEW.id || ' ended ' || NEW.state,
        finished_at = NEW.updated_at, updated_at = NEW.updated_at
    WHERE id = NEW.parent_id AND state = 'scheduled' AND pending_children > 0
      AND NEW.state <> 'completed' AND on_child_failure = 'fail';
    UPDATE jobs SET pending_children = pending_children - 1,
        state = CASE WHEN pending_children = 1 THEN 'available' ELSE state END,
        due = CASE WHEN pending_children = 1 THEN TRUE ELSE due END,
        run_at = CASE WHEN pending_children = 1 THEN NEW.updated_at ELSE run_at END,
        updated_at = NEW.updated_at
    WHERE id = NEW.parent_id AND state = 'scheduled' AND pending_children > 0
      AND (NEW.state = 'completed' OR on_child_failure = 'ignore');
END;

CREATE TRIGGER flows_parent_cancelled AFTER UPDATE OF state ON jobs
WHEN NEW.state = 'cancelled' AND OLD.state <> 'cancelled'
BEGIN
    UPDATE jobs SET state = 'cancelled', lease_owner = NULL, lease_expires_at = NULL,
        finished_at = NEW.updated_at, updated_at = NEW.updated_at
    WHERE parent_id = NEW.id AND state IN ('available', 'scheduled', 'retryable');
END;
