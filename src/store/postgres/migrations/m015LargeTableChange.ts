// 015: a change of the partition count that costs what the open intents cost, not what the table holds. Additive
// only (a previous release keeps working on this schema: it never names the column, and the index serves it too):
//  - ix_intents_failed, (intent_id) WHERE status = 'failed': the scan's read of the failed intents after a cursor is
//    one range of this small index (the scheduled ones are each partition's range of ix_intents_partition_scheduled,
//    the in-flight ones a few entries of ix_intents_status_partition_due), not a walk of the primary key through every
//    finished row. Intake pays nothing for it (a new intent is scheduled); an intent enters it when it fails.
//    (A first version indexed every unsettled status: intake 0.85 × without it, bench unsettledIndex.)
//  - catch_up_cursor on the change: the catch-up's cursor, recorded with each batch as the scan's is, so a catch-up
//    cut short by a step's deadline resumes where it stopped instead of from its first row.
// Plain CREATE INDEX (the migration runs in one transaction, which CONCURRENTLY refuses): the build holds a SHARE lock
// on submission_intents (writes wait, reads go on) while it reads the table once.
export const m015LargeTableChange = `
CREATE INDEX IF NOT EXISTS ix_intents_failed ON submission_intents (intent_id) WHERE status = 'failed';
ALTER TABLE submission_manager_partition_changes ADD COLUMN IF NOT EXISTS catch_up_cursor uuid NULL;
`;
