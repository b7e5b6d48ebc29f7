// 015: a change of the partition count that costs what the open intents cost, not what the table holds. Additive
// only (a previous release keeps working on this schema: it never names the column, and the index serves it too):
//  - ix_intents_unsettled, (intent_id) WHERE status IN the unsettled statuses: the scan's read of the open intents
//    after a cursor is one range of this small index (a page examines its own rows), not a walk of the primary key
//    through every finished row. Intake pays one entry per open row version (an update that changes status is never
//    HOT here: ix_intents_status_partition_due holds status); settled rows leave it.
//  - catch_up_cursor on the change: the catch-up's cursor, recorded with each batch as the scan's is, so a catch-up
//    cut short by a step's deadline resumes where it stopped instead of from its first row.
// Plain CREATE INDEX (the migration runs in one transaction, which CONCURRENTLY refuses): the build holds a SHARE lock
// on submission_intents (writes wait, reads go on) while it reads the table once.
export const m015LargeTableChange = `
CREATE INDEX IF NOT EXISTS ix_intents_unsettled ON submission_intents (intent_id)
  WHERE status IN ('scheduled', 'in_flight', 'failed');
ALTER TABLE submission_manager_partition_changes ADD COLUMN IF NOT EXISTS catch_up_cursor uuid NULL;
`;
