// SQL Server ExecutionStore: the leader's reads (rebuild, refresh) and its fenced writes. Each fenced call is
// one batch, one round trip: fence (lease row WITH (HOLDLOCK)) → one batched statement → audit row → COMMIT.
import type {
  AttemptCompletion, CompletedAttempt, ExecutionStore, RefreshCursor, RefreshPage, ScheduleRow, StartHold, StartOutcome,
  StartRequest,
} from '../intentPorts.js';
import type { Fenced, LeaseToken } from '../ports.js';
import type { MssqlRunner } from './db.js';
import { runFencedBatch } from './fence.js';
import { executionQueries } from './executionQueries.js';
import {
  NIL_UUID, toCompletedAttempt, toScheduleRow, toStartedAttempt, type CompletedDbRow, type ScheduleDbRow, type StartedDbRow,
} from './rows.js';

export class MssqlExecutionStore implements ExecutionStore {
  /** `partition`: the executor partition this store reads and writes (0 with EXECUTOR_PARTITIONS = 1). */
  constructor(private readonly db: MssqlRunner, private readonly partition = 0) {}

  async rebuildStart(commitGraceMs: number): Promise<{ dbNow: Date; cursor: RefreshCursor }> {
    const [rows = []] = await this.db.run<{ db_now: Date; cursor_text: string }>(executionQueries.rebuildStart(commitGraceMs));
    const row = rows[0]!;
    return { dbNow: row.db_now, cursor: { modifiedAt: row.cursor_text, intentId: NIL_UUID } };
  }

  async loadScheduled(afterId: string | null, limit: number): Promise<ScheduleRow[]> {
    const [rows = []] = await this.db.run<ScheduleDbRow>(executionQueries.loadScheduled(afterId, limit, this.partition));
    return rows.map(toScheduleRow);
  }

  async refreshPage(cursor: RefreshCursor, limit: number, commitGraceMs: number): Promise<RefreshPage> {
    const [now = [], page = []] = await this.db.run<Record<string, unknown>>(
      executionQueries.refreshPage(cursor, limit, commitGraceMs, this.partition));
    const rows = (page as unknown as (ScheduleDbRow & { settled: boolean })[])
      .map((x) => ({ ...toScheduleRow(x), settled: x.settled === true }));
    return { rows, dbNow: now[0]!.db_now as Date };
  }

  async fencedRecoverOrphans(token: LeaseToken): Promise<Fenced<{ recovered: number }>> {
    const out = await runFencedBatch(this.db, executionQueries.recoverOrphans(token, this.partition));
    if (out.kind === 'leaseLost') return out;
    return { kind: 'ok', value: { recovered: Number(out.value[0]?.[0]?.recovered ?? 0) } };
  }

  async fencedStartAttempts(token: LeaseToken, requests: StartRequest[]): Promise<StartOutcome> {
    const out = await runFencedBatch<StartedDbRow>(this.db, executionQueries.startAttempts(token, requests, this.partition));
    if (out.kind === 'leaseLost') return out;
    const held = ((out.value[1]?.[0] as { held?: StartHold | null } | undefined)?.held) ?? null;
    if (held !== null) return { kind: 'held', by: held };
    return { kind: 'ok', value: (out.value[0] ?? []).map(toStartedAttempt) };
  }

  async fencedCompleteAttempts(token: LeaseToken, completions: AttemptCompletion[]): Promise<Fenced<CompletedAttempt[]>> {
    const out = await runFencedBatch<CompletedDbRow>(this.db, executionQueries.completeAttempts(token, completions, this.partition));
    if (out.kind === 'leaseLost') return out;
    return { kind: 'ok', value: (out.value[0] ?? []).map(toCompletedAttempt) };
  }
}
