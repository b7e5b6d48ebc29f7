// MySQL / MariaDB PartitionStore: the recorded partition count and its changes (issue 26). The count insert leaves an
// existing row alone (ON DUPLICATE KEY UPDATE id = id: a concurrent first start waits on the key, then changes
// nothing; never a duplicate-key error); rows are read back as recorded (affectedRows is never an outcome here).
// Requests serialize on the count row (FOR UPDATE); the changer's fenced writes are in partitionChanges.ts.
import { isChangeActive } from '../partitionPorts.js';
import type {
  CancelChangeOutcome,
  PartitionChange, PartitionCount, PartitionLayout, PartitionMove, PartitionStore, PrepareBatch, ReassignProgress, ReassignRow, ReassignScope,
  RequestChangeOutcome,
} from '../partitionPorts.js';
import type { Fenced, LeaseToken } from '../ports.js';
import type { MyDatabase } from './db.js';
import { claimChange, completeChange, moveIntents, prepareBatch, switchCount } from './partitionChanges.js';
import { listForReassign } from './partitionReassign.js';
import { cancelChange, clearStepFailures, recordStepFailure } from './partitionCancel.js';
import { PARTITION_CHANGE_COLS, decideChangeRequest, requestingRelease, toPartitionChange as toChange, type PartitionChangeDbRow as ChangeDbRow } from '../partitionMapping.js';
import { NOW, idParam } from './rows.js';

interface CountDbRow { partition_count: number; recorded_at: Date; recorded_by: string }

const RECORD = `INSERT INTO submission_manager_partition_count (id, partition_count, recorded_at, recorded_by)
VALUES (1, ?, ${NOW}, ?) ON DUPLICATE KEY UPDATE id = id`;

const READ = 'SELECT partition_count, recorded_at, recorded_by FROM submission_manager_partition_count WHERE id = 1';

// One round trip: database now, the count row (absent: count 1 by 'none') and the active change (ux_partition_changes_active).
const LAYOUT = `SELECT n.db_now, c.partition_count, c.recorded_at, c.recorded_by, c.layout_generation, ch.*
  FROM (SELECT ${NOW} AS db_now) AS n
  LEFT JOIN submission_manager_partition_count AS c ON c.id = 1
  LEFT JOIN submission_manager_partition_changes AS ch ON ch.active = 1`;

// The active change (ux_partition_changes_active) and a change recorded under this id (a retry's), by index each.
const ACTIVE_OR_ID = `SELECT ${PARTITION_CHANGE_COLS} FROM submission_manager_partition_changes WHERE active = 1
  UNION SELECT ${PARTITION_CHANGE_COLS} FROM submission_manager_partition_changes WHERE change_id = ?`;
const BY_ID = `SELECT ${PARTITION_CHANGE_COLS} FROM submission_manager_partition_changes WHERE change_id = ?`;

const INSERT_CHANGE = `INSERT INTO submission_manager_partition_changes (change_id, from_count, to_count, state, requested_at, requested_by,
  requested_release, release_rows_moved) VALUES (?, ?, ?, 'preparing', ${NOW}, ?, ?, 0)`;

const toCount = (r: CountDbRow): PartitionCount =>
  ({ count: Number(r.partition_count), recordedAt: r.recorded_at, recordedBy: r.recorded_by });

export class MysqlPartitionStore implements PartitionStore {
  constructor(private readonly db: MyDatabase) {}

  async recordPartitionCount(count: number, recordedBy: string): Promise<PartitionCount> {
    await this.db.query(RECORD, [count, recordedBy.slice(0, 128)]);
    const row = (await this.db.query<CountDbRow>(READ)).rows[0];
    if (!row) throw new Error('submission_manager_partition_count: no row after the insert');
    return toCount(row);
  }

