// PostgreSQL: the partition changer's writes (issue 26; port: ../partitionPorts.ts). The preparing pass runs
// unfenced (it moves settled intents with no attempt started only; its batch is in partitionReassign.ts); every other step runs in one transaction fenced by every lease of `fence` (fence.ts fencedByAll: all rows FOR SHARE, or FOR NO KEY UPDATE where
// the transaction releases them), locks the change row FOR UPDATE, and does nothing unless the change is in the
// state the step starts from: a retry after a lost reply, or by the next changer, finds the step done and returns
// the change as it is.
import type { InsertExclusion, PartitionChange, PartitionMove, PrepareBatch, ReassignProgress } from '../partitionPorts.js';
import type { Fenced, LeaseToken } from '../ports.js';
import { PARTITION_CHANGE_COLS, requireMovesInRange, requireWholeFence, toPartitionChange, type PartitionChangeDbRow } from '../partitionMapping.js';
import type { PgDatabase, PgQueryable } from './db.js';
import { fencedByAll, tokenArrays } from './fence.js';
import { prepareBatch } from './partitionReassign.js';
import { BUDGET, nextModified } from './rows.js';
import { SWITCH_LOCK_TIMEOUT_MS } from '../../limits.js';

const LOCK_CHANGE = `SELECT ${PARTITION_CHANGE_COLS} FROM submission_manager_partition_changes WHERE change_id = $1 FOR UPDATE`;

// release_changer beside changer: the guard (m018) refuses a claim that sets changer alone, an earlier release's.
const CLAIM = `UPDATE submission_manager_partition_changes SET changer = $2, release_changer = $2, claimed_at = clock_timestamp()
  WHERE change_id = $1 AND state <> 'completed' RETURNING ${PARTITION_CHANGE_COLS}`;

// Every attempt still 'started' is abandoned and every in_flight intent scheduled again, due now (failed when its
// budget is spent, as orphan recovery does: an abandoned attempt counts as sent). No executor can hold a partition
// now (the changer holds every lease), and the next leader of an intent's NEW partition could not recover it: its
// epoch is of another lease, not comparable with the attempt's. last_epoch is left as it was, for the same reason.
// Every other intent whose attempt is abandoned (a call cancelled in flight, left by the preparing pass) gets only
// last_modified_at bumped, so the scan (rows modified since the horizon) moves it; the two updates' rows are disjoint
// by status, so no row is updated twice in the statement.
const RECOVER_IN_FLIGHT = `/* sm:partition_recover */
WITH now AS MATERIALIZED (SELECT clock_timestamp() AS t),
abandoned AS (
  UPDATE submission_attempts a
     SET outcome = 'abandoned', finished_at = now.t,
         error = 'abandoned: the partition count changed (' || $1::int || ' to ' || $2::int || ') while the attempt was in flight; it may have been sent'
    FROM now
   WHERE a.outcome = 'started'
  RETURNING a.intent_id
),
recovered AS (
  UPDATE submission_intents i
     SET status = CASE WHEN ${BUDGET.exhausted('i')} THEN 'failed' ELSE 'scheduled' END,
         next_attempt_at = now.t, last_modified_at = ${nextModified('i.last_modified_at', 'now.t')},
         last_error = 'attempt ' || i.attempt_count || ' abandoned by a change of the partition count; it may have been sent' ||
                      CASE WHEN ${BUDGET.exhausted('i')} THEN '; attempts exhausted' ELSE '' END
    FROM now
   WHERE i.status = 'in_flight'
  RETURNING i.intent_id
),
bumped AS (
  UPDATE submission_intents i SET last_modified_at = ${nextModified('i.last_modified_at', 'now.t')}
    FROM now
   WHERE i.intent_id IN (SELECT intent_id FROM abandoned) AND i.status <> 'in_flight'
  RETURNING i.intent_id
)
SELECT (SELECT count(*) FROM abandoned)::int + (SELECT count(*) FROM recovered)::int + (SELECT count(*) FROM bumped)::int AS written`;

// The count row takes the new count and the next layout generation (a row inserted here: 1, one above the default;
// only a switch raises it). switched_by: the guard (m018) refuses a switch that sets switched_at alone.
const SWITCH = `/* sm:partition_switch */
WITH now AS MATERIALIZED (SELECT clock_timestamp() AS t),
recorded AS (
  INSERT INTO submission_manager_partition_count (id, partition_count, recorded_at, recorded_by, layout_generation)
  SELECT 1, $2, now.t, $3, 1 FROM now
  ON CONFLICT (id) DO UPDATE SET partition_count = EXCLUDED.partition_count, recorded_at = EXCLUDED.recorded_at,
    recorded_by = EXCLUDED.recorded_by, layout_generation = submission_manager_partition_count.layout_generation + 1
)
UPDATE submission_manager_partition_changes SET state = 'reassigning', switched_at = now.t, switched_by = $3
  FROM now WHERE change_id = $1 RETURNING ${PARTITION_CHANGE_COLS}`;

