-- Unpriced calls (issue 38): a model call whose model had no price is
-- stored with a cost of 0 and this mark (1), so "free" and "unknown" are
-- told apart; the rollups count them. An integer, not a boolean, so that
-- the totals over records sum it as they sum the rollups. Rows stored
-- before this version read as priced.
ALTER TABLE usage_records ADD COLUMN unpriced BIGINT NOT NULL DEFAULT 0;
ALTER TABLE usage_rollups ADD COLUMN unpriced BIGINT NOT NULL DEFAULT 0;