  async readLayout(): Promise<PartitionLayout> {
    const r = (await this.db.query<Partial<CountDbRow> & ChangeDbRow & { db_now: Date; layout_generation?: number | string | null }>(LAYOUT)).rows[0]!;
    return {
      count: r.partition_count === null || r.partition_count === undefined ? 1 : Number(r.partition_count),
      recordedAt: r.recorded_at ?? r.db_now,
      recordedBy: r.recorded_by ?? 'none',
      generation: Number(r.layout_generation ?? 0),
      active: r.change_id ? toChange(r) : null,
      dbNow: r.db_now,
    };
  }

  /** One transaction: the count row (inserted as 1 when missing) locked FOR UPDATE serializes requests, then the
   *  shared decision. Idempotent: a retry after a lost reply finds the change under its id (`existing`, also once
   *  completed). */
  requestChange(toCountN: number, requestedBy: string, changeId: string): Promise<RequestChangeOutcome> {
    const id = idParam(changeId);
    const by = requestedBy.slice(0, 128);
    return this.db.transaction(async (tx): Promise<RequestChangeOutcome> => {
      await tx.query(RECORD, [1, by]);
      const count = toCount((await tx.query<CountDbRow>(`${READ} FOR UPDATE`)).rows[0]!);
      const rows = (await tx.query<ChangeDbRow>(ACTIVE_OR_ID, [id])).rows.map(toChange);
      const decided = decideChangeRequest(toCountN, count, rows.find(isChangeActive) ?? null,
        rows.find((c) => c.changeId === id) ?? null);
      if (decided.kind !== 'create') return decided;
      await tx.query(INSERT_CHANGE, [id, count.count, toCountN, by, requestingRelease()]);
      return { kind: 'created', change: toChange((await tx.query<ChangeDbRow>(BY_ID, [id])).rows[0]!) };
    });
  }

  async listChanges(limit: number): Promise<PartitionChange[]> {
    const r = await this.db.query<ChangeDbRow>(
      `SELECT ${PARTITION_CHANGE_COLS} FROM submission_manager_partition_changes ORDER BY requested_at DESC, change_id DESC LIMIT ?`, [limit]);
    return r.rows.map(toChange);
  }

  async getChange(changeId: string): Promise<PartitionChange | null> {
    const row = (await this.db.query<ChangeDbRow>(BY_ID, [idParam(changeId)])).rows[0];
    return row ? toChange(row) : null;
  }

  claimChange(fence: LeaseToken[], changeId: string): Promise<Fenced<PartitionChange>> {
    return claimChange(this.db, fence, idParam(changeId));
  }

  /** Inserts are always excluded (intake reads the count row with a shared lock the switch's update waits for). */
  switchCount(fence: LeaseToken[], changeId: string): Promise<Fenced<PartitionChange>> {
    return switchCount(this.db, fence, idParam(changeId));
  }

  /** Bounded by the rows it examines (partitionReassign.ts says how, per scope). */
  listForReassign(q: { after: string | null; limit: number; modifiedSince: Date | null; scope: ReassignScope }): Promise<ReassignRow[]> {
    return listForReassign(this.db, { ...q, after: q.after === null ? null : idParam(q.after) });
  }

  prepareBatch(changeId: string, batch: PrepareBatch): Promise<PartitionChange | null> {
    return prepareBatch(this.db, idParam(changeId), batch);
  }

  moveIntents(fence: LeaseToken[], changeId: string, moves: PartitionMove[], progress: ReassignProgress): Promise<Fenced<PartitionChange>> {
    return moveIntents(this.db, fence, idParam(changeId), moves, progress);
  }

  completeChange(fence: LeaseToken[], changeId: string): Promise<Fenced<PartitionChange>> {
    return completeChange(this.db, fence, idParam(changeId));
  }

  /** Idempotent: a cancelled change is answered as it is; a switched one is refused (it rolls forward). */
  cancelChange(changeId: string, cancelledBy: string): Promise<CancelChangeOutcome> {
    return cancelChange(this.db, idParam(changeId), cancelledBy);
  }

  recordStepFailure(changeId: string, error: string): Promise<PartitionChange | null> {
    return recordStepFailure(this.db, idParam(changeId), error);
  }

  clearStepFailures(changeId: string): Promise<void> {
    return clearStepFailures(this.db, idParam(changeId));
  }
}
