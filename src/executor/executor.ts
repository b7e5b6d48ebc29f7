// The executor tick: acquire/renew; on a new epoch recover orphans and rebuild; then, until the deadline
// (min(tick budget, local lease deadline)), refresh at its interval, renew at its interval, and run due
// intents through fenced start → gate check → provider call → fenced completion, in batches.
// Guarantees: nothing starts without the gate; every write is fenced by the epoch it started under; a
// fence failure or SQL error drops leadership and stops the batch; the tick awaits everything it began.
import type { LeaseManager } from '../lease/leaseManager.js';
import type { Clock } from '../lease/clock.js';
import type { Logger } from '../observability/logger.js';
import { sqlErrorField } from '../observability/logger.js';
import type { Provider } from '../provider/provider.js';
import { aborted, decide } from '../provider/retryPolicy.js';
import { ScheduleRefresher } from '../schedule/refresher.js';
import type { AttemptCompletion, ExecutionStore, StartedAttempt } from '../store/intentPorts.js';
import type { LeaseToken } from '../store/ports.js';
import { emptySummary, type ExecutorSettings, type TickSummary } from './tickSummary.js';
import { NO_OPS, type ExecutorOps } from './executorOps.js';

export type { ExecutorSettings, TickSummary };

/** A provider call with less time than this before the lease deadline is not sent (aborted instead):
 *  it would most likely time out after reaching the provider and be sent again. */
const MIN_CALL_MS = 100;

export class Executor {
  private epoch: number | null = null;
  private lastRefreshMs = Number.NEGATIVE_INFINITY;
  private lastReconcileMs = Number.NEGATIVE_INFINITY;
  private running: Promise<TickSummary> | null = null;
  private draining = false;
  private standDownUntilMs = Number.NEGATIVE_INFINITY; // after handOver: start nothing, do not acquire
  readonly refresher: ScheduleRefresher;

  constructor(
    private readonly lease: LeaseManager,
    private readonly store: ExecutionStore,
    private readonly provider: Provider,
    private readonly settings: ExecutorSettings,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly random: () => number = Math.random,
    private readonly ops: ExecutorOps = NO_OPS,
  ) {
    this.refresher = new ScheduleRefresher(store, settings.refresh, clock);
    // Leadership lost (any reason): the schedule is dropped; a new epoch rebuilds from SQL.
    lease.onChange((c) => {
      if (c.kind === 'lost') {
        this.epoch = null;
        this.refresher.reset();
      }
    });
  }

  /** Run one bounded tick. Overlapping calls share the running tick instead of starting a second one. */
  tick(budgetMs = this.settings.tickBudgetMs): Promise<TickSummary> {
    if (this.draining) return Promise.resolve(this.finish(emptySummary(this.lease.holderId), this.clock.nowMs(), 'draining'));
    this.running ??= this.runTick(budgetMs).finally(() => (this.running = null));
    return this.running;
  }

  /** Stop starting attempts, let the running tick finish what it began, and run no further ticks
   *  (shutdown and drain: release the lease only after this resolves, so completions still commit). */
  async drain(): Promise<void> {
    this.draining = true;
    await this.running?.catch(() => {});
  }

  /** Leader drain: stop starting, finish the running tick, release the lease, sit out acquiring for `standDownMs`. */
  async handOver(standDownMs: number): Promise<'released' | 'not_leader' | 'lost'> {
    if (!this.lease.requireLeader()) return 'not_leader';
    this.standDownUntilMs = this.clock.nowMs() + standDownMs;
    await this.running?.catch(() => {});
    return (await this.lease.release()) ? 'released' : 'lost';
  }

  private async runTick(budgetMs: number): Promise<TickSummary> {
    const t0 = this.clock.nowMs();
    const budgetEnd = t0 + budgetMs;
    const sum = emptySummary(this.lease.holderId);
    if (t0 < this.standDownUntilMs) return this.finish(sum, t0, 'standing_down');
    let token = await this.lease.tryAcquireOrRenew();
    if (!token) {
      // Follower: if the holder's lease expires within this tick, try again right after it.
      const wait = this.lease.followerRetryDelayMs();
      if (wait > 0 && t0 + wait + this.settings.minLeaderWorkMs < budgetEnd) {
        await this.clock.sleep(wait);
        token = (await this.lease.tryAcquire()) ? this.lease.requireLeader() : null;
      }
    }
    if (!token) return this.finish(sum, t0, 'follower');
    sum.role = 'leader';
    sum.leaseEpoch = token.leaseEpoch;
    try {
      if (this.epoch !== token.leaseEpoch && !(await this.rebuild(token, sum))) return this.finish(sum, t0, 'lease_lost');
      if ((await this.ops.leaderTick(token, sum)) === 'leaseLost') return this.finish(sum, t0, this.fenceFailed(sum) || 'lease_lost'); // pause flag, retention
      const stop = await this.loop(token, budgetEnd, sum);
      return this.finish(sum, t0, stop);
    } catch (e) {
      // Any SQL failure on the leader path is a connectivity failure: drop leadership, stop (spec).
      this.log.error({ event: 'executor_sql_error', holder_id: token.holderId, lease_epoch: token.leaseEpoch, sql_error: sqlErrorField(e) }, 'executor stopped on SQL error');
      this.lease.drop('sql_error', e);
      return this.finish(sum, t0, 'sql_error');
    }
  }

