-- One record per key (issue 34): a record written twice (a spill file
-- replayed again after a crash, a batch spilled while a stalled write
-- went through after all) is stored once, and adds to the rollups once.
-- Rows stored before this version get a key of their own (their row id):
-- duplicates they may hold stay as they are, and never fail the unique
-- index.
ALTER TABLE usage_records ADD COLUMN uid TEXT;
UPDATE usage_records SET uid = 'row:' || id;
ALTER TABLE usage_records ALTER COLUMN uid SET NOT NULL;
CREATE UNIQUE INDEX usage_records_uid ON usage_records (uid);
