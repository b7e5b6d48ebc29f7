// Row ↔ domain mapping of the partition-change table (issue 26) and the request decision, shared by the dialects
// (same column names in each; see partitionPorts.ts for the meaning of every field).
import type { CancelChangeOutcome, PartitionChange, PartitionChangeState, PartitionCount, PartitionMove, RequestChangeOutcome } from './partitionPorts.js';
import type { LeaseToken } from './ports.js';
import { num } from './rowMapping.js';
import { SETTLED_SQL_LIST } from './intentPorts.js';
import { appVersion } from '../config.js';

/** The release recorded on a change this release requests (requested_release): its claim and switch are then refused
 *  to a changer of a release before the guard (the migration's CHECK: PostgreSQL m018, MySQL m012, SQL Server m018). */
export const requestingRelease = (): string => appVersion().slice(0, 64);

export const PARTITION_CHANGE_COLS = `change_id, from_count, to_count, state, requested_at, requested_by, prepare_cursor,
  prepared_at, changer, claimed_at, switched_at, scan_cursor, scan_done_at, catch_up_cursor, rows_moved, completed_at, failed_steps, last_step_error, last_failed_at, cancelled_at, cancelled_by`;

/** What the preparing pass may move (the intent as `alias`): settled, and no attempt `started` (a call cancelled in
 *  flight still has its completion to write in its partition). A settled intent never gets a new started attempt (a
 *  start needs status scheduled), so once true under the row's lock, it stays true. Portable SQL, every dialect. */
export const PREPARABLE_SQL = (alias: string) => `${alias}.status IN ${SETTLED_SQL_LIST}
     AND NOT ${callOut(alias)}`;

/** What the preparing pass leaves to the scan (the intent as `alias`): settled with its call still out. The pass bumps
 *  its last_modified_at, so the scan (rows modified since the horizon) moves it once the attempt closed, whether the
 *  switch abandons it or its completion comes first (a completion leaves a settled intent's row as it is). */
export const LEFT_TO_SCAN_SQL = (alias: string) => `${alias}.status IN ${SETTLED_SQL_LIST}
     AND ${callOut(alias)}`;

/** The intent `alias` has an attempt `started` (its call may still be out). */
const callOut = (alias: string) =>
  `EXISTS (SELECT 1 FROM submission_attempts AS a WHERE a.intent_id = ${alias}.intent_id AND a.outcome = 'started')`;

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
  catch_up_cursor: string | null;
  rows_moved: number | string | bigint;
  completed_at: Date | null;
  failed_steps: number | string | null;
  last_step_error: string | null;
  last_failed_at: Date | null;
  cancelled_at: Date | null;
  cancelled_by: string | null;
}

export const toPartitionChange = (r: PartitionChangeDbRow): PartitionChange => ({
  changeId: r.change_id.toLowerCase(),
  fromCount: num(r.from_count),
  toCount: num(r.to_count),
  state: r.state === 'completed' && r.cancelled_at ? 'cancelled' : r.state,
  requestedAt: r.requested_at,
  requestedBy: r.requested_by,
  prepareCursor: r.prepare_cursor === null ? null : r.prepare_cursor.toLowerCase(),
  preparedAt: r.prepared_at,
  changer: r.changer,
  claimedAt: r.claimed_at,
  switchedAt: r.switched_at,
  scanCursor: r.scan_cursor === null ? null : r.scan_cursor.toLowerCase(),
  scanDoneAt: r.scan_done_at,
  catchUpCursor: r.catch_up_cursor === null || r.catch_up_cursor === undefined ? null : r.catch_up_cursor.toLowerCase(),
  rowsMoved: num(r.rows_moved),
  completedAt: r.completed_at,
  failedSteps: num(r.failed_steps ?? 0),
  lastStepError: r.last_step_error ?? null,
  lastFailedAt: r.last_failed_at ?? null,
  cancelledAt: r.cancelled_at ?? null,
  cancelledBy: r.cancelled_by ?? null,
});

/** The width of last_step_error in every dialect. */
export const STEP_ERROR_MAX_LENGTH = 300;

/** What cancelChange does with the change as it found it, locked: `end` it now (no row moved yet: nothing to undo), or
 *  `moveBack` (its preparing pass moved finished rows: the pass runs again under to_count := from_count, then ends
 *  it); else the answer. A preparing change already cancelled is moving back; a pending one (a previous release's pass
 *  moved them back) ends. */
export function decideCancel(c: PartitionChange | null): CancelChangeOutcome | { kind: 'end' } | { kind: 'moveBack' } {
  if (!c) return { kind: 'notFound' };
  if (c.state === 'cancelled' || (c.state === 'preparing' && c.cancelledAt !== null)) return { kind: 'alreadyCancelled', change: c };
  if (c.state === 'reassigning' || c.state === 'completed') return { kind: 'switched', change: c };
  return c.rowsMoved === 0 || c.fromCount === c.toCount ? { kind: 'end' } : { kind: 'moveBack' };
}

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

/** The steps that need every lease 0..max(from, to)−1: a shorter fence is a caller's bug. */
export function requireWholeFence(fence: LeaseToken[], c: PartitionChange): void {
  const m = Math.max(c.fromCount, c.toCount);
  if (fence.length < m) throw new RangeError(`partition change ${c.changeId}: fenced by ${fence.length} lease(s), needs all ${m}`);
}

/** A move outside 0..toCount−1 is a caller's bug: nothing is written. */
export function requireMovesInRange(c: PartitionChange, moves: PartitionMove[]): void {
  const bad = moves.find((m) => !Number.isInteger(m.partition) || m.partition < 0 || m.partition >= c.toCount);
  if (bad) throw new RangeError(`partition change ${c.changeId}: intent ${bad.intentId} cannot move to partition ${bad.partition} of ${c.toCount}`);
}
