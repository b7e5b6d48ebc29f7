// 010: the executor's indexes for per-partition execution (issue 25), REPLACING their partition-less forms (m009's
// header: twins beside them would cost every intent write more index entries for nothing):
//  - refresh and retention, (partition_no, last_modified_at, intent_id) for (last_modified_at, intent_id): each
//    partition's refresh cursor and purge range are one index range;
//  - the rebuild's pages, (partition_no, intent_id) INCLUDE (…) WHERE status = 'scheduled' for m006's (intent_id):
//    still an index-only range scan per page;
//  - the due index, (status, partition_no, next_attempt_at) for (status, next_attempt_at): NOT partition-first, on
//    purpose. Status stays leading because the status-only readers (the overview's per-status counts, the intent
//    list and search by status, recent failures, the redrive's pick) have no partition filter and would otherwise
//    scan every partition's entries; the partition's own readers (orphan recovery: in_flight of one partition; a
//    partition's due backlog) seek (status, partition_no) just the same. The overview's cluster-wide due figures
//    sum per partition (opsStore.ts), each one seek.
// Plain CREATE INDEX (not CONCURRENTLY): the migration runs in one transaction (migrate.ts), which CONCURRENTLY
// refuses; the build holds a SHARE lock on submission_intents (writes wait, reads go on) for its duration.
export const m010PartitionIndexes = `
DROP INDEX IF EXISTS ix_intents_modified;
CREATE INDEX IF NOT EXISTS ix_intents_partition_modified ON submission_intents (partition_no, last_modified_at, intent_id);
DROP INDEX IF EXISTS ix_intents_scheduled;
CREATE INDEX IF NOT EXISTS ix_intents_partition_scheduled ON submission_intents (partition_no, intent_id)
  INCLUDE (next_attempt_at, attempt_count, max_attempts, last_modified_at) WHERE status = 'scheduled';
DROP INDEX IF EXISTS ix_intents_due;
CREATE INDEX IF NOT EXISTS ix_intents_status_partition_due ON submission_intents (status, partition_no, next_attempt_at);
`;
