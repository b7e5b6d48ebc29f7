// The executor tick, as a pipeline of phases, one concern each:
//   ACQUIRE   renew when due / try to acquire (a follower may wait for an observed expiry inside the tick);
//   CARRY     completions an earlier tick of this process could not write are written first, under this fence;
//   REBUILD   on a new epoch: fenced orphan recovery, then the full load — resumable across ticks, and
//             nothing executes until it has finished (leadership is re-checked after it);
//   OPS       pause flag and handover request;
//   BATCH     refresh + fenced start → gate → provider call → fenced completion (batch.ts);
//   MAINTAIN  leader-only housekeeping (retention) in a slice the batch leaves at the tick's end when a task is
//             due; bounded, backed off, it never drops leadership unless the fence refuses (maintenance.ts).
// Guarantees: nothing starts without the gate; every write is fenced; an SQL error drops leadership at once;
// a tick returns within budget + provider timeout + a bounded closing window (every database call has a
// client-side deadline); a step-down awaits every call in flight, and the row is never released while a result
// is unwritten (LeaseManager.holdReleaseWhile): the settler writes it under the same token as soon as the
// database answers (the fence decides), at the latest this process's next epoch before its orphan recovery.
// A tick that simply runs out while leading carries its calls in flight into the next tick (InFlightCalls); when
// the timer drives it (a next tick follows), a BRIDGE batch keeps refreshing and executing until that tick begins
// — late or skipped occurrences too — or the local lease deadline. The bridge renews when due until the timer's
// next occurrence, then no more: a leader whose ticks stop coming steps down at most one timer period + the lease
// after its last tick began. A leader keeps its refresh and renew cadence from its first refresh to its step-down.
// Work between ticks counts in the next tick's summary.
import type { LeaseManager } from '../lease/leaseManager.js';
import type { Clock } from '../lease/clock.js';
import type { Logger } from '../observability/logger.js';
import { sqlErrorField } from '../observability/logger.js';
import type { Provider } from '../provider/provider.js';
import { ScheduleRefresher } from '../schedule/refresher.js';
import { RefreshCadence } from '../schedule/cadence.js';
import type { ExecutionStore } from '../store/intentPorts.js';
import type { LeaseToken } from '../store/ports.js';
import { emptySummary, takeBetweenTicks, type ExecutorSettings, type TickSummary } from './tickSummary.js';
import { NO_OPS, type ExecutorOps } from './executorOps.js';
import { Batch } from './batch.js';
import { TickBridge } from './tickBridge.js';
import type { ProviderGuard } from '../provider/guard.js';
import { CompletionBuffer, countCompleted } from './completions.js';
import { InFlightCalls } from './inFlight.js';
import { StallWatch } from './stallWatch.js';
import { DueNoticeListener, type DueNotices } from './dueNotices.js';

export type { ExecutorSettings, TickSummary };

/** Pause between two attempts to write unwritten completions between ticks, doubling up to SETTLE_MAX_RETRY_MS. */
const SETTLE_RETRY_MS = 100;
const SETTLE_MAX_RETRY_MS = 1_000;

/** How often a tick waiting for the bridge's hand-over checks whether a renew is due. */
const HANDOVER_RENEW_POLL_MS = 50;

