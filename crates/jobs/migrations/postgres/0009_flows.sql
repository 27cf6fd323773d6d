-- Flows: a parent job waits for its children. A waiting parent is
-- `scheduled`, not due, with `pending_children` > 0 and a `run_at` no
-- promotion reaches; the statement trigger below, in the transaction of
-- the children's end, counts them down (the last one makes the parent
-- available) or fails it (`on_child_failure = 'fail'` and a child dead or
-- cancelled). Cancelling a parent cancels its descendants that have not
-- started. The trigger's own updates fire it again, so a flow nested in
-- a flow passes its end up the same way. Concurrent ends of two
-- children take the parent's row lock in turn; the second sees the
-- first's count.
ALTER TABLE jobs ADD COLUMN parent_id BIGINT;
ALTER TABLE jobs ADD COLUMN pending_children BIGINT NOT NULL DEFAULT 0;
ALTER TABLE jobs ADD COLUMN on_child_failure TEXT;
CREATE INDEX jobs_parent ON jobs (parent_id) WHERE parent_id IS NOT NULL;

CREATE FUNCTION flows_update() RETURNS trigger LANGUAGE plpgsql
    SET search_path FROM CURRENT AS $$
BEGIN
    -- Only a change of state concerns flows. The updates below fire this
    -- trigger again (nested flows); one that changed no state ends there.
    IF NOT EXISTS (SELECT 1 FROM new_rows n JOIN old_rows o ON o.id = n.id
                   WHERE n.state <> o.state
                     AND (n.parent_id IS NOT NULL OR n.state = 'cancelled')) THEN
        RETURN NULL;
    END IF;
    UPDATE jobs p SET state = 'dead', due = FALSE, pending_children = 0,
        last_error = 'child job ' || e.id || ' ended ' || e.state,
        finished_at = e.updated_at, updated_at = e.updated_at
    FROM (SELECT DISTINCT ON (n.parent_id) n.parent_id, n.id, n.state, n.updated_at
          FROM new_rows n JOIN old_rows o ON o.id = n.id
          WHERE n.parent_id IS NOT NULL AND n.state <> o.state AND n.state IN ('dead', 'cancelled')
          ORDER BY n.parent_id, n.id) e
    WHERE p.id = e.parent_id AND p.state = 'scheduled' AND p.pending_children > 0
      AND p.on_child_failure = 'fail';

    UPDATE jobs p SET pending_children = p.pending_children - c.n,
        state = CASE WHEN p.pending_children = c.n THEN 'available' ELSE p.state END,
        due = CASE WHEN p.pending_children = c.n THEN TRUE ELSE p.due END,
        run_at = CASE WHEN p.pending_children = c.n THEN c.at ELSE p.run_at END,
        updated_at = c.at
    FROM (SELECT n.parent_id, COUNT(*) AS n, MAX(n.updated_at) AS at
          FROM new_rows n JOIN old_rows o ON o.id = n.id JOIN jobs pp ON pp.id = n.parent_id
          WHERE n.parent_id IS NOT NULL AND n.state <> o.state
            AND (n.state = 'completed'
                 OR (n.state IN ('dead', 'cancelled') AND pp.on_child_failure = 'ignore'))
          GROUP BY n.parent_id) c
    WHERE p.id = c.parent_id AND p.state = 'scheduled' AND p.pending_children > 0;

    UPDATE jobs SET state = 'cancelled', lease_owner = NULL, lease_expires_at = NULL,
        finished_at = c.updated_at, updated_at = c.updated_at
    FROM (SELECT n.id, n.updated_at FROM new_rows n JOIN old_rows o ON o.id = n.id
          WHERE n.state = 'cancelled' AND o.state <> 'cancelled') c
    WHERE jobs.parent_id = c.id AND jobs.state IN ('available', 'scheduled', 'retryable');
    RETURN NULL;
END $$;

CREATE TRIGGER flows_update AFTER UPDATE ON jobs
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION flows_update();
