// PostgreSQL PartitionStore: the recorded partition count. Two statements, not one: a SELECT in the same statement as
// an INSERT … ON CONFLICT DO NOTHING reads the statement's snapshot, which misses a row that a concurrent first
// start committed while we waited on its key; a second statement (READ COMMITTED) sees it.
import type { PartitionChange, PartitionCount, PartitionLayout, PartitionMove, PartitionStore, ReassignProgress, ReassignRow, RequestChangeOutcome } from '../partitionPorts.js';
import type { Fenced, LeaseToken } from '../ports.js';
import type { PgQueryable } from './db.js';

interface CountDbRow { partition_count: number; recorded_at: Date; recorded_by: string }

const RECORD = `
INSERT INTO submission_manager_partition_count (id, partition_count, recorded_at, recorded_by)
VALUES (1, $1, clock_timestamp(), $2)
ON CONFLICT (id) DO NOTHING
RETURNING partition_count, recorded_at, recorded_by`;

const READ = 'SELECT partition_count, recorded_at, recorded_by FROM submission_manager_partition_count WHERE id = 1';

const toCount = (r: CountDbRow): PartitionCount => ({ count: Number(r.partition_count), recordedAt: r.recorded_at, recordedBy: r.recorded_by });

export class PgPartitionStore implements PartitionStore {
  constructor(private readonly db: PgQueryable) {}

  async recordPartitionCount(count: number, recordedBy: string): Promise<PartitionCount> {
    const made = (await this.db.query<CountDbRow>(RECORD, [count, recordedBy.slice(0, 128)])).rows[0];
    if (made) return toCount(made);
    const row = (await this.db.query<CountDbRow>(READ)).rows[0];
    if (!row) throw new Error('submission_manager_partition_count: the insert met a row that is not there');
    return toCount(row);
  }

  // Issue 26: placeholders until this dialect's change queries land (a helper replaces each).
  readLayout(): Promise<PartitionLayout> { return notYet(); }
  requestChange(_toCount: number, _requestedBy: string, _changeId: string): Promise<RequestChangeOutcome> { return notYet(); }
  listChanges(_limit: number): Promise<PartitionChange[]> { return notYet(); }
  getChange(_changeId: string): Promise<PartitionChange | null> { return notYet(); }
  claimChange(_fence: LeaseToken[], _changeId: string): Promise<Fenced<PartitionChange>> { return notYet(); }
  switchCount(_fence: LeaseToken[], _changeId: string): Promise<Fenced<PartitionChange>> { return notYet(); }
  listForReassign(_q: { after: string | null; limit: number; modifiedSince: Date | null }): Promise<ReassignRow[]> { return notYet(); }
  moveIntents(_fence: LeaseToken[], _changeId: string, _moves: PartitionMove[], _progress: ReassignProgress): Promise<Fenced<PartitionChange>> { return notYet(); }
  completeChange(_fence: LeaseToken[], _changeId: string): Promise<Fenced<PartitionChange>> { return notYet(); }
}

function notYet(): never { throw new Error('partition changes are not implemented for this dialect yet (issue 26)'); }
