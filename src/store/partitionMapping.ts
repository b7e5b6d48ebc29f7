// Row ↔ domain mapping of the partition-change table (issue 26) and the request decision, shared by the dialects
// (same column names in each; see partitionPorts.ts for the meaning of every field).
import type { PartitionChange, PartitionChangeState, PartitionCount, RequestChangeOutcome } from './partitionPorts.js';
import { num } from './rowMapping.js';

export const PARTITION_CHANGE_COLS = `change_id, from_count, to_count, state, requested_at, requested_by, prepare_cursor,
  prepared_at, changer, claimed_at, switched_at, scan_cursor, scan_done_at, rows_moved, completed_at`;

export interface PartitionChangeDbRow {
  change_id: string;
  from_count: number | string;
  to_count: number | string;
  state: PartitionChangeState;
  requested_at: Date;
  requested_by: string;
  prepare_cursor: string | null;
  prepared_at: Date | null;
  changer: string | null;
  claimed_at: Date | null;
  switched_at: Date | null;
  scan_cursor: string | null;
  scan_done_at: Date | null;
  rows_moved: number | string | bigint;
  completed_at: Date | null;
}

export const toPartitionChange = (r: PartitionChangeDbRow): PartitionChange => ({
  changeId: r.change_id.toLowerCase(),
  fromCount: num(r.from_count),
  toCount: num(r.to_count),
  state: r.state,
  requestedAt: r.requested_at,
  requestedBy: r.requested_by,
  prepareCursor: r.prepare_cursor === null ? null : r.prepare_cursor.toLowerCase(),
  preparedAt: r.prepared_at,
  changer: r.changer,
  claimedAt: r.claimed_at,
  switchedAt: r.switched_at,
  scanCursor: r.scan_cursor === null ? null : r.scan_cursor.toLowerCase(),
  scanDoneAt: r.scan_done_at,
  rowsMoved: num(r.rows_moved),
  completedAt: r.completed_at,
});

/** What requestChange does, decided under the lock on the count row from what it read there: `sameId` is the change
 *  already recorded under this request's changeId (a retry after a lost reply: that change is the answer), `active`
 *  the change not yet completed. 'create' = insert the change (fromCount = count.count); anything else is the reply. */
export function decideChangeRequest(toCount: number, count: PartitionCount, active: PartitionChange | null,
  sameId: PartitionChange | null): RequestChangeOutcome | { kind: 'create' } {
  if (sameId) return { kind: 'existing', change: sameId };
  if (active) return active.toCount === toCount ? { kind: 'existing', change: active } : { kind: 'conflict', active };
  if (count.count === toCount) return { kind: 'unchanged', count };
  return { kind: 'create' };
}
