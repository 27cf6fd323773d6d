-- Budgets of tiers, tenants and keys: a JSON list of
-- {name, money?, tokens?, requests?, period? | window_seconds?, time_zone?}.
-- What they have spent is counted by the gateway (in memory, or in Redis
-- when distributed), not here.

ALTER TABLE tiers ADD COLUMN budgets TEXT NOT NULL DEFAULT '[]';
ALTER TABLE tenants ADD COLUMN budgets TEXT NOT NULL DEFAULT '[]';
ALTER TABLE api_keys ADD COLUMN budgets TEXT NOT NULL DEFAULT '[]';
