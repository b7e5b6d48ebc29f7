// MySQL / MariaDB: the partition changer's writes (issue 26; port: ../partitionPorts.ts). The preparing pass is
// unfenced (it moves settled intents with no attempt started only; its batch is in partitionReassign.ts); every other step is one READ COMMITTED transaction fenced by EVERY lease of `fence` (fence.ts fencedTransactionAll: the lease rows locked for share to
// commit, one audit row per lease). Lock order, as in every fenced write: lease rows (in lease-name order), the change
// row (FOR UPDATE: the state each step decides from), then intents in id order. A step does nothing unless the change
// is in the state it starts from, so a retry after a lost reply (or by the next changer) finds it done.
import { isChangeActive, type PartitionChange, type PartitionMove, type PrepareBatch, type ReassignProgress } from '../partitionPorts.js';
import type { Fenced, LeaseToken } from '../ports.js';
import { PARTITION_CHANGE_COLS, requireMovesInRange, requireWholeFence, toPartitionChange, type PartitionChangeDbRow } from '../partitionMapping.js';
import type { MyDatabase, MyQueryable } from './db.js';
import { prepareBatch as prepareRange } from './partitionReassign.js';
import { fencedTransactionAll, writeAudit } from './fence.js';
import { expireHeld, lockHeld, type Locked } from './leaseStore.js';
import { BUDGET, NEXT_MODIFIED, NOW, idParam } from './rows.js';

const ID = 'CHAR(36) CHARACTER SET ascii COLLATE ascii_bin';
const CHANGE = `SELECT ${PARTITION_CHANGE_COLS} FROM submission_manager_partition_changes WHERE change_id = ?`;

// Every attempt still 'started' is abandoned and every in_flight intent scheduled again, due now (failed when its
// budget is spent, as orphan recovery does: an abandoned attempt counts as sent). No executor can hold a partition
// (the changer holds every lease), and the next leader of an intent's NEW partition could not recover it: its epoch
// is of another lease. last_epoch is left as it was, for the same reason.
const IN_FLIGHT = `SELECT intent_id FROM submission_intents WHERE status = 'in_flight' ORDER BY intent_id FOR UPDATE`;

// Every other intent whose attempt is abandoned (a call cancelled in flight, left by the preparing pass) gets only
// last_modified_at bumped, before its attempt is abandoned, so the scan (rows modified since the horizon) moves it.
// The set is stable while the changer holds every lease: no attempt starts or completes.
const BUMP_ABANDONED = `UPDATE submission_intents AS i
  JOIN (SELECT DISTINCT intent_id FROM submission_attempts WHERE outcome = 'started') AS s ON s.intent_id = i.intent_id
   SET i.last_modified_at = ${NEXT_MODIFIED('i.last_modified_at')}
 WHERE i.status <> 'in_flight'`;

const ABANDON = `UPDATE submission_attempts SET outcome = 'abandoned', finished_at = ${NOW},
  error = CONCAT('abandoned: the partition count changed (', ?, ' to ', ?, ') while the attempt was in flight; it may have been sent')
 WHERE outcome = 'started'`;

const RESCHEDULE = `
UPDATE submission_intents AS i
   SET i.status = CASE WHEN ${BUDGET.exhausted('i')} THEN 'failed' ELSE 'scheduled' END,
       i.next_attempt_at = ${NOW}, i.last_modified_at = ${NEXT_MODIFIED('i.last_modified_at')},
       i.last_error = CONCAT('attempt ', i.attempt_count, ' abandoned by a change of the partition count; it may have been sent',
                             CASE WHEN ${BUDGET.exhausted('i')} THEN '; attempts exhausted' ELSE '' END)
 WHERE i.intent_id IN (?) AND i.status = 'in_flight'`;

// The row exists: requestChange inserted it (if missing) in the transaction that recorded the change. The next
// layout generation with the new count.
const SET_COUNT = `UPDATE submission_manager_partition_count SET partition_count = ?, recorded_at = ${NOW}, recorded_by = ?,
  layout_generation = layout_generation + 1 WHERE id = 1`;

const MOVES = `(SELECT * FROM JSON_TABLE(?, '$[*]' COLUMNS (intent_id ${ID} PATH '$.id', partition_no INT PATH '$.p')) AS jt)`;

// Only rows not yet in their target partition (a retried batch finds them moved: nothing picked, nothing counted twice).
const MOVE_PICK = `SELECT i.intent_id FROM submission_intents AS i JOIN ${MOVES} AS m ON m.intent_id = i.intent_id
 WHERE i.intent_id IN (?) AND i.partition_no <> m.partition_no ORDER BY i.intent_id FOR UPDATE`;