// The moves ($2 intent ids, $3 partitions) of the rows not yet in their target partition: a retried batch writes and
// counts nothing. last_modified_at untouched (the port: every partition's next leader rebuilds). The cursors only move
// forward (GREATEST ignores a NULL: each pass leaves the other's), scan_done_at is set once; rows_moved is written with
// its release_ copy (m020's guard).
const MOVE = `/* sm:partition_move */
WITH moved AS (
  UPDATE submission_intents i SET partition_no = m.partition_no
    FROM unnest($2::uuid[], $3::int[]) AS m(intent_id, partition_no)
   WHERE i.intent_id = m.intent_id AND i.partition_no <> m.partition_no
  RETURNING 1
)
UPDATE submission_manager_partition_changes
   SET rows_moved = rows_moved + (SELECT count(*) FROM moved), release_rows_moved = release_rows_moved + (SELECT count(*) FROM moved),
       scan_cursor = GREATEST(scan_cursor, $4::uuid),
       scan_done_at = CASE WHEN $5::boolean THEN COALESCE(scan_done_at, clock_timestamp()) ELSE scan_done_at END,
       catch_up_cursor = GREATEST(catch_up_cursor, $6::uuid)
 WHERE change_id = $1
RETURNING ${PARTITION_CHANGE_COLS}, (SELECT count(*) FROM moved)::int AS moved`;

const COMPLETE = `UPDATE submission_manager_partition_changes SET state = 'completed', completed_at = clock_timestamp()
  WHERE change_id = $1 RETURNING ${PARTITION_CHANGE_COLS}`;

// A drain asked of the partitions while the change ran is met by it: every lease went to the changer and is released
// at its completion, so whoever leads next does so after the request. Its pending handover rows are completed here,
// by the changer's token of each lease, instead of making the next leaders hand over again.
const COMPLETE_HANDOVERS = `/* sm:partition_handovers */
UPDATE submission_manager_handover_requests h
   SET status = 'completed', completed_at = clock_timestamp(), completed_epoch = f.lease_epoch, completed_by = f.holder_id
  FROM unnest($1::varchar[], $2::varchar[], $3::bigint[]) AS f(lease_name, holder_id, lease_epoch)
 WHERE h.lease_name = f.lease_name AND h.status = 'pending'`;

// Each lease of the fence released as PgLeaseStore.release does: expired in place, conditional on holder and epoch,
// a 'released' event each (numbered by the shared sequence while the row is locked).
const RELEASE_ALL = `/* sm:partition_release */
WITH now AS MATERIALIZED (SELECT clock_timestamp() AS t),
rel AS (
  UPDATE submission_manager_leases l SET expires_at = now.t, renewed_at = now.t
    FROM now, unnest($1::varchar[], $2::varchar[], $3::bigint[]) AS f(lease_name, holder_id, lease_epoch)
   WHERE l.lease_name = f.lease_name AND l.holder_id = f.holder_id AND l.lease_epoch = f.lease_epoch AND l.expires_at > now.t
  RETURNING l.lease_name, l.lease_epoch, l.holder_id, now.t AS at
),
ev AS (
  INSERT INTO submission_manager_lease_events (lease_name, lease_epoch, holder_id, event, at)
  SELECT lease_name, lease_epoch, holder_id, 'released', at FROM rel
)
SELECT count(*)::int AS released FROM rel`;

type Step = { value: PartitionChange; rowsWritten: number };

async function lockChangeIfAny(tx: PgQueryable, changeId: string): Promise<PartitionChange | null> {
  const row = (await tx.query<PartitionChangeDbRow>(LOCK_CHANGE, [changeId])).rows[0];
  return row ? toPartitionChange(row) : null;
}

async function lockChange(tx: PgQueryable, changeId: string): Promise<PartitionChange> {
  const c = await lockChangeIfAny(tx, changeId);
  if (!c) throw new Error(`no partition change ${changeId}`);
  return c;
}

const one = (rows: PartitionChangeDbRow[]) => toPartitionChange(rows[0]!);

/** The changer's fenced writes; `db` must allow transactions (a pool or PGlite). */
export class PgPartitionChanges {
  constructor(private readonly db: PgDatabase) {}

