-- Capacity pools and aliases (issue 36): the name the client called when
-- it was an alias (`[aliases]`), and the deployment of a pool that served
-- the call (`{provider}/{upstream model}`). Empty for other calls and for
-- rows stored before this version.
ALTER TABLE usage_records ADD COLUMN alias TEXT;
ALTER TABLE usage_records ADD COLUMN deployment TEXT;
