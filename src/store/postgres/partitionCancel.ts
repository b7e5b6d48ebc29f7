// PostgreSQL: an operator's cancel of a partition change not yet switched, and the failed-step report (port:
// ../partitionPorts.ts cancelChange, recordStepFailure, clearStepFailures). Unfenced: asks and reports from any
// instance. The cancel locks the change row FOR UPDATE as every step does, so it and a step serialise: a switch that
// committed first makes it `switched`; a step after it finds the change ended (stored as completed) and writes nothing.
import type { CancelChangeOutcome, PartitionChange } from '../partitionPorts.js';
import { PARTITION_CHANGE_COLS, STEP_ERROR_MAX_LENGTH, decideCancel, toPartitionChange, type PartitionChangeDbRow } from '../partitionMapping.js';
import type { PgDatabase } from './db.js';

const LOCK = `SELECT ${PARTITION_CHANGE_COLS} FROM submission_manager_partition_changes WHERE change_id = $1 FOR UPDATE`;

// Ended now (no row moved), or back to preparing under to_count := from_count (the pass moves the rows back, then
// ends it: partitionReassign.ts). Either way the count never changed, and a previous release reads it as a change to
// the count in force.
const CANCEL = {
  end: `/* sm:partition_cancel */
WITH now AS MATERIALIZED (SELECT clock_timestamp() AS t)
UPDATE submission_manager_partition_changes SET state = 'completed', completed_at = now.t, cancelled_at = now.t, cancelled_by = $2
  FROM now WHERE change_id = $1 AND state IN ('preparing', 'pending') RETURNING ${PARTITION_CHANGE_COLS}`,
  moveBack: `/* sm:partition_cancel */
UPDATE submission_manager_partition_changes SET state = 'preparing', to_count = from_count, prepare_cursor = NULL, prepared_at = NULL,
       release_prepare_cursor = NULL, release_prepared_at = NULL, cancelled_at = clock_timestamp(), cancelled_by = $2
 WHERE change_id = $1 AND state IN ('preparing', 'pending') RETURNING ${PARTITION_CHANGE_COLS}`,
};

const FAILED = `UPDATE submission_manager_partition_changes
   SET failed_steps = failed_steps + 1, last_step_error = $2, last_failed_at = clock_timestamp()
 WHERE change_id = $1 AND state <> 'completed' RETURNING ${PARTITION_CHANGE_COLS}`;

const CLEARED = 'UPDATE submission_manager_partition_changes SET failed_steps = 0 WHERE change_id = $1 AND failed_steps > 0';

export function cancelChange(db: PgDatabase, changeId: string, cancelledBy: string): Promise<CancelChangeOutcome> {
  return db.transaction(async (tx) => {
    const row = (await tx.query<PartitionChangeDbRow>(LOCK, [changeId])).rows[0];
    const decided = decideCancel(row ? toPartitionChange(row) : null);
    if (decided.kind !== 'end' && decided.kind !== 'moveBack') return decided;
    const r = await tx.query<PartitionChangeDbRow>(CANCEL[decided.kind], [changeId, cancelledBy.slice(0, 128)]);
    return { kind: 'cancelled', change: toPartitionChange(r.rows[0]!) };
  });
}

export async function recordStepFailure(db: PgDatabase, changeId: string, error: string): Promise<PartitionChange | null> {
  const r = await db.query<PartitionChangeDbRow>(FAILED, [changeId, error.slice(0, STEP_ERROR_MAX_LENGTH)]);
  return r.rows[0] ? toPartitionChange(r.rows[0]) : null;
}

export async function clearStepFailures(db: PgDatabase, changeId: string): Promise<void> {
  await db.query(CLEARED, [changeId]);
}
