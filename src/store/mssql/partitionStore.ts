// SQL Server PartitionStore: the recorded partition count. The insert's NOT EXISTS probe takes UPDLOCK+HOLDLOCK on
// the key (as the lease acquire does), so of two first starts one inserts and the other waits, then finds its row;
// the row is read back as recorded in the same batch. Partition changes (issue 26): partitionChangeQueries.ts and
// partitionReassignQueries.ts.
import type {
  CancelChangeOutcome, PartitionChange, PartitionCount, PartitionLayout, PartitionMove, PartitionStore, PrepareBatch, ReassignProgress, ReassignRow, ReassignScope, RequestChangeOutcome,
} from '../partitionPorts.js';
import { StoreError, type Fenced, type LeaseToken } from '../ports.js';
import { decideCancel, toPartitionChange, type PartitionChangeDbRow } from '../partitionMapping.js';
import type { MssqlRunner, Row } from './db.js';
import { runFencedBatch } from './fence.js';
import { isUuidText, p, type SqlQuery } from './params.js';
import { partitionChangeQueries } from './partitionChangeQueries.js';
import { partitionReassignQueries } from './partitionReassignQueries.js';
import { partitionCancelQueries } from './partitionCancelQueries.js';

interface CountDbRow { partition_count: number; recorded_at: Date; recorded_by: string }

export const partitionQueries = {
  record(count: number, recordedBy: string): SqlQuery {
    return {
      text: `SET NOCOUNT ON;
INSERT INTO submission_manager_partition_count (id, partition_count, recorded_at, recorded_by)
SELECT 1, @count, SYSUTCDATETIME(), @recorded_by
 WHERE NOT EXISTS (SELECT 1 FROM submission_manager_partition_count WITH (UPDLOCK, HOLDLOCK) WHERE id = 1);
SELECT partition_count, recorded_at, recorded_by FROM submission_manager_partition_count WHERE id = 1;`,
      params: [p.int('count', count), p.varchar('recorded_by', 128, recordedBy.slice(0, 128))],
    };
  },
};

export class MssqlPartitionStore implements PartitionStore {
  constructor(private readonly db: MssqlRunner) {}

  async recordPartitionCount(count: number, recordedBy: string): Promise<PartitionCount> {
    const sets = await this.db.run<CountDbRow>(partitionQueries.record(count, recordedBy));
    const row = sets[sets.length - 1]?.[0];
    if (!row) throw new Error('submission_manager_partition_count: no row after the insert');
    return countOf(row);
  }

  async readLayout(): Promise<PartitionLayout> {
    const [rows = []] = await this.db.run<LayoutDbRow>(partitionChangeQueries.readLayout());
    const r = rows[0];
    if (!r) throw new Error('readLayout: no row');
    const counted = r.partition_count !== null;
    return {
      count: counted ? Number(r.partition_count) : 1,
      recordedAt: counted ? r.recorded_at! : r.db_now,
      recordedBy: counted ? r.recorded_by! : 'none',
      generation: Number(r.layout_generation ?? 0),
      active: r.change_id === null ? null : toPartitionChange(r as PartitionChangeDbRow),
      dbNow: r.db_now,
    };
  }

  async requestChange(toCount: number, requestedBy: string, changeId: string): Promise<RequestChangeOutcome> {
    const [head = [], changes = []] = await this.db.run<Row>(partitionChangeQueries.requestChange(toCount, requestedBy, changeId));
    const o = head[0] as (CountDbRow & { outcome: string }) | undefined;
    const change = changes[0] ? toPartitionChange(changes[0] as unknown as PartitionChangeDbRow) : null;
    if (o?.outcome === 'unchanged') return { kind: 'unchanged', count: countOf(o) };
    if (!change || (o?.outcome !== 'created' && o?.outcome !== 'existing' && o?.outcome !== 'conflict')) {
      throw new StoreError('fatal', `requestChange: unexpected answer ${JSON.stringify(o?.outcome)}`, undefined);
    }
    return o.outcome === 'conflict' ? { kind: 'conflict', active: change } : { kind: o.outcome, change };
  }

  async listChanges(limit: number): Promise<PartitionChange[]> {
    const [rows = []] = await this.db.run<PartitionChangeDbRow>(partitionChangeQueries.listChanges(limit));
    return rows.map(toPartitionChange);
  }

  async getChange(changeId: string): Promise<PartitionChange | null> {
    if (!isUuidText(changeId)) return null; // no such id (the column holds UUID text only)
    const [rows = []] = await this.db.run<PartitionChangeDbRow>(partitionChangeQueries.getChange(changeId));
    return rows[0] ? toPartitionChange(rows[0]) : null;
  }

  claimChange(fence: LeaseToken[], changeId: string): Promise<Fenced<PartitionChange>> {
    return this.fenced(fence, changeId, () => partitionChangeQueries.claimChange(fence, changeId));
  }

