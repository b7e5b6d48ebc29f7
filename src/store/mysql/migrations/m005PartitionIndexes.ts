// 005: the executor's indexes for per-partition execution (issue 25; PostgreSQL's m010, which says why each one):
// the refresh/retention index and the rebuild's covering index become partition-first, the due index
// (status, partition_no, next_attempt_at) keeps status leading for the status-only readers. They REPLACE the
// partition-less ones (no twins: PostgreSQL's m009 header). One ALTER TABLE drops and adds all three (one in-place
// build; atomic DDL in MySQL 8 and MariaDB ≥ 10.6, so an interrupted run leaves the old indexes and runs again);
// MySQL 8 has no DROP/ADD INDEX IF [NOT] EXISTS, so the ALTER is built as text and skipped ('DO 0') once
// information_schema shows ix_intents_partition_modified (as m004 does for its columns).
const ALTER = `ALTER TABLE submission_intents
  DROP INDEX ix_intents_modified, ADD INDEX ix_intents_partition_modified (partition_no, last_modified_at, intent_id),
  DROP INDEX ix_intents_scheduled,
  ADD INDEX ix_intents_partition_scheduled (partition_no, status, intent_id, next_attempt_at, attempt_count, max_attempts, last_modified_at),
  DROP INDEX ix_intents_due, ADD INDEX ix_intents_status_partition_due (status, partition_no, next_attempt_at)`;

export const m005PartitionIndexes = `
SET @sm_ddl = IF(EXISTS(SELECT 1 FROM information_schema.statistics WHERE table_schema = DATABASE()
  AND table_name = 'submission_intents' AND index_name = 'ix_intents_partition_modified'), 'DO 0', '${ALTER.replace(/\n/g, ' ')}');
PREPARE sm_stmt FROM @sm_ddl;
EXECUTE sm_stmt;
DEALLOCATE PREPARE sm_stmt;
`;