export class Executor {
  /** The epoch whose schedule is complete (null: rebuild needed). */
  private epoch: number | null = null;
  /** The epoch whose orphans were recovered and whose rebuild has begun (it may span ticks). */
  private rebuildEpoch: number | null = null;
  /** Completions not yet written, kept across ticks and epochs of this process. Written rows return to the
   *  schedule if it still holds their claim (a schedule dropped with leadership ignores them). */
  readonly completions = new CompletionBuffer((rows) => {
    for (const r of rows) this.refresher.schedule.release(r.intentId, r.row);
  }, (c, e) => {
    this.ops.completionUnwritable?.();
    this.log.error({ event: 'completion_unwritable', holder_id: this.lease.holderId, intent_id: c.intentId, attempt_no: c.attemptNo,
      outcome: c.outcome, sql_error: sqlErrorField(e) }, 'the database refuses this completion: dropped (orphan recovery closes its attempt)');
  }, (token, kept) => {
    this.log.warn({ event: 'completions_fence_refused', holder_id: token.holderId, lease_epoch: token.leaseEpoch, kept },
      'the fence refused our completions (that epoch ended): kept for this process\'s next epoch; the next leader may send them again');
  });
  /** Provider calls in flight, kept across ticks of this process. */
  readonly inFlight = new InFlightCalls();
  private readonly stalls: StallWatch;
  private batch: Batch | null = null;
  /** The batch running between two timer ticks. */
  private readonly bridge: TickBridge;
  /** Counts of the work done between ticks (bridge, settler), added to the next tick's summary. */
  private readonly between: TickSummary;
  /** The task writing unwritten results between ticks (drain awaits it), and the newest token this process led
   *  under (it writes under that one). */
  private settler: Promise<void> | null = null;
  private settlerToken: LeaseToken | null = null;
  /** Shutdown gave up waiting: a settler still retrying stops (the row is kept, it expires). */
  private stopped = false;
  private notices: DueNoticeListener | null = null;
  private running: Promise<TickSummary> | null = null;
  private draining = false;
  readonly refresher: ScheduleRefresher;
  /** Refresh, notice tail reads and reconcile, kept across ticks (a notice between ticks is read at the next step). */
  private readonly cadence: RefreshCadence;

  constructor(
    private readonly lease: LeaseManager,
    private readonly store: ExecutionStore,
    private readonly provider: Provider,
    private readonly settings: ExecutorSettings,
    private readonly clock: Clock,
    private readonly log: Logger,
    private readonly random: () => number = Math.random,
    private readonly ops: ExecutorOps = NO_OPS,
    /** Provider protection shared by every tick of this process (null: none). */
    readonly guard: ProviderGuard | null = null,
  ) {
    this.refresher = new ScheduleRefresher(store, settings.refresh, clock);
    this.stalls = new StallWatch(clock);
    this.cadence = new RefreshCadence({ refreshIntervalMs: settings.refresh.intervalMs, reconcileIntervalMs: settings.reconcileIntervalMs });
    this.between = emptySummary(lease.holderId);
    this.bridge = new TickBridge(lease, log);
    lease.holdReleaseWhile(() => this.inFlight.size > 0 || this.completions.size > 0, async (token) => {
      try {
        await this.completions.flush(this.store, token, (batch, rows) => countCompleted(this.between, batch, rows));
      } catch (e) {
        this.log.warn({ event: 'carried_flush_failed', holder_id: token.holderId, lease_epoch: token.leaseEpoch, sql_error: sqlErrorField(e),
          pending: this.completions.size }, 'completions not written under our unseen epoch; its row is kept');
      }
    });
    // Leadership lost (any reason): the schedule is dropped; a new epoch rebuilds from SQL.
    lease.onChange((c) => {
      if (c.kind === 'lost') {
        this.epoch = this.rebuildEpoch = null;
        this.refresher.reset();
        void this.notices?.stop();
      }
    });
  }

  /** Wake the leader when intents become due (PostgreSQL LISTEN/NOTIFY), listening only while this process
   *  leads. Best effort: a lost notice costs at most one refresh interval. */
  wakeOn(notices: DueNotices): void {
    this.notices = new DueNoticeListener(notices, () => this.nudged(), this.log);
  }

  /** Subscribed (or subscribing) to due-intent notices: only while this process leads. */
  get listeningForNotices(): boolean {
    return this.notices?.active ?? false;
  }

  /** Intents became due: refresh at once if a tick runs, else at the start of the next one. */
  nudged(): void {
    this.cadence.noticed();
    this.batch?.interrupt();
  }

  /** Run one bounded tick. Overlapping calls share the running tick instead of starting a second one.
   *  `nextTickInMs` (the timer: its next occurrence, from now): a tick that runs out while leading leaves a bridge
   *  running until the next tick, renewing when due until then. null: no tick follows, no bridge. */
  tick(budgetMs = this.settings.tickBudgetMs, nextTickInMs: number | null = null): Promise<TickSummary> {
    if (this.draining) return Promise.resolve(this.finish(emptySummary(this.lease.holderId), this.clock.nowMs(), 'draining'));
    this.running ??= this.runTick(budgetMs, nextTickInMs).finally(() => (this.running = null));
    return this.running;
  }