  private async rebuild(token: LeaseToken, sum: TickSummary): Promise<boolean> {
    const rec = await this.store.fencedRecoverOrphans(token);
    if (rec.kind === 'leaseLost') return this.fenceFailed(sum);
    const stats = await this.refresher.rebuild();
    sum.rebuilt = true;
    sum.recovered = rec.value.recovered;
    sum.refreshedRows += stats.rows;
    // Leadership may have been lost while rebuilding: re-check before executing anything.
    if (!this.lease.ensureEpoch(token.leaseEpoch)) {
      this.refresher.reset();
      return false;
    }
    this.epoch = token.leaseEpoch;
    this.lastRefreshMs = this.lastReconcileMs = this.clock.nowMs();
    return true;
  }

  private async loop(token: LeaseToken, budgetEnd: number, sum: TickSummary): Promise<string> {
    const s = this.settings;
    const inFlight = new Set<Promise<void>>();
    const pending: AttemptCompletion[] = [];
    let wake: () => void = () => {};
    let woken = false;
    const signal = () => {
      woken = true;
      wake();
    };
    let stop: string | null = null;
    let failure: unknown = null;
    // At most one fenced start and one fenced completion batch in flight at a time, running beside the
    // provider calls, so the database round trips overlap instead of stalling the pipeline.
    let starting: Promise<void> | null = null;
    let flushing: Promise<void> | null = null;
    const deadline = () => Math.min(budgetEnd, this.clock.nowMs() + this.lease.remainingMs());
    const background = (work: () => Promise<void>, done: () => void): Promise<void> =>
      work().catch((e) => {
        failure ??= e;
      }).finally(() => {
        done();
        signal();
      });

    const flush = async () => {
      const batch = pending.splice(0);
      if (batch.length === 0) return;
      const res = await this.store.fencedCompleteAttempts(token, batch);
      if (res.kind === 'leaseLost') {
        this.fenceFailed(sum);
        stop ??= 'lease_lost';
        return;
      }
      const byId = new Map(batch.map((b) => [b.intentId, b]));
      for (const r of res.value) {
        const c = byId.get(r.intentId)!;
        if (this.epoch === token.leaseEpoch) this.refresher.schedule.release(r.intentId, r.row);
        if (!r.applied) sum.skipped++;
        else if (c.outcome === 'succeeded') sum.succeeded++;
        else if (c.outcome === 'aborted') sum.aborted++;
        else if (c.next.status === 'scheduled') sum.retried++;
        else sum.failed++;
      }
    };

    const runAttempt = async (a: StartedAttempt) => {
      // The gate, just before the call: an attempt whose call was not sent is aborted. The call may
      // outlive the tick budget (which bounds starts) but never the local lease deadline.
      const timeoutMs = Math.min(s.providerTimeoutMs, this.lease.remainingMs());
      if (!this.lease.ensureEpoch(token.leaseEpoch) || timeoutMs < MIN_CALL_MS) {
        this.ops.blockedNotLeader();
        pending.push(aborted(a, 'leadership lost before the provider call'));
        return;
      }
      const t = this.clock.nowMs();
      const result = await this.provider.submit(
        { intentId: a.intentId, attemptNo: a.attemptNo, leaseEpoch: token.leaseEpoch, payload: a.contract.payload, url: a.contract.provider.url },
        timeoutMs,
      );
      pending.push(decide(result, { ...a, durationMs: this.clock.nowMs() - t }, a.contract.retry, this.random));
    };

    const start = async (free: number) => {
      const due = this.refresher.schedule.takeDue(this.refresher.dbNowMs(), free);
      if (due.length === 0) return;
      const res = await this.store.fencedStartAttempts(token, due.map((d) => ({ intentId: d.intentId, expectedAttemptCount: d.attemptCount })));
      if (res.kind === 'leaseLost') {
        this.fenceFailed(sum);
        stop ??= 'lease_lost';
        return;
      }
      const startedIds = new Set(res.value.map((a) => a.intentId));
      for (const d of due) {
        if (startedIds.has(d.intentId)) continue;
        // Changed meanwhile (cancelled, rescheduled) or not yet due in database time: keep it queued
        // slightly later; a newer row from refresh wins over this one.
        sum.skipped++;
        if (this.epoch === token.leaseEpoch) {
          this.refresher.schedule.release(d.intentId, { ...d, status: 'scheduled', nextAttemptAt: new Date(d.dueMs + 50) });
        }
      }
      sum.started += res.value.length;
      for (const a of res.value) {
        const p: Promise<void> = runAttempt(a)
          .catch((e: unknown) => {
            // Not known whether the call went out: a retryable attempt, not an abort.
            pending.push(decide({ kind: 'retryable', httpStatus: null, error: `internal error: ${(e as Error).message}`, retryAfterMs: null },
              { ...a, durationMs: 0 }, a.contract.retry, this.random));
          })
          .finally(() => {
            inFlight.delete(p); // before waking the loop, so it sees the slot free
            signal();
          });
        inFlight.add(p);
      }
    };

    const iteration = async (): Promise<void> => {
      const now = this.clock.nowMs();
      if (now >= deadline()) stop = 'deadline';
      else if (this.draining || now < this.standDownUntilMs) stop = 'draining';
      else if (this.ops.handoverRequest()) stop = 'handover';
      else if (!this.lease.ensureEpoch(token.leaseEpoch)) stop = 'lease_lost';
      else if (this.lease.renewDue() && !(await this.lease.renew())) stop = 'lease_lost';
      if (stop !== null) return;

      const busy = inFlight.size > 0 || starting !== null || flushing !== null;
      if (!busy && pending.length === 0 && now - this.lastReconcileMs >= s.reconcileIntervalMs) {
        const stats = await this.refresher.rebuild(); // defence in depth against late commits
        sum.refreshedRows += stats.rows;
        this.lastReconcileMs = this.lastRefreshMs = now;
      } else if (now - this.lastRefreshMs >= s.refresh.intervalMs) {
        const stats = await this.refresher.refresh();
        await this.ops.refreshControl(); // the pause flag, at the refresh cadence (never per attempt)
        sum.refreshedRows += stats.rows;
        sum.refreshes++;
        this.lastRefreshMs = now;
      }

      if (!flushing && (pending.length >= s.completionBatch || (pending.length > 0 && inFlight.size === 0))) {
        flushing = background(flush, () => (flushing = null));
      }
      // Start due intents when a worthwhile batch of slots is free (or nothing runs).
      const quota = s.maxAttemptsPerTick - sum.started;
      if (quota <= 0 && !busy && pending.length === 0) {
        stop = 'attempt_cap'; // this tick's share is done; the next tick continues
        return;
      }
      const free = Math.min(s.concurrency - inFlight.size, quota);
      const canStart = !starting && free > 0 && (free >= s.startBatch || inFlight.size === 0) && this.ops.mayStart();
      if (canStart && this.lease.requireLeader() && (this.refresher.schedule.nextDueMs() ?? Infinity) <= this.refresher.dbNowMs()) {
        starting = background(() => start(free), () => (starting = null));
      }
      if (woken || stop !== null || failure !== null) return;

      // Idle until the next thing to do: a completion or finished batch, the next refresh, the next due
      // intent, the deadline.
      const nextDue = this.refresher.schedule.nextDueMs();
      // Only a start we could make now bounds the wait; otherwise a completion wakes us (no busy loop).
      const untilDue = nextDue === undefined || !canStart || starting ? Infinity : nextDue - this.refresher.dbNowMs();
      const untilRefresh = this.lastRefreshMs + s.refresh.intervalMs - this.clock.nowMs();
      const waitMs = Math.max(1, Math.min(untilRefresh, untilDue, deadline() - this.clock.nowMs()));
      const woke = new Promise<void>((r) => (wake = r));
      if (!woken) await Promise.race([this.clock.sleep(waitMs), woke]);
    };

    while (stop === null && failure === null) {
      woken = false;
      try {
        await iteration();
      } catch (e) {
        failure ??= e; // a refresh/renew SQL error: stop starting, then wait for what is running
      }
    }

    // End of the batch: in-flight calls end by the lease deadline (their timeout is clipped to it); their
    // completions are fenced like any other write (a lost lease makes them orphans for the next leader).
    // The tick awaits everything it began, also when it stops on an error.
    await starting;
    await Promise.all([...inFlight]);
    await flushing;
    if (failure) throw failure;
    if (stop !== 'lease_lost') await flush();
    else pending.length = 0;
    const handover = stop === 'handover' ? this.ops.handoverRequest() : null;
    if (handover && stop === 'handover') {
      // In-flight work is written: report it, then hand the row back (no stand-down: anyone may acquire).
      await this.ops.handoverCompleted(token, handover.requestId);
      await this.lease.release();
    }
    return stop ?? 'deadline';
  }

  private fenceFailed(sum: TickSummary): false {
    sum.leaseLost = true;
    this.lease.drop('fence_failed');
    return false;
  }

  private finish(sum: TickSummary, t0: number, stopReason: string): TickSummary {
    sum.stopReason = stopReason;
    if (stopReason === 'lease_lost') sum.leaseLost = true; // whichever check noticed first (fence, renew, gate)
    sum.durationMs = Math.round(this.clock.nowMs() - t0);
    sum.scheduleSize = this.refresher.schedule.size;
    this.ops.tickFinished(sum);
    return sum;
  }
}
