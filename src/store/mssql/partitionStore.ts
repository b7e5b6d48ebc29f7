// SQL Server PartitionStore: the recorded partition count. The insert's NOT EXISTS probe takes UPDLOCK+HOLDLOCK on
// the key (as the lease acquire does), so of two first starts one inserts and the other waits, then finds its row;
// the row is read back as recorded in the same batch.
import type { PartitionChange, PartitionCount, PartitionLayout, PartitionMove, PartitionStore, ReassignProgress, ReassignRow, RequestChangeOutcome } from '../partitionPorts.js';
import type { Fenced, LeaseToken } from '../ports.js';
import type { MssqlRunner } from './db.js';
import { p, type SqlQuery } from './params.js';

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