  /** Stop starting attempts, let the running tick finish what it began, write what is unwritten (under the newest
   *  token, the fence decides), and run no further ticks — until `untilMs` (monotonic) at most. true = nothing is
   *  left unwritten (shutdown may release the lease; LeaseManager.release keeps it otherwise). */
  async drain(untilMs = Number.POSITIVE_INFINITY): Promise<boolean> {
    this.draining = true;
    this.batch?.interrupt(); // an idle batch sees the stop request now, not at its next refresh
    const bounded = async (p: Promise<unknown> | null | undefined) => {
      const left = untilMs - this.clock.nowMs();
      if (!p || left <= 0) return;
      if (!Number.isFinite(left)) return void (await p.catch(() => {})); // (a timer of Infinity fires at once)
      const stop = new AbortController();
      await Promise.race([p.catch(() => {}), this.clock.sleep(left, stop.signal).catch(() => {})]);
      stop.abort();
    };
    await bounded(this.running);
    await bounded(this.bridge.ended()); // a bridge sees the stop request and closes like a tick
    await bounded(this.inFlight.settled()); // calls carried past the last tick
    if (this.settlerToken && (this.inFlight.size > 0 || this.completions.size > 0)) this.settle(this.settlerToken);
    await bounded(this.settler); // … and the writes of their completions
    await bounded(this.ops.maintenance?.settled()); // a maintenance statement the last tick did not wait for
    this.stopped = true;
    await this.notices?.stop();
    const written = this.inFlight.size === 0 && this.completions.size === 0;
    if (!written) {
      this.log.warn({ event: 'drain_unwritten', holder_id: this.lease.holderId, completions: this.completions.size, in_flight: this.inFlight.size },
        'results not written by the shutdown bound: the lease row is kept (not released); it expires, and the next leader may send them again');
    }
    return written;
  }

  private async runTick(budgetMs: number, nextTickInMs: number | null): Promise<TickSummary> {
    const called = this.clock.nowMs();
    await this.handOverRenewing();
    const t0 = this.clock.nowMs();
    const budgetEnd = t0 + budgetMs;
    const sum = emptySummary(this.lease.holderId);
    const token = await this.acquire(t0, budgetEnd);
    if (!token) return this.finish(sum, t0, 'follower');
    sum.role = 'leader';
    sum.leaseEpoch = token.leaseEpoch;
    this.notices?.ensureListening();
    this.settlerToken = token;
    const releaseDeferred = this.lease.deferRelease(); // a step-down's release waits for our completions
    let reason = 'sql_error';
    try {
      reason = await this.lead(token, budgetEnd, sum);
      return this.finish(sum, t0, reason);
    } finally {
      // Before our deferral ends (no gap in the cover): the bridge, or the settler for calls carried past the tick
      // and completions it could not write.
      if (nextTickInMs !== null && reason === 'deadline' && !this.draining && this.epoch === token.leaseEpoch
        && this.lease.ensureEpoch(token.leaseEpoch)) this.startBridge(token, called + nextTickInMs);
      else if (this.inFlight.size > 0 || this.completions.size > 0) this.settle(token);
      await releaseDeferred();
    }
  }

  /** The bridge hands over to this tick; meanwhile the tick renews on time. A bridge write held up (a slow or lost
   *  reply waits up to the client deadline) must not let the lease run out behind it: the next leader would send
   *  its 2xx again (campaign on 544d11c, every-instance: 18 re-sends). */
  private async handOverRenewing(): Promise<void> {
    if (!this.bridge.ended()) return;
    let handed = false;
    const handing = this.bridge.handOver().finally(() => (handed = true));
    while (!handed) {
      if (this.lease.requireLeader() && this.lease.renewDue()) await this.lease.renew();
      const stop = new AbortController();
      await Promise.race([handing, this.clock.sleep(HANDOVER_RENEW_POLL_MS, stop.signal).catch(() => {})]);
      stop.abort();
    }
    await handing;
  }

