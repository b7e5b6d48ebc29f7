// MySQL / MariaDB: an operator's cancel of a partition change not yet switched, and the failed-step report (port:
// ../partitionPorts.ts cancelChange, recordStepFailure, clearStepFailures). Unfenced: asks and reports from any
// instance. The cancel locks the change row FOR UPDATE as every step does, so it and a step serialise: a switch that
// committed first makes it `switched`; a step after it finds the change ended (stored as completed) and writes nothing.
import { isChangeActive, type CancelChangeOutcome, type PartitionChange } from '../partitionPorts.js';
import { PARTITION_CHANGE_COLS, STEP_ERROR_MAX_LENGTH, decideCancel, toPartitionChange, type PartitionChangeDbRow } from '../partitionMapping.js';
import type { MyDatabase, MyQueryable } from './db.js';
import { NOW } from './rows.js';

const CHANGE = `SELECT ${PARTITION_CHANGE_COLS} FROM submission_manager_partition_changes WHERE change_id = ?`;

const read = async (tx: MyQueryable, changeId: string, lock = '') => {
  const row = (await tx.query<PartitionChangeDbRow>(`${CHANGE}${lock}`, [changeId])).rows[0];
  return row ? toPartitionChange(row) : null;
};

export function cancelChange(db: MyDatabase, changeId: string, cancelledBy: string): Promise<CancelChangeOutcome> {
  return db.transaction(async (tx): Promise<CancelChangeOutcome> => {
    const decided = decideCancel(await read(tx, changeId, ' FOR UPDATE'));
    if (decided.kind !== 'end' && decided.kind !== 'moveBack') return decided;
    // Ended now (no row moved), or back to preparing under to_count := from_count (the pass moves the rows back, then
    // ends it: partitionReassign.ts). (MySQL assigns left to right: to_count last.)
    const set = decided.kind === 'end' ? `state = 'completed', completed_at = ${NOW}`
      : "state = 'preparing', prepare_cursor = NULL, prepared_at = NULL, release_prepare_cursor = NULL, release_prepared_at = NULL, to_count = from_count";
    await tx.query(`UPDATE submission_manager_partition_changes SET ${set}, cancelled_at = ${NOW}, cancelled_by = ?
      WHERE change_id = ? AND state IN ('preparing', 'pending')`, [cancelledBy.slice(0, 128), changeId]);
    return { kind: 'cancelled', change: (await read(tx, changeId))! };
  });
}

export function recordStepFailure(db: MyDatabase, changeId: string, error: string): Promise<PartitionChange | null> {
  return db.transaction(async (tx) => {
    await tx.query(`UPDATE submission_manager_partition_changes SET failed_steps = failed_steps + 1, last_step_error = ?,
      last_failed_at = ${NOW} WHERE change_id = ? AND state <> 'completed'`, [error.slice(0, STEP_ERROR_MAX_LENGTH), changeId]);
    const c = await read(tx, changeId);
    return c && isChangeActive(c) ? c : null;
  });
}

export async function clearStepFailures(db: MyDatabase, changeId: string): Promise<void> {
  await db.query('UPDATE submission_manager_partition_changes SET failed_steps = 0 WHERE change_id = ? AND failed_steps > 0', [changeId]);
}
