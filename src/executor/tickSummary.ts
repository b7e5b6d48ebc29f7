// Executor settings and the summary one tick returns (the caller logs it as event=tick_summary).
import { settleWindowMs } from '../limits.js';
export interface ExecutorSettings {
  tickBudgetMs: number;
  /** Provider calls in flight at once. */
  concurrency: number;
  providerTimeoutMs: number;
  reconcileIntervalMs: number;
  refresh: { intervalMs: number; pageSize: number; commitGraceMs: number };
  /** The size a START waits for: that many free slots, or (where a later batch sends what waits ready) fewer than
   *  that many attempts left ready, with up to twice it started beyond the free slots (ExecutionState.startRoom). */
  startBatch: number;
  /** Flush completions once this many are pending (batched fenced completions). */
  completionBatch: number;
  /** A follower waits for an expiring lease within a tick only if this much budget would remain. */
  minLeaderWorkMs: number;
  /** Closing a batch retries an unwritten completion batch for at most this long (default 1 s); what is
   *  left is written after the tick by the executor's settler (the row is kept meanwhile). Part of the tick's margin. */
  settleWindowMs?: number;
  /** The partition this executor leads (issue 25; default 0): sent to the provider as X-Lease-Partition beside the epoch. */
  partition?: number;
}

export interface TickSummary {
  role: 'leader' | 'follower';
  holderId: string;
  leaseEpoch: number | null;
  rebuilt: boolean;
  recovered: number;
  refreshes: number;
  /** Refreshes run early because a due-intent notice arrived (PostgreSQL NOTIFY). */
  nudgedRefreshes: number;
  refreshedRows: number;
  started: number;
  succeeded: number;
  retried: number;
  failed: number;
  aborted: number;
  /** Starts or completions whose intent changed meanwhile (cancelled, rescheduled, not yet due). */
  skipped: number;
  leaseLost: boolean;
  /** Starts and provider calls held back since the last summary because no control read was answered within one
   *  refresh interval (control_read_late; at a send, a failed read too): filled in by ExecutorOps.tickFinished. */
  staleControlHolds: number;
  /** The cluster-wide pause flag was set when this leader tick read it (nothing was started). */
  paused: boolean;
  /** Terminal intents deleted by the retention purge in this tick. */
  purgedIntents: number;
  scheduleSize: number;
  /** How early (ms, to 0.1) the interval refresh begins now, to cover the leader's measured pickup overhead (src/schedule/cadence.ts). */
  refreshLeadMs: number;
  durationMs: number;
  stopReason: string;
}

export function emptySummary(holderId: string): TickSummary {
  return {
    role: 'follower', holderId, leaseEpoch: null, rebuilt: false, recovered: 0, refreshes: 0, nudgedRefreshes: 0, refreshedRows: 0,
    started: 0, succeeded: 0, retried: 0, failed: 0, aborted: 0, skipped: 0, leaseLost: false, staleControlHolds: 0, paused: false,
    purgedIntents: 0, scheduleSize: 0, refreshLeadMs: 0, durationMs: 0, stopReason: '',
  };
}

/** Work done between two ticks (a bridge's batch, the settler's writes), counted into the next tick's summary. */
const BETWEEN_TICK_COUNTS = ['refreshes', 'nudgedRefreshes', 'refreshedRows', 'started', 'succeeded', 'retried', 'failed', 'aborted',
  'skipped'] as const;

/** Add `from`'s counts of work between ticks to `into`, and zero them in `from`. */
export function takeBetweenTicks(into: TickSummary, from: TickSummary): void {
  for (const k of BETWEEN_TICK_COUNTS) {
    into[k] += from[k];
    from[k] = 0;
  }
}

/** How many started attempts may wait beyond the free call slots (and the provider's in-flight cap) where a later
 *  batch sends them: twice the start batch (ExecutionState.startRoom). */
export const readyAhead = (s: Pick<ExecutorSettings, 'startBatch'>): number => 2 * s.startBatch;

/** Executor settings from the resolved configuration, with batch sizes derived from concurrency. */
export function executorSettingsFrom(c: {
  executor: { tickBudgetMs: number; concurrency: number };
  provider: { timeoutMs: number };
  schedule: { refreshIntervalMs: number; pageSize: number; commitGraceMs: number; reconcileIntervalMs: number };
  db?: { statementTimeoutMs: number };
}): ExecutorSettings {
  return {
    tickBudgetMs: c.executor.tickBudgetMs,
    concurrency: c.executor.concurrency,
    providerTimeoutMs: c.provider.timeoutMs,
    reconcileIntervalMs: c.schedule.reconcileIntervalMs,
    refresh: { intervalMs: c.schedule.refreshIntervalMs, pageSize: c.schedule.pageSize, commitGraceMs: c.schedule.commitGraceMs },
    startBatch: Math.max(1, Math.floor(c.executor.concurrency / 4)),
    completionBatch: Math.max(1, Math.floor(c.executor.concurrency / 2)),
    minLeaderWorkMs: 500,
    // Room for one more completion write after a failed one (each bounded by the client-side deadline).
    settleWindowMs: c.db ? settleWindowMs(c.db.statementTimeoutMs) : 1_000,
  };
}