  /** `bridgeRenewsUntilMs`: null for a tick's batch; a bridge's renew horizon (the timer's next occurrence). */
  private newBatch(token: LeaseToken, budgetEnd: number, sum: TickSummary, bridgeRenewsUntilMs: number | null): Batch {
    const bridge = bridgeRenewsUntilMs !== null;
    return new Batch({
      lease: this.lease, store: this.store, provider: this.provider, settings: this.settings, clock: this.clock, log: this.log,
      random: this.random, ops: this.ops, refresher: this.refresher, completions: this.completions, cadence: this.cadence,
      guard: this.guard, inFlight: this.inFlight, stalls: this.stalls, renewsUntilMs: bridgeRenewsUntilMs ?? Number.POSITIVE_INFINITY,
      stopRequested: () => (this.draining ? 'draining' : bridge ? this.bridge.stopRequest() : null),
    }, token, budgetEnd, sum);
  }

  /** BRIDGE (tickBridge.ts): between two timer ticks the leader goes on refreshing and executing; its counts go to
   *  `between`, the next tick's summary. */
  private startBridge(token: LeaseToken, renewsUntilMs: number): void {
    const batch = this.newBatch(token, Number.POSITIVE_INFINITY, this.between, renewsUntilMs);
    this.batch = batch;
    this.bridge.start(token, batch, () => {
      if (this.batch === batch) this.batch = null;
      if (this.inFlight.size > 0 || this.completions.size > 0) this.settle(token);
    });
  }

  /** Unwritten results between ticks — calls carried past a tick, completions a tick could not write — are
   *  written by one background settler, under the newest token this process led under, whatever the gate says
   *  (a write under a valid fence is always safe): retried as soon as the database answers, until written, until
   *  the fence refuses (the row is not ours: they wait for this process's next epoch, which writes them before its
   *  orphan recovery), or until a batch runs (it writes them). The row is not released meanwhile (holdReleaseWhile);
   *  once they are written, the end of this deferral hands back a row dropped meanwhile. */
  private settle(token: LeaseToken): void {
    this.settlerToken = token;
    if (this.settler) return;
    const releaseDeferred = this.lease.deferRelease();
    this.settler = (async () => {
      try {
        await this.inFlight.settled();
        await this.writeUnwritten();
      } finally {
        this.settler = null;
        await releaseDeferred();
      }
    })();
  }

  /** The settler's loop: an SQL error drops leadership at once (as on any leader path) and is retried. */
  private async writeUnwritten(): Promise<void> {
    let pauseMs = SETTLE_RETRY_MS;
    while (!this.stopped && this.batch === null && this.completions.size > 0) {
      const token = this.settlerToken!;
      try {
        const out = await this.completions.flush(this.store, token, (batch, rows) => countCompleted(this.between, batch, rows));
        if (out === 'leaseLost') {
          if (this.lease.ensureEpoch(token.leaseEpoch)) this.lease.drop('fence_failed');
          return; // kept for this process's next epoch
        }
      } catch (e) {
        this.log.warn({ event: 'carried_flush_failed', holder_id: token.holderId, lease_epoch: token.leaseEpoch, sql_error: sqlErrorField(e),
          pending: this.completions.size }, 'completions not written; retrying under the same fence (the lease row is kept meanwhile)');
        if (this.lease.ensureEpoch(token.leaseEpoch)) this.lease.drop('sql_error', e);
        await this.clock.sleep(pauseMs);
        pauseMs = Math.min(2 * pauseMs, SETTLE_MAX_RETRY_MS);
      }
    }
  }

  /** ACQUIRE. Follower: if the holder's lease expires within this tick, try again right after it. */
  private async acquire(t0: number, budgetEnd: number): Promise<LeaseToken | null> {
    const token = await this.lease.tryAcquireOrRenew();
    if (token) return token;
    const wait = this.lease.followerRetryDelayMs();
    if (wait > 0 && t0 + wait + this.settings.minLeaderWorkMs < budgetEnd) {
      await this.clock.sleep(wait);
      return (await this.lease.tryAcquire()) ? this.lease.requireLeader() : null;
    }
    return null;
  }

  private deadline(budgetEnd: number): number {
    return Math.min(budgetEnd, this.clock.nowMs() + this.lease.remainingMs());
  }

