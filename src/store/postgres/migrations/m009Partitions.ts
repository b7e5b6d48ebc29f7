// 009: partitions (issue 25). Each intent keeps the executor partition it got at insert (partition_no, hashed in
// TypeScript from partition_key or the intent id: src/intents/partition.ts) and the key it was hashed from, so a
// change of the count (issue 26) can re-hash by the same rule. The column's default makes every existing row
// partition 0 (a metadata-only change: no rewrite); no CHECK, which would scan the table under its lock.
// No partition-first indexes yet: twins beside the refresh and due indexes cost every intent write two more
// entries (+11–29 % on a 500-row update) while nothing reads them; the per-partition executor's migration
// replaces those indexes with partition-first ones when its queries use them.
// The partition count is one row; a database that already holds intents records 1 (they are all partition 0),
// a fresh one records the first process's EXECUTOR_PARTITIONS (PartitionStore.recordPartitionCount).
export const m009Partitions = `
ALTER TABLE submission_intents ADD COLUMN IF NOT EXISTS partition_no smallint NOT NULL DEFAULT 0;
ALTER TABLE submission_intents ADD COLUMN IF NOT EXISTS partition_key varchar(128) NULL;

CREATE TABLE IF NOT EXISTS submission_manager_partition_count (
  id               smallint     PRIMARY KEY CHECK (id = 1),
  partition_count  smallint     NOT NULL CHECK (partition_count >= 1),
  recorded_at      timestamptz  NOT NULL,
  recorded_by      varchar(128) NOT NULL
);
INSERT INTO submission_manager_partition_count (id, partition_count, recorded_at, recorded_by)
SELECT 1, 1, clock_timestamp(), 'migration' WHERE EXISTS (SELECT 1 FROM submission_intents)
ON CONFLICT (id) DO NOTHING;
`;