// last_modified_at untouched (the port: every partition's next leader rebuilds).
const MOVE = `UPDATE submission_intents AS i JOIN ${MOVES} AS m ON m.intent_id = i.intent_id
   SET i.partition_no = m.partition_no WHERE i.intent_id IN (?)`;

/** A cursor column moved to the `?` value only forward (a NULL leaves it). Three `?`: the value, thrice. */
const forward = (col: string) => `CASE WHEN ? IS NULL OR (${col} IS NOT NULL AND ${col} >= ?) THEN ${col} ELSE ? END`;

// The cursors only move forward (each pass leaves the other's: NULL); scan_done_at is set once; rows_moved is written
// with its release_ copy (m014's guard).
const PROGRESS = `UPDATE submission_manager_partition_changes
   SET rows_moved = rows_moved + ?, release_rows_moved = release_rows_moved + ?, scan_cursor = ${forward('scan_cursor')},
       scan_done_at = CASE WHEN ? THEN COALESCE(scan_done_at, ${NOW}) ELSE scan_done_at END,
       catch_up_cursor = ${forward('catch_up_cursor')}
 WHERE change_id = ?`;

type Step = { value: PartitionChange; rowsWritten: number };

async function lockChangeIfAny(tx: MyQueryable, changeId: string): Promise<PartitionChange | null> {
  const row = (await tx.query<PartitionChangeDbRow>(`${CHANGE} FOR UPDATE`, [changeId])).rows[0];
  return row ? toPartitionChange(row) : null;
}

/** The change row locked FOR UPDATE; an id no one requested is a caller's bug. */
async function lockChange(tx: MyQueryable, changeId: string): Promise<PartitionChange> {
  const c = await lockChangeIfAny(tx, changeId);
  if (!c) throw new Error(`no partition change ${changeId}`);
  return c;
}

const readChange = async (tx: MyQueryable, changeId: string) => toPartitionChange((await tx.query<PartitionChangeDbRow>(CHANGE, [changeId])).rows[0]!);

/** changer and claimedAt set (a retry: the same changer, claimedAt moves on). Completed: unchanged. */
export function claimChange(db: MyDatabase, fence: LeaseToken[], changeId: string): Promise<Fenced<PartitionChange>> {
  return fencedTransactionAll(db, fence, 'partition_claim', async (tx): Promise<Step> => {
    const c = await lockChange(tx, changeId);
    if (!isChangeActive(c)) return { value: c, rowsWritten: 0 };
    // release_changer beside changer: the guard (m012) refuses a claim that sets changer alone, an earlier release's.
    const changer = fence[0]!.holderId.slice(0, 128);
    await tx.query(`UPDATE submission_manager_partition_changes SET changer = ?, release_changer = ?, claimed_at = ${NOW} WHERE change_id = ?`,
      [changer, changer, changeId]);
    return { value: await readChange(tx, changeId), rowsWritten: 1 };
  });
}

/** pending → reassigning: the in-flight recovery, the count, switchedAt. Past pending (a retry): unchanged. */
export function switchCount(db: MyDatabase, fence: LeaseToken[], changeId: string): Promise<Fenced<PartitionChange>> {
  return fencedTransactionAll(db, fence, 'partition_switch', async (tx): Promise<Step> => {
    const c = await lockChange(tx, changeId);
    if (c.state !== 'pending') return { value: c, rowsWritten: 0 };
    requireWholeFence(fence, c);
    // The count row first: its update waits for inserts in flight (they hold a shared lock on it to their commit)
    // before this transaction locks any intent, and inserts begun meanwhile wait for the commit and read the new count.
    await tx.query(SET_COUNT, [c.toCount, fence[0]!.holderId.slice(0, 128)]);
    const ids = (await tx.query<{ intent_id: string }>(IN_FLIGHT)).rows.map((r) => r.intent_id);
    const bumped = (await tx.query(BUMP_ABANDONED)).affectedRows; // the audit's count only
    const abandoned = (await tx.query(ABANDON, [c.fromCount, c.toCount])).affectedRows; // the audit's count only
    if (ids.length > 0) await tx.query(RESCHEDULE, [ids]);
    // switched_by: the guard (m012) refuses a switch that sets switched_at alone, an earlier release's.
    await tx.query(`UPDATE submission_manager_partition_changes SET state = 'reassigning', switched_at = ${NOW}, switched_by = ? WHERE change_id = ?`,
      [fence[0]!.holderId.slice(0, 128), changeId]);
    return { value: await readChange(tx, changeId), rowsWritten: bumped + abandoned + ids.length + 2 };
  });
}

const moveBatch = (moves: PartitionMove[]) => {
  const ids = moves.map((m) => idParam(m.intentId));
  return { ids, json: JSON.stringify(moves.map((m, k) => ({ id: ids[k], p: m.partition }))) };
};

