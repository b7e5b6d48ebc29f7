// Leader-only periodic housekeeping (retention today; any later task is one more MaintenanceTask), under one rule:
//  - it runs after the batch has had its share of the tick: when a task is due, the batch stops starting that
//    slice (at most MaintenanceSettings.sliceMs, a quarter of the tick) before the tick's deadline, and the tasks
//    run in it; the tick's deadline ends the slice (a statement still running then is not awaited: the tick ends,
//    the hand-off is never delayed, and no task starts again until it settles); a task caps its own statements at
//    what is left of the slice (the server cancels them: a failure), so none holds a connection or lock past the tick;
//  - never while the cluster is paused; never a second run while one is still settling;
//  - a failure is logged (`<task>_failed` with the SQL error), counted (maintenance_failures_total) and backed
//    off exponentially (backoffBaseMs × 2^(n−1), at most backoffMaxMs); it never drops leadership — only a fence
//    refusal (the lease is really lost) ends the tick as lease_lost;
//  - its state is recorded in SQL for every instance's dashboard: each failure, and the success that ends a run of
//    them — this instance's, or one recorded by an earlier leader (checked at the first success of each epoch: a
//    leader that failed and then died or lost its lease never records its recovery).
import type { Clock } from '../lease/clock.js';
import type { Logger } from '../observability/logger.js';
import { sqlErrorField } from '../observability/logger.js';
import type { AppMetrics } from '../observability/metrics.js';
import type { OpsStore } from '../store/opsPorts.js';
import type { LeaseToken } from '../store/ports.js';
import type { TickSummary } from './tickSummary.js';
import type { MaintenanceSettings } from '../limits.js';

export interface MaintenanceTask {
  /** Names the log event (`<name>_failed`) and the metric label. */
  readonly name: string;
  /** Due by its own schedule at monotonic `nowMs` (the failure back-off is applied on top). */
  due(nowMs: number): boolean;
  /** One bounded run, fenced by `token`; issues no new statement once `untilMs` (monotonic) has passed. */
  run(token: LeaseToken, untilMs: number, sum: TickSummary): Promise<'ok' | 'leaseLost'>;
}

/** What the dashboard shows per task, as this instance saw it (only a leader runs maintenance). */
export interface MaintenanceTaskStatus {
  task: string;
  /** Runs this instance made (0: it has not led while the task was due). */
  runs: number;
  /** Monotonic ms since this instance's last run ended (null: none). */
  lastRunAgoMs: number | null;
  /** Consecutive failures (0 = the last run succeeded or none ran). */
  failures: number;
  lastError: string | null;
  /** Monotonic ms until the back-off lets it run again (0 = not held back). */
  retryInMs: number;
}

export class Maintenance {
  private readonly state = new Map<string, { failures: number; retryAtMs: number; lastError: string | null; runs: number; lastRunMs: number | null;
    /** The lease epoch under which a success last cleared a recorded failure (null: none yet in this process). */
    clearedEpoch: number | null }>();
  private running: Promise<unknown> | null = null;

  constructor(
    private readonly tasks: readonly MaintenanceTask[],
    private readonly settings: MaintenanceSettings,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly metrics?: AppMetrics,
    /** A failure (failures > 0), or a success that ends a run of them (failures 0: clears a recorded failure, writes
     *  nothing where none is recorded): in SQL for every instance's dashboard (best effort: it must not throw). */
    private readonly recordState: MaintenanceRecorder = () => {},
  ) {
    for (const t of tasks) this.state.set(t.name, { failures: 0, retryAtMs: Number.NEGATIVE_INFINITY, lastError: null, runs: 0, lastRunMs: null,
      clearedEpoch: null });
  }

  /** The slice a tick of `budgetMs` should leave free at its end (0: nothing due, paused, or still settling). */
  sliceMs(budgetMs: number, paused: boolean): number {
    if (paused || this.running !== null || !this.dueTasks().length) return 0;
    return Math.max(0, Math.min(this.settings.sliceMs, Math.floor(budgetMs / 4)));
  }

  /** Run every due task in turn until `untilMs`. Resolves by `untilMs` at the latest ('ok' if cut short). */
  async run(token: LeaseToken, sum: TickSummary, untilMs: number): Promise<'ok' | 'leaseLost'> {
    if (this.running !== null) return 'ok';
    const work = this.runDue(token, sum, untilMs);
    const running = work.then(() => {}, () => {}).finally(() => {
      if (this.running === running) this.running = null;
    });
    this.running = running;
    const stop = new AbortController();
    const cut = this.clock.sleep(Math.max(0, untilMs - this.clock.nowMs()), stop.signal).then(() => 'ok' as const);
    try {
      return await Promise.race([work, cut]);
    } finally {
      stop.abort();
    }
  }

  /** Resolves when no run is in progress (shutdown). */
  async settled(): Promise<void> {
    await this.running?.catch(() => {});
  }

  status(): MaintenanceTaskStatus[] {
    const now = this.clock.nowMs();
    return this.tasks.map((t) => {
      const s = this.state.get(t.name)!;
      return { task: t.name, runs: s.runs, lastRunAgoMs: s.lastRunMs === null ? null : Math.round(now - s.lastRunMs), failures: s.failures,
        lastError: s.lastError, retryInMs: Math.max(0, Math.ceil(s.retryAtMs - now)) };
    });
  }

