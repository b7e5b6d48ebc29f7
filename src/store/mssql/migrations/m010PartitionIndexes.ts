// 010 (SQL Server twin of the PostgreSQL m010, which says why each one): the refresh/retention index and the
// rebuild's filtered index become partition-first, the due index (status, partition_no, next_attempt_at) keeps
// status leading for the status-only readers. They REPLACE the partition-less ones (no twins: PostgreSQL's m009
// header). Each new index is created before its predecessor is dropped (both in the migration's one transaction),
// every batch guarded by sys.indexes so it can run twice. Offline builds (ONLINE = ON is an edition feature).
export const m010PartitionIndexes = `
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ix_intents_partition_modified' AND object_id = OBJECT_ID(N'submission_intents'))
  CREATE INDEX ix_intents_partition_modified ON submission_intents (partition_no, last_modified_at, intent_id);
GO

IF EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ix_intents_modified' AND object_id = OBJECT_ID(N'submission_intents'))
  DROP INDEX ix_intents_modified ON submission_intents;
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ix_intents_partition_scheduled' AND object_id = OBJECT_ID(N'submission_intents'))
  CREATE INDEX ix_intents_partition_scheduled ON submission_intents (partition_no, intent_id)
    INCLUDE (status, next_attempt_at, attempt_count, max_attempts, last_modified_at) WHERE status = 'scheduled';
GO

IF EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ix_intents_scheduled' AND object_id = OBJECT_ID(N'submission_intents'))
  DROP INDEX ix_intents_scheduled ON submission_intents;
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ix_intents_status_partition_due' AND object_id = OBJECT_ID(N'submission_intents'))
  CREATE INDEX ix_intents_status_partition_due ON submission_intents (status, partition_no, next_attempt_at);
GO

IF EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ix_intents_due' AND object_id = OBJECT_ID(N'submission_intents'))
  DROP INDEX ix_intents_due ON submission_intents;
GO
`;
