// PostgreSQL PartitionStore: the recorded partition count and its changes (issues 25, 26; port: ../partitionPorts.ts).
// The changer's fenced writes are in partitionChangeStore.ts. recordPartitionCount is two statements, not one: a
// SELECT in the same statement as an INSERT … ON CONFLICT DO NOTHING reads the statement's snapshot, which misses a
// row that a concurrent first start committed while we waited on its key; a second statement (READ COMMITTED) sees it.
import type {
  CancelChangeOutcome, InsertExclusion, PartitionChange, PartitionCount, PartitionLayout, PartitionMove, PartitionStore, PrepareBatch, ReassignProgress, ReassignRow,
  ReassignScope, RequestChangeOutcome,
} from '../partitionPorts.js';
import type { Fenced, LeaseToken } from '../ports.js';
import { isChangeActive } from '../partitionPorts.js';
import { PARTITION_CHANGE_COLS, decideChangeRequest, requestingRelease, toPartitionChange, type PartitionChangeDbRow } from '../partitionMapping.js';
import type { PgDatabase } from './db.js';
import { PgPartitionChanges } from './partitionChangeStore.js';
import { listForReassign } from './partitionReassign.js';
import { cancelChange, clearStepFailures, recordStepFailure } from './partitionCancel.js';

interface CountDbRow { partition_count: number; recorded_at: Date; recorded_by: string }

const RECORD = `
INSERT INTO submission_manager_partition_count (id, partition_count, recorded_at, recorded_by)
VALUES (1, $1, clock_timestamp(), $2)
ON CONFLICT (id) DO NOTHING
RETURNING partition_count, recorded_at, recorded_by`;

const READ = 'SELECT partition_count, recorded_at, recorded_by FROM submission_manager_partition_count WHERE id = 1';

// The count row (if any) and the active change (if any; the unique partial index admits one) beside database time.
const LAYOUT = `
SELECT clock_timestamp() AS db_now, c.partition_count, c.recorded_at, c.recorded_by, c.layout_generation, ch.*
  FROM (SELECT 1) one
  LEFT JOIN submission_manager_partition_count c ON c.id = 1
  LEFT JOIN submission_manager_partition_changes ch ON ch.state <> 'completed'`;

// requestChange, one transaction: the count row (recorded as 1 first if no process recorded one yet) locked FOR
// UPDATE serialises requests; under it, the active change and a change already recorded under this id are read.
const REQUEST_ENSURE_COUNT = `
INSERT INTO submission_manager_partition_count (id, partition_count, recorded_at, recorded_by)
VALUES (1, 1, clock_timestamp(), $1) ON CONFLICT (id) DO NOTHING`;
const REQUEST_LOCK_COUNT = `${READ} FOR UPDATE`;
const REQUEST_READ_CHANGES = `SELECT ${PARTITION_CHANGE_COLS} FROM submission_manager_partition_changes
  WHERE state <> 'completed' OR change_id = $1`;
const REQUEST_INSERT = `
INSERT INTO submission_manager_partition_changes (change_id, from_count, to_count, state, requested_at, requested_by, requested_release,
  release_rows_moved)
VALUES ($1, $2, $3, 'preparing', clock_timestamp(), $4, $5, 0)
RETURNING ${PARTITION_CHANGE_COLS}`;

const countOf = (r: CountDbRow): PartitionCount => ({ count: Number(r.partition_count), recordedAt: r.recorded_at, recordedBy: r.recorded_by });

type LayoutDbRow = { db_now: Date; layout_generation: number | string | null } & { [K in keyof CountDbRow]: CountDbRow[K] | null } & { [K in keyof PartitionChangeDbRow]: PartitionChangeDbRow[K] | null };

export class PgPartitionStore implements PartitionStore {
  private readonly changes: PgPartitionChanges;

  constructor(private readonly db: PgDatabase) {
    this.changes = new PgPartitionChanges(db);
  }

  async recordPartitionCount(count: number, recordedBy: string): Promise<PartitionCount> {
    const made = (await this.db.query<CountDbRow>(RECORD, [count, recordedBy.slice(0, 128)])).rows[0];
    if (made) return countOf(made);
    const row = (await this.db.query<CountDbRow>(READ)).rows[0];
    if (!row) throw new Error('submission_manager_partition_count: the insert met a row that is not there');
    return countOf(row);
  }