  private dueTasks(): MaintenanceTask[] {
    const now = this.clock.nowMs();
    return this.tasks.filter((t) => now >= this.state.get(t.name)!.retryAtMs && t.due(now));
  }

  private async runDue(token: LeaseToken, sum: TickSummary, untilMs: number): Promise<'ok' | 'leaseLost'> {
    for (const task of this.dueTasks()) {
      if (this.clock.nowMs() >= untilMs) break;
      const s = this.state.get(task.name)!;
      s.runs++;
      try {
        if ((await task.run(token, untilMs, sum)) === 'leaseLost') return 'leaseLost';
        if (s.failures > 0) this.log.info({ event: `${task.name}_recovered`, after_failures: s.failures }, `${task.name} succeeded again`);
        // Ours, or an earlier leader's failure still recorded (once per epoch: only a leader records, one per epoch).
        if (s.failures > 0 || s.clearedEpoch !== token.leaseEpoch) {
          this.recordState(task.name, 0, null);
          s.clearedEpoch = token.leaseEpoch;
        }
        Object.assign(s, { failures: 0, retryAtMs: Number.NEGATIVE_INFINITY, lastError: null });
      } catch (e) {
        s.failures++;
        const backoffMs = Math.min(this.settings.backoffMaxMs, this.settings.backoffBaseMs * 2 ** Math.min(s.failures - 1, 30));
        s.retryAtMs = this.clock.nowMs() + backoffMs;
        const sqlError = sqlErrorField(e);
        s.lastError = sqlError?.message ?? null;
        this.metrics?.maintenanceFailed(task.name);
        this.recordState(task.name, s.failures, s.lastError);
        this.log.error({ event: `${task.name}_failed`, holder_id: token.holderId, lease_epoch: token.leaseEpoch, failures: s.failures,
          retry_in_ms: backoffMs, sql_error: sqlError }, `${task.name} failed; execution continues, retried after a back-off`);
      } finally {
        s.lastRunMs = this.clock.nowMs();
      }
    }
    return 'ok';
  }
}

/** Records a task's state for the dashboard: `failures` > 0 with the error, or 0 to clear a recorded failure. */
export type MaintenanceRecorder = (task: string, failures: number, lastError: string | null) => void;

/** The recorder over the ops store: a failure is upserted; a success (failures 0) is written only where a failure is
 *  recorded, so a cluster that never failed keeps no row ("no failure recorded"). Best effort: a write that fails
 *  is logged (maintenance_record_failed), never thrown. */
export function sqlMaintenanceRecorder(ops: Pick<OpsStore, 'recordMaintenance' | 'listMaintenance'>, leaseName: string, holderId: string,
  log: Logger): MaintenanceRecorder {
  return (task, failures, lastError) => void (async () => {
    if (failures === 0 && !(await ops.listMaintenance(leaseName)).some((m) => m.task === task && m.failures > 0)) return;
    await ops.recordMaintenance(leaseName, task, holderId, failures, lastError);
  })().catch((e: unknown) => log.warn({ event: 'maintenance_record_failed', task, sql_error: sqlErrorField(e) }, 'could not record the maintenance state'));
}

export interface RetentionSettings {
  /** 0 = retention disabled. */
  olderThanMs: number;
  batchSize: number;
  maxBatchesPerTick: number;
  intervalMs: number;
}

/** Retention: up to maxBatchesPerTick fenced purge statements of batchSize; a full last batch leaves the rest for
 *  the next tick (no interval wait), a partial one means caught up until the next interval. */
/** Retention of one partition's terminal intents, fenced by that partition's lease (each partition's leader purges its own). */
export function retentionTask(store: Pick<OpsStore, 'fencedPurgeTerminal'>, r: RetentionSettings, clock: Clock, log: Logger,
  metrics?: AppMetrics, partition = 0): MaintenanceTask {
  let lastPurgeMs = Number.NEGATIVE_INFINITY;
  return {
    name: 'retention',
    due: (nowMs) => r.olderThanMs > 0 && nowMs - lastPurgeMs >= r.intervalMs,
    async run(token, untilMs, sum) {
      const startedMs = clock.nowMs();
      let intents = 0;
      let attempts = 0;
      let caughtUp = false;
      let lost = false;
      try {
        for (let i = 0; i < r.maxBatchesPerTick && !caughtUp && (i === 0 || clock.nowMs() < untilMs); i++) {
          // Capped at what is left of the slice: a purge cut off by the server frees its connection (and the fence's
          // lock) by the tick's end instead of outliving it (a pool of one would otherwise starve the next tick).
          // Partition 0 until the per-partition runtime passes each partition's own (issue 25).
          const out = await store.fencedPurgeTerminal(token, partition, r.olderThanMs, r.batchSize, Math.max(1, untilMs - clock.nowMs()));
          if (out.kind === 'leaseLost') {
            lost = true; // batches committed before the loss still count below
            break;
          }
          intents += out.value.intents;
          attempts += out.value.attempts;
          caughtUp = out.value.intents < r.batchSize;
        }
      } finally {
        if (caughtUp) lastPurgeMs = startedMs;
        sum.purgedIntents += intents;
        if (intents > 0) {
          metrics?.purged(intents, attempts);
          log.info({ event: 'retention_purged', holder_id: token.holderId, lease_epoch: token.leaseEpoch, intents, attempts,
            caught_up: caughtUp }, 'purged terminal intents past retention');
        }
      }
      return lost ? 'leaseLost' : 'ok';
    },
  };
}
