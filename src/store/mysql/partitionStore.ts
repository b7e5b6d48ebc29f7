// MySQL / MariaDB PartitionStore: the recorded partition count. The insert leaves an existing row alone
// (ON DUPLICATE KEY UPDATE id = id: a concurrent first start waits on the key, then changes nothing; never a
// duplicate-key error); the row is then read back as recorded (affectedRows is never an outcome here).
import type { PartitionChange, PartitionCount, PartitionLayout, PartitionMove, PartitionStore, ReassignProgress, ReassignRow, RequestChangeOutcome } from '../partitionPorts.js';
import type { Fenced, LeaseToken } from '../ports.js';
import type { MyQueryable } from './db.js';
import { NOW } from './rows.js';

interface CountDbRow { partition_count: number; recorded_at: Date; recorded_by: string }

const RECORD = `INSERT INTO submission_manager_partition_count (id, partition_count, recorded_at, recorded_by)
VALUES (1, ?, ${NOW}, ?) ON DUPLICATE KEY UPDATE id = id`;

const READ = 'SELECT partition_count, recorded_at, recorded_by FROM submission_manager_partition_count WHERE id = 1';

export class MysqlPartitionStore implements PartitionStore {
  constructor(private readonly db: MyQueryable) {}

  async recordPartitionCount(count: number, recordedBy: string): Promise<PartitionCount> {
    await this.db.query(RECORD, [count, recordedBy.slice(0, 128)]);
    const row = (await this.db.query<CountDbRow>(READ)).rows[0];
    if (!row) throw new Error('submission_manager_partition_count: no row after the insert');
    return { count: Number(row.partition_count), recordedAt: row.recorded_at, recordedBy: row.recorded_by };
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