/** The preparing pass's batch (partitionReassign.ts), unfenced: only settled intents with no attempt started move,
 *  so no lease is needed; the change row locked FOR UPDATE serialises two changers and fixes the range (it follows
 *  the recorded cursor). Not preparing: unchanged, nothing written; no such change: null. */
export function prepareBatch(db: MyDatabase, changeId: string, batch: PrepareBatch): Promise<PartitionChange | null> {
  return db.transaction(async (tx) => {
    const c = await lockChangeIfAny(tx, changeId);
    if (!c || c.state !== 'preparing') return c;
    await prepareRange(tx, c, batch);
    return readChange(tx, changeId);
  });
}

/** One batch of moves and the progress. Not reassigning: unchanged. rowsMoved counts only the rows this run moved. */
export function moveIntents(db: MyDatabase, fence: LeaseToken[], changeId: string, moves: PartitionMove[], progress: ReassignProgress):
Promise<Fenced<PartitionChange>> {
  const { ids, json: batch } = moveBatch(moves);
  const cursor = progress.scanCursor === null ? null : idParam(progress.scanCursor);
  const catchUp = progress.catchUpCursor === null || progress.catchUpCursor === undefined ? null : idParam(progress.catchUpCursor);
  return fencedTransactionAll(db, fence, 'partition_move', async (tx): Promise<Step> => {
    const c = await lockChange(tx, changeId);
    if (c.state !== 'reassigning') return { value: c, rowsWritten: 0 };
    requireWholeFence(fence, c);
    requireMovesInRange(c, moves);
    const picked = ids.length === 0 ? [] : (await tx.query<{ intent_id: string }>(MOVE_PICK, [batch, ids])).rows.map((r) => r.intent_id);
    if (picked.length > 0) await tx.query(MOVE, [batch, picked]);
    await tx.query(PROGRESS, [picked.length, picked.length, cursor, cursor, cursor, progress.scanDone, catchUp, catchUp, catchUp, changeId]);
    return { value: await readChange(tx, changeId), rowsWritten: picked.length + 1 };
  });
}

class Lost extends Error {}

const completed = async (db: MyQueryable, changeId: string): Promise<PartitionChange | null> => {
  const row = (await db.query<PartitionChangeDbRow>(`${CHANGE} AND state = 'completed'`, [changeId])).rows[0];
  return row ? toPartitionChange(row) : null;
};

/**
 * reassigning → completed and every lease of the fence released, one transaction. The lease rows are locked FOR
 * UPDATE in name order (held by the token, not expired, as the lease store's release reads them: that lock is the
 * fence, and no shared lock is upgraded), the audit rows written while they are held, then each expired in place
 * with its `released` event. Already completed (a retry after a lost reply; its leases are released): returned as
 * is, without the fence — also when the fence is lost because the original of this retry completed meanwhile.
 */
export async function completeChange(db: MyDatabase, fence: LeaseToken[], changeId: string): Promise<Fenced<PartitionChange>> {
  const done = await completed(db, changeId);
  if (done) return { kind: 'ok', value: done };
  if (fence.length === 0) throw new RangeError('partition_complete: a fence needs at least one lease token');
  const ordered = [...fence].sort((a, b) => (a.leaseName < b.leaseName ? -1 : a.leaseName > b.leaseName ? 1 : 0));
  try {
    const value = await db.transaction(async (tx) => {
      const held: Locked[] = [];
      for (const t of ordered) held.push((await lockHeld(tx, t)) ?? raise(new Lost())); // rolls back: nothing written
      const c = await lockChange(tx, changeId);
      if (c.state !== 'reassigning') return c;
      requireWholeFence(fence, c);
      await tx.query(`UPDATE submission_manager_partition_changes SET state = 'completed', completed_at = ${NOW} WHERE change_id = ?`, [changeId]);
      for (const t of ordered) await writeAudit(tx, t, 'partition_complete', 1);
      // A drain asked while the change ran is met by it (every lease is released below): its pending rows completed.
      for (const t of ordered) await tx.query(COMPLETE_HANDOVERS, token4(t));
      for (const [k, t] of ordered.entries()) await expireHeld(tx, t, held[k]!);
      return readChange(tx, changeId);
    });
    return { kind: 'ok', value };
  } catch (e) {
    if (!(e instanceof Lost)) throw e;
    const after = await completed(db, changeId);
    return after ? { kind: 'ok', value: after } : { kind: 'leaseLost' };
  }
}

const COMPLETE_HANDOVERS = `UPDATE submission_manager_handover_requests
    SET status = 'completed', completed_at = ${NOW}, completed_epoch = ?, completed_by = ? WHERE lease_name = ? AND status = 'pending'`;
const token4 = (t: LeaseToken) => [t.leaseEpoch, t.holderId, t.leaseName];

const raise = (e: Error): never => {
  throw e;
};
