// 015 (SQL Server twin of the PostgreSQL m015). Additive only:
//  - ix_intents_unsettled, a filtered index (intent_id) INCLUDE (partition_key, partition_no) WHERE status IN the
//    unsettled statuses: the scan's read of the open intents after a cursor (partitionReassignQueries.ts) is an
//    ordered seek on it, TOP (@limit) rows, no lookup (covering). The predicate is written exactly as the read's, so
//    the optimizer matches it with a literal IN list (filtered indexes are not used for parameterised predicates).
//  - catch_up_cursor on the change (the catch-up's cursor, recorded with each batch).
// Offline build (ONLINE = ON is an edition feature); guarded so the batch can run twice.
export const m015LargeTableChange = `
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ix_intents_unsettled' AND object_id = OBJECT_ID(N'submission_intents'))
  CREATE INDEX ix_intents_unsettled ON submission_intents (intent_id) INCLUDE (partition_key, partition_no)
    WHERE status IN ('scheduled', 'in_flight', 'failed');
GO

IF COL_LENGTH(N'submission_manager_partition_changes', N'catch_up_cursor') IS NULL
  ALTER TABLE submission_manager_partition_changes ADD catch_up_cursor char(36) COLLATE Latin1_General_100_BIN2 NULL;
GO
`;