  private async lead(token: LeaseToken, budgetEnd: number, sum: TickSummary): Promise<string> {
    try {
      if ((await this.carry(token, sum)) === 'leaseLost') return this.fenceFailed(sum);
      if (this.epoch !== token.leaseEpoch || this.refresher.rebuilding) {
        const built = await this.rebuild(token, budgetEnd, sum);
        if (built !== 'done') return built;
      }
      await this.ops.leaderTick(sum); // pause flag, handover request
      // MAINTENANCE (maintenance.ts): when a task is due, the batch leaves a slice at the tick's end for it.
      const maintenance = this.ops.maintenance;
      const slice = maintenance?.sliceMs(budgetEnd - this.clock.nowMs(), !this.ops.mayStart()) ?? 0;
      this.batch = this.newBatch(token, budgetEnd - slice, sum, null);
      let reason: string;
      try {
        reason = await this.batch.run();
      } finally {
        this.batch = null;
      }
      if (maintenance && slice > 0 && reason === 'deadline' && this.lease.ensureEpoch(token.leaseEpoch)) {
        if (this.inFlight.size > 0 || this.completions.size > 0) this.settle(token); // carried calls' completions are written meanwhile
        if ((await maintenance.run(token, sum, this.deadline(budgetEnd))) === 'leaseLost') return this.fenceFailed(sum);
      }
      return reason;
    } catch (e) {
      // Any SQL failure on the leader path is a connectivity failure: drop leadership, stop (spec).
      this.log.error({ event: 'executor_sql_error', holder_id: token.holderId, lease_epoch: token.leaseEpoch, sql_error: sqlErrorField(e) },
        'executor stopped on SQL error');
      this.lease.drop('sql_error', e);
      return 'sql_error';
    }
  }

  /** CARRY: completions left by an earlier tick (step-down, SQL error) are written before anything else —
   *  in particular before orphan recovery, which would otherwise abandon their attempts and send them again. */
  private async carry(token: LeaseToken, sum: TickSummary): Promise<'ok' | 'leaseLost'> {
    if (this.completions.size === 0) return 'ok';
    const n = this.completions.size;
    const out = await this.completions.flush(this.store, token, (batch, rows) => countCompleted(sum, batch, rows));
    if (out === 'ok') this.log[this.epoch === token.leaseEpoch ? 'debug' : 'info']({ event: 'completions_carried', holder_id: token.holderId, lease_epoch: token.leaseEpoch, count: n },
      'completions of an earlier tick written under this fence');
    return out === 'leaseLost' ? 'leaseLost' : 'ok';
  }

  /** REBUILD: orphan recovery once per epoch, then the full load until done or the tick deadline. */
  private async rebuild(token: LeaseToken, budgetEnd: number, sum: TickSummary): Promise<'done' | string> {
    if (this.rebuildEpoch !== token.leaseEpoch && !this.refresher.rebuilding) {
      const rec = await this.store.fencedRecoverOrphans(token);
      if (rec.kind === 'leaseLost') return this.fenceFailed(sum);
      sum.recovered = rec.value.recovered;
      await this.refresher.beginRebuild();
      this.rebuildEpoch = token.leaseEpoch;
    }
    const { done, stats } = await this.refresher.continueRebuild(this.deadline(budgetEnd));
    sum.rebuilt = true;
    sum.refreshedRows += stats.rows;
    // Leadership may have been lost while rebuilding: re-check before executing anything.
    if (!this.lease.ensureEpoch(token.leaseEpoch)) {
      this.refresher.reset();
      return 'lease_lost';
    }
    if (!done) return 'rebuilding'; // resumed by the next tick of this epoch
    this.epoch = token.leaseEpoch;
    this.cadence.loaded(this.clock.nowMs());
    return 'done';
  }

  private fenceFailed(sum: TickSummary): string {
    sum.leaseLost = true;
    this.lease.drop('fence_failed');
    return 'lease_lost';
  }

  private finish(sum: TickSummary, t0: number, stopReason: string): TickSummary {
    takeBetweenTicks(sum, this.between); // the bridge's and the settler's work since the last tick
    sum.stopReason = stopReason;
    if (stopReason === 'lease_lost') sum.leaseLost = true; // whichever check noticed first (fence, renew, gate)
    sum.durationMs = Math.round(this.clock.nowMs() - t0);
    sum.scheduleSize = this.refresher.schedule.size;
    this.ops.tickFinished(sum);
    return sum;
  }
}