  claim(fence: LeaseToken[], changeId: string): Promise<Fenced<PartitionChange>> {
    return fencedByAll(this.db, fence, 'partition_claim', async (tx): Promise<Step> => {
      const r = await tx.query<PartitionChangeDbRow>(CLAIM, [changeId, fence[0]!.holderId.slice(0, 128)]);
      if (r.rows[0]) return { value: one(r.rows), rowsWritten: 1 };
      return { value: await lockChange(tx, changeId), rowsWritten: 0 }; // completed (or unknown: throws)
    });
  }

  switchCount(fence: LeaseToken[], changeId: string, inserts: InsertExclusion = 'excluded'): Promise<Fenced<PartitionChange>> {
    return fencedByAll(this.db, fence, 'partition_switch', async (tx): Promise<Step> => {
      const c = await lockChange(tx, changeId);
      if (c.state !== 'pending') return { value: c, rowsWritten: 0 };
      requireWholeFence(fence, c);
      if (inserts === 'excluded') {
        // Waits for every insert in flight (they read the old count) to commit, and makes inserts begun meanwhile
        // wait for this commit and read the new count (a READ COMMITTED statement's snapshot follows its locks): no
        // insert commits with the old count after the switch. Intake waits for this transaction and the writes in
        // flight, at most the lock timeout (longer than deadlock_timeout, so a plain autovacuum is cancelled for it).
        await tx.query(`SET LOCAL lock_timeout = ${SWITCH_LOCK_TIMEOUT_MS}`);
        await tx.query('LOCK TABLE submission_intents IN SHARE MODE');
        await tx.query('SET LOCAL lock_timeout = DEFAULT');
      }
      const recovered = (await tx.query<{ written: number }>(RECOVER_IN_FLIGHT, [c.fromCount, c.toCount])).rows[0]!.written;
      const r = await tx.query<PartitionChangeDbRow>(SWITCH, [changeId, c.toCount, fence[0]!.holderId.slice(0, 128)]);
      return { value: one(r.rows), rowsWritten: recovered + 2 };
    });
  }

  moveIntents(fence: LeaseToken[], changeId: string, moves: PartitionMove[], progress: ReassignProgress): Promise<Fenced<PartitionChange>> {
    return fencedByAll(this.db, fence, 'partition_move', async (tx): Promise<Step> => {
      const c = await lockChange(tx, changeId);
      if (c.state !== 'reassigning') return { value: c, rowsWritten: 0 };
      requireWholeFence(fence, c);
      requireMovesInRange(c, moves);
      const r = await tx.query<PartitionChangeDbRow & { moved: number }>(MOVE, [changeId, moves.map((m) => m.intentId),
        moves.map((m) => m.partition), progress.scanCursor, progress.scanDone, progress.catchUpCursor ?? null]);
      return { value: one(r.rows), rowsWritten: r.rows[0]!.moved + 1 };
    });
  }

  /** Unfenced: only settled intents with no attempt started move, so no lease is needed; the change row locked FOR
   *  UPDATE serialises two changers' batches (and fixes the range: it follows the recorded cursor). Not preparing:
   *  returned as it is, nothing written. */
  prepareBatch(changeId: string, batch: PrepareBatch): Promise<PartitionChange | null> {
    return this.db.transaction(async (tx) => {
      const c = await lockChangeIfAny(tx, changeId);
      if (!c || c.state !== 'preparing') return c;
      return prepareBatch(tx, c, batch);
    });
  }

  async complete(fence: LeaseToken[], changeId: string): Promise<Fenced<PartitionChange>> {
    const done = await this.completed(changeId);
    if (done) return { kind: 'ok', value: done }; // a retry after the commit: no fence needed (its leases are released)
    const out = await fencedByAll(this.db, fence, 'partition_complete', async (tx): Promise<Step> => {
      const c = await lockChange(tx, changeId);
      if (c.state !== 'reassigning') return { value: c, rowsWritten: 0 };
      requireWholeFence(fence, c);
      const r = await tx.query<PartitionChangeDbRow>(COMPLETE, [changeId]);
      await tx.query(COMPLETE_HANDOVERS, tokenArrays(fence));
      await tx.query(RELEASE_ALL, tokenArrays(fence));
      return { value: one(r.rows), rowsWritten: 1 };
    }, 'NO KEY UPDATE');
    if (out.kind === 'ok') return out;
    // Lost the fence because a concurrent copy of this call (the original of a retry) completed it meanwhile: ok.
    const after = await this.completed(changeId);
    return after ? { kind: 'ok', value: after } : out;
  }

  private async completed(changeId: string): Promise<PartitionChange | null> {
    const r = await this.db.query<PartitionChangeDbRow>(
      `SELECT ${PARTITION_CHANGE_COLS} FROM submission_manager_partition_changes WHERE change_id = $1 AND state = 'completed'`, [changeId]);
    return r.rows[0] ? one(r.rows) : null;
  }
}