  /** Inserts are always excluded (intake reads the count row with a shared lock the switch's update waits for). */
  switchCount(fence: LeaseToken[], changeId: string): Promise<Fenced<PartitionChange>> {
    return this.fenced(fence, changeId, () => partitionChangeQueries.switchCount(fence, changeId));
  }

  async listForReassign(q: { after: string | null; limit: number; modifiedSince: Date | null; scope: ReassignScope }): Promise<ReassignRow[]> {
    const [rows = []] = await this.db.run<{ intent_id: string; partition_key: string | null; partition_no: number | string }>(
      partitionReassignQueries.listForReassign(q));
    return rows.map((r) => ({ intentId: r.intent_id, partitionKey: r.partition_key, partition: Number(r.partition_no) }));
  }

  /** Unfenced, idempotent: the range follows the recorded cursor (the change row locked); a row already in its
   *  partition is neither written nor counted; once done the change is pending and a retry finds it so (unchanged). No
   *  such id: null (an id that is not a UUID without a query, as getChange). */
  async prepareBatch(changeId: string, batch: PrepareBatch): Promise<PartitionChange | null> {
    if (!isUuidText(changeId)) return null;
    const sets = await this.db.run<PartitionChangeDbRow>(partitionReassignQueries.prepareBatch(changeId, batch));
    const row = sets[sets.length - 1]?.[0];
    return row ? toPartitionChange(row) : null;
  }

  moveIntents(fence: LeaseToken[], changeId: string, moves: PartitionMove[], progress: ReassignProgress): Promise<Fenced<PartitionChange>> {
    return this.fenced(fence, changeId, () => partitionChangeQueries.moveIntents(fence, changeId, moves, progress));
  }

  /** A completed change needs no fence: a retry after a lost reply (its leases released by the first call) reads
   *  leaseLost from the fence, then finds the change completed and answers with it. */
  async completeChange(fence: LeaseToken[], changeId: string): Promise<Fenced<PartitionChange>> {
    const out = await this.fenced(fence, changeId, () => partitionChangeQueries.completeChange(fence, changeId));
    if (out.kind === 'ok') return out;
    const now = await this.getChange(changeId);
    return now?.state === 'completed' ? { kind: 'ok', value: now } : out;
  }

  /** Idempotent: a cancelled change is answered as it is; a switched one is refused (it rolls forward). */
  async cancelChange(changeId: string, cancelledBy: string): Promise<CancelChangeOutcome> {
    if (!isUuidText(changeId)) return { kind: 'notFound' };
    const [before = [], after = []] = await this.db.run<PartitionChangeDbRow>(partitionCancelQueries.cancelChange(changeId, cancelledBy));
    const decided = decideCancel(before[0] ? toPartitionChange(before[0]) : null);
    return decided.kind === 'end' || decided.kind === 'moveBack' ? { kind: 'cancelled', change: toPartitionChange(after[0]!) } : decided;
  }

  async recordStepFailure(changeId: string, error: string): Promise<PartitionChange | null> {
    if (!isUuidText(changeId)) return null;
    const [rows = []] = await this.db.run<PartitionChangeDbRow>(partitionCancelQueries.recordStepFailure(changeId, error));
    return rows[0] ? toPartitionChange(rows[0]) : null;
  }

  async clearStepFailures(changeId: string): Promise<void> {
    if (isUuidText(changeId)) await this.db.run(partitionCancelQueries.clearStepFailures(changeId));
  }

  /** A fenced batch whose last result set is the change row; no token = no authority (leaseLost, nothing sent). */
  private async fenced(fence: LeaseToken[], changeId: string, build: () => SqlQuery): Promise<Fenced<PartitionChange>> {
    if (fence.length === 0) return { kind: 'leaseLost' };
    const out = await callerBugs(runFencedBatch<PartitionChangeDbRow>(this.db, build()));
    if (out.kind === 'leaseLost') return out;
    const row = out.value[out.value.length - 1]?.[0];
    if (!row) throw new StoreError('fatal', `partition change ${changeId} not found`, undefined);
    return { kind: 'ok', value: toPartitionChange(row) };
  }
}

interface LayoutDbRow extends Omit<PartitionChangeDbRow, 'change_id'> {
  db_now: Date;
  partition_count: number | null;
  recorded_at: Date | null;
  recorded_by: string | null;
  /** bigint: tedious returns it as a string. */
  layout_generation: number | string | null;
  change_id: string | null;
}

/** THROW 51001 (a fence short of every lease) or 51002 (a move outside the new count) = the caller's bug, the batch
 *  rolled back: a RangeError, as the other dialects raise before writing. */
async function callerBugs<T>(run: Promise<T>): Promise<T> {
  try {
    return await run;
  } catch (e) {
    if (e instanceof StoreError && (e.code === '51001' || e.code === '51002')) throw new RangeError(e.message, { cause: e });
    throw e;
  }
}

const countOf = (r: CountDbRow): PartitionCount => ({ count: Number(r.partition_count), recordedAt: r.recorded_at, recordedBy: r.recorded_by });
