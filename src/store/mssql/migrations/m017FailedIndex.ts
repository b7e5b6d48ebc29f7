// 017: ix_intents_failed_modified, a filtered index (last_modified_at, intent_id) INCLUDE (status) WHERE status =
// 'failed': the dashboard's recent failures (newest first) and the redrive's pick (oldest first) read @limit entries
// of it in order instead of every failed intent's entry of ix_intents_status_partition_due, a key lookup each and a
// sort. Both statements write the filter as literal text, so the optimizer matches it. Intake pays nothing (a new
// intent is scheduled); an intent enters when it fails and leaves when redriven or purged. Additive (a new index no
// statement of a previous release names). Offline build (ONLINE = ON is an edition feature), guarded to run twice.
export const m017FailedIndex = `
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ix_intents_failed_modified' AND object_id = OBJECT_ID(N'submission_intents'))
  CREATE INDEX ix_intents_failed_modified ON submission_intents (last_modified_at, intent_id) INCLUDE (status)
    WHERE status = 'failed';
GO
`;
