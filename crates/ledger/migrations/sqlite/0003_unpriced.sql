-- Unpriced calls (issue 38): a model call whose model had no price is
-- stored with a cost of 0 and this mark, so "free" and "unknown" are
-- told apart; the rollups count them. Rows stored before this version
-- read as priced.
ALTER TABLE usage_records ADD COLUMN unpriced INTEGER NOT NULL DEFAULT 0;
ALTER TABLE usage_rollups ADD COLUMN unpriced INTEGER NOT NULL DEFAULT 0;