  async readLayout(): Promise<PartitionLayout> {
    const r = (await this.db.query<LayoutDbRow>(LAYOUT)).rows[0]!;
    const counted = r.partition_count !== null;
    return {
      count: counted ? Number(r.partition_count) : 1,
      recordedAt: r.recorded_at ?? r.db_now,
      recordedBy: r.recorded_by ?? 'none',
      generation: Number(r.layout_generation ?? 0),
      active: r.change_id !== null ? toPartitionChange(r as PartitionChangeDbRow) : null,
      dbNow: r.db_now,
    };
  }

  /** Idempotent: a retry with the same changeId finds that change and answers `existing` (also once completed). */
  requestChange(toCount: number, requestedBy: string, changeId: string): Promise<RequestChangeOutcome> {
    const by = requestedBy.slice(0, 128);
    return this.db.transaction(async (tx) => {
      await tx.query(REQUEST_ENSURE_COUNT, [by]);
      const count = countOf((await tx.query<CountDbRow>(REQUEST_LOCK_COUNT)).rows[0]!);
      const rows = (await tx.query<PartitionChangeDbRow>(REQUEST_READ_CHANGES, [changeId])).rows.map(toPartitionChange);
      const sameId = rows.find((c) => c.changeId === changeId.toLowerCase()) ?? null;
      const decided = decideChangeRequest(toCount, count, rows.find(isChangeActive) ?? null, sameId);
      if (decided.kind !== 'create') return decided;
      const made = (await tx.query<PartitionChangeDbRow>(REQUEST_INSERT, [changeId, count.count, toCount, by, requestingRelease()])).rows[0]!;
      return { kind: 'created', change: toPartitionChange(made) };
    });
  }

  async listChanges(limit: number): Promise<PartitionChange[]> {
    const r = await this.db.query<PartitionChangeDbRow>(`SELECT ${PARTITION_CHANGE_COLS} FROM submission_manager_partition_changes
      ORDER BY requested_at DESC, change_id DESC LIMIT $1`, [limit]);
    return r.rows.map(toPartitionChange);
  }

  async getChange(changeId: string): Promise<PartitionChange | null> {
    const r = await this.db.query<PartitionChangeDbRow>(
      `SELECT ${PARTITION_CHANGE_COLS} FROM submission_manager_partition_changes WHERE change_id = $1`, [changeId]);
    return r.rows[0] ? toPartitionChange(r.rows[0]) : null;
  }

  /** Idempotent: claiming again sets the same changer (claimedAt moves on). */
  claimChange(fence: LeaseToken[], changeId: string): Promise<Fenced<PartitionChange>> {
    return this.changes.claim(fence, changeId);
  }

  /** Idempotent: only a pending change switches (the change row locked); a retry finds it reassigning. */
  switchCount(fence: LeaseToken[], changeId: string, inserts?: InsertExclusion): Promise<Fenced<PartitionChange>> {
    return this.changes.switchCount(fence, changeId, inserts);
  }

  /** Bounded by the rows it examines (partitionReassign.ts says how, per scope). */
  listForReassign(q: { after: string | null; limit: number; modifiedSince: Date | null; scope: ReassignScope }): Promise<ReassignRow[]> {
    return listForReassign(this.db, q);
  }

  /** Idempotent: the range follows the recorded cursor (the change row locked); a row already in its partition is
   *  neither written nor counted; once done the change is pending and a retry finds it so (unchanged). */
  prepareBatch(changeId: string, batch: PrepareBatch): Promise<PartitionChange | null> {
    return this.changes.prepareBatch(changeId, batch);
  }

  /** Idempotent: only rows not yet in their target partition are written and counted; the cursor never moves back. */
  moveIntents(fence: LeaseToken[], changeId: string, moves: PartitionMove[], progress: ReassignProgress): Promise<Fenced<PartitionChange>> {
    return this.changes.moveIntents(fence, changeId, moves, progress);
  }

  /** Idempotent: a completed change is returned as it is, without the fence (its leases are released). */
  completeChange(fence: LeaseToken[], changeId: string): Promise<Fenced<PartitionChange>> {
    return this.changes.complete(fence, changeId);
  }

  /** Idempotent: a cancelled change is answered as it is; a switched one is refused (it rolls forward). */
  cancelChange(changeId: string, cancelledBy: string): Promise<CancelChangeOutcome> {
    return cancelChange(this.db, changeId, cancelledBy);
  }

  recordStepFailure(changeId: string, error: string): Promise<PartitionChange | null> {
    return recordStepFailure(this.db, changeId, error);
  }

  clearStepFailures(changeId: string): Promise<void> {
    return clearStepFailures(this.db, changeId);
  }
}
