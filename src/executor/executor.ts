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
// A tick that simply runs out while leading carries its calls in flight into the next tick (ExecutionState); when
// the timer drives it (a next tick follows), a BRIDGE batch keeps refreshing and executing until that tick begins
// — late or skipped occurrences too — or the local lease deadline. The bridge renews when due until the timer's
// next occurrence, then no more: a leader whose ticks stop coming steps down at most one timer period + the lease
// after its last tick began. A leader keeps its refresh and renew cadence from its first refresh to its step-down.
// Work between ticks counts in the next tick's summary.
import type { LeaseManager } from '../lease/leaseManager.js';
import type { Clock } from '../lease/clock.js';
import type { Logger } from '../observability/logger.js';
import type { Provider } from '../provider/provider.js';
import { ScheduleRefresher } from '../schedule/refresher.js';
import type { ExecutionStore } from '../store/intentPorts.js';
import type { LeaseToken } from '../store/ports.js';
import { emptySummary, type ExecutorSettings, type TickSummary } from './tickSummary.js';
import { NO_OPS, type ExecutorOps } from './executorOps.js';
import { Batch, type BatchDeps } from './batch.js';
import { TickBridge } from './tickBridge.js';
import type { ProviderPermits } from '../provider/partitionPermits.js';
import { ExecutionState } from './executionState.js';
import { LeaderFaults } from './leaderFaults.js';
import { Settler } from './settler.js';
import { DueNoticeListener, type DueNotices } from './dueNotices.js';
import { StallWatch } from './stallWatch.js';
import { EpochLayout } from './epochLayout.js';

export type { ExecutorSettings, TickSummary };

export class Executor {
  /** The epoch whose schedule is complete (null: rebuild needed). */
  private epoch: number | null = null;
  /** The epoch whose orphans were recovered and whose rebuild has begun (it may span ticks). */
  private rebuildEpoch: number | null = null;
  /** Calls in flight, unwritten completions, the cadence and the counts between ticks: one owner. */
  private readonly state: ExecutionState;
  /** Read-only views (tests): completions not yet written, and provider calls in flight, of this process. */
  readonly completions: { readonly size: number };
  readonly inFlight: { readonly size: number; settled(): Promise<void> };
  private readonly faults: LeaderFaults;
  /** Writes what is unwritten between ticks (settler.ts). */
  private readonly settler: Settler;
  /** What every batch uses, built once. */
  private readonly deps: BatchDeps;
  private batch: Batch | null = null;
  /** The batch running between two timer ticks. */
  private readonly bridge: TickBridge;
  private notices: DueNoticeListener | null = null;
  /** The layout generation of the current epoch, sent beside partition and epoch (epochLayout.ts; readFrom: where). */
  readonly layout = new EpochLayout();
  private running: Promise<TickSummary> | null = null;
  private draining = false;
  readonly refresher: ScheduleRefresher;

  constructor(
    private readonly lease: LeaseManager,
    private readonly store: ExecutionStore,
    provider: Provider,
    private readonly settings: ExecutorSettings,
    private readonly clock: Clock,
    private readonly log: Logger,
    random: () => number = Math.random,
    private readonly ops: ExecutorOps = NO_OPS,
    /** Provider protection shared by every tick of this process (null: none). */
    readonly guard: ProviderPermits | null = null,
  ) {
    this.refresher = new ScheduleRefresher(store, settings.refresh, clock);
    this.state = new ExecutionState(lease, store, this.refresher, settings, log, ops); // holds the row while unwritten
    const { state } = this;
    this.completions = { get size() { return state.pending; } };
    this.inFlight = { get size() { return state.callsInFlight; }, settled: () => state.settled() };
    this.faults = new LeaderFaults(lease, log);
    this.settler = new Settler(state, this.faults, lease, clock, () => this.batch !== null);
    this.bridge = new TickBridge(lease, clock, log, this.faults);
    // The stall watch belongs to the provider calls (the only ones who read it), one for this process.
    this.deps = { lease, store, settings, clock, ops, refresher: this.refresher, guard, state, faults: this.faults,
      calls: { provider, settings, clock, random, lease, guard, stalls: new StallWatch(clock), ops, state, layout: this.layout } };
    // Leadership lost (any reason): the schedule is dropped; a new epoch rebuilds from SQL.
    lease.onChange((c) => {
      if (c.kind === 'lost') {
        this.epoch = this.rebuildEpoch = null;
        this.refresher.reset();
        this.layout.reset();
        void this.notices?.stop();
      }
    });
  }

  /** Draining, or a handover / hand-back is requested: this partition starts nothing more and counts for no share of
   *  the provider limits (clusterGuard.ts). */
  get handingBack(): boolean {
    return this.draining || this.ops.handoverRequest() !== null;
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
    this.state.noticed();
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
    this.guard?.shareChanged(); // from now on this partition counts for no share of the provider limits
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
    this.state.abortReady('draining', this.guard); // (already aborted by a batch that closed: no batch sends them now)
    await bounded(this.state.settled()); // calls carried past the last tick
    await bounded(this.settler.settleNewest()); // … and the writes of their completions
    await bounded(this.ops.maintenance?.settled()); // a maintenance statement the last tick did not wait for
    this.settler.stop();
    await this.notices?.stop();
    const written = !this.state.unwritten;
    if (!written) {
      const { pending: completions, callsInFlight: in_flight } = this.state;
      this.log.warn({ event: 'drain_unwritten', holder_id: this.lease.holderId, completions, in_flight },
        'results not written by the shutdown bound: the lease row is kept (not released); it expires, and the next leader may send them again');
    }
    return written;
  }

  private async runTick(budgetMs: number, nextTickInMs: number | null): Promise<TickSummary> {
    const called = this.clock.nowMs();
    await this.bridge.handOver(); // renewing when due meanwhile
    const t0 = this.clock.nowMs();
    const budgetEnd = t0 + budgetMs;
    const sum = emptySummary(this.lease.holderId);
    const token = await this.acquire(t0, budgetEnd);
    // Carried ready attempts with no batch of their epoch next: aborted, written by the settler (its last run may be over) or CARRY.
    if (!token && this.state.abortReady('not leading', this.guard) > 0) void this.settler.settleNewest();
    if (!token) return this.finish(sum, t0, 'follower');
    this.state.abortReady('a new epoch began', this.guard, token.leaseEpoch); // before CARRY, so before orphan recovery
    sum.role = 'leader';
    sum.leaseEpoch = token.leaseEpoch;
    this.notices?.ensureListening();
    this.settler.ledUnder(token);
    const releaseDeferred = this.lease.deferRelease(); // a step-down's release waits for our completions
    let reason = 'sql_error';
    try {
      reason = await this.lead(token, budgetEnd, sum, nextTickInMs !== null);
      return this.finish(sum, t0, reason);
    } finally {
      // Before our deferral ends (no gap in the cover): the bridge, or the settler for calls carried past the tick
      // and completions it could not write.
      if (nextTickInMs !== null && reason === 'deadline' && !this.draining && this.epoch === token.leaseEpoch
        && this.lease.ensureEpoch(token.leaseEpoch)) this.startBridge(token, called + nextTickInMs);
      else {
        this.state.abortReady('no batch follows', this.guard); // carried ready attempts: only a batch sends them
        if (this.state.unwritten) this.settler.settle(token);
      }
      await releaseDeferred();
    }
  }

  /** `bridgeRenewsUntilMs`: null for a tick's batch; a bridge's renew horizon (the timer's next occurrence). */
  private newBatch(token: LeaseToken, budgetEnd: number, sum: TickSummary, bridgeRenewsUntilMs: number | null, startsAhead: boolean): Batch {
    const bridge = bridgeRenewsUntilMs !== null;
    return new Batch(this.deps, {
      token, budgetEnd, sum, renewsUntilMs: bridgeRenewsUntilMs ?? Number.POSITIVE_INFINITY, startsAhead,
      stopRequested: () => (this.draining ? 'draining' : bridge ? this.bridge.stopRequest() : null),
    });
  }

  /** BRIDGE (tickBridge.ts): between two timer ticks the leader goes on refreshing and executing; its counts go to
   *  the counts between ticks, the next tick's summary. */
  private startBridge(token: LeaseToken, renewsUntilMs: number): void {
    const batch = this.newBatch(token, Number.POSITIVE_INFINITY, this.state.betweenTicks, renewsUntilMs, true); // the next tick sends what it leaves
    this.batch = batch;
    this.bridge.start(token, batch, () => {
      if (this.batch === batch) this.batch = null;
      if (this.bridge.stopRequest() !== 'next_tick') this.state.abortReady('the bridge ended', this.guard); // else the tick sends them
      if (this.state.unwritten) this.settler.settle(token);
    });
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

  /** `bridged`: a bridge may follow this tick (the timer has a next occurrence), to send what its batch leaves ready. */
  private async lead(token: LeaseToken, budgetEnd: number, sum: TickSummary, bridged: boolean): Promise<string> {
    try {
      if ((await this.carry(token, sum)) === 'leaseLost') return this.faults.fenceRefusedLeading(token, sum);
      if (this.epoch !== token.leaseEpoch || this.refresher.rebuilding) {
        const built = await this.rebuild(token, budgetEnd, sum);
        if (built !== 'done') return built;
      }
      await this.ops.leaderTick(sum); // pause flag, handover request
      // MAINTENANCE (maintenance.ts): when a task is due, the batch leaves a slice at the tick's end for it.
      const maintenance = this.ops.maintenance;
      const slice = maintenance?.sliceMs(budgetEnd - this.clock.nowMs(), !this.ops.mayStart()) ?? 0;
      // Started ahead only when a bridge can send them at once: not before a maintenance slice (they would wait through it).
      this.batch = this.newBatch(token, budgetEnd - slice, sum, null, bridged && slice === 0);
      let reason: string;
      try {
        reason = await this.batch.run();
      } finally {
        this.batch = null;
      }
      if (maintenance && slice > 0 && reason === 'deadline' && this.lease.ensureEpoch(token.leaseEpoch)) {
        if (this.state.unwritten) this.settler.settle(token); // carried calls' completions are written meanwhile
        if ((await maintenance.run(token, sum, this.deadline(budgetEnd))) === 'leaseLost') return this.faults.fenceRefusedLeading(token, sum);
      }
      return reason;
    } catch (e) {
      // Any SQL failure on the leader path is a connectivity failure: drop leadership, stop (spec).
      this.faults.sqlError(token, e);
      return 'sql_error';
    }
  }

  /** CARRY: completions left by an earlier tick (step-down, SQL error) are written before anything else — in
   *  particular before orphan recovery, which would otherwise abandon their attempts and send them again. Logged at
   *  debug if the schedule is still this epoch's once written (info otherwise: a new epoch carried them). */
  private async carry(token: LeaseToken, sum: TickSummary): Promise<'ok' | 'leaseLost'> {
    const n = this.state.pending;
    if (n === 0) return 'ok';
    const out = await this.state.write(token, sum);
    if (out === 'ok') this.log[this.epoch === token.leaseEpoch ? 'debug' : 'info']({ event: 'completions_carried', holder_id: token.holderId,
      lease_epoch: token.leaseEpoch, count: n }, 'completions of an earlier tick written under this fence');
    return out === 'leaseLost' ? 'leaseLost' : 'ok';
  }

  /** REBUILD: orphan recovery once per epoch, then the full load until done or the tick deadline. */
  private async rebuild(token: LeaseToken, budgetEnd: number, sum: TickSummary): Promise<'done' | string> {
    if (this.rebuildEpoch !== token.leaseEpoch && !this.refresher.rebuilding) {
      const rec = await this.store.fencedRecoverOrphans(token);
      if (rec.kind === 'leaseLost') return this.faults.fenceRefusedLeading(token, sum);
      sum.recovered = rec.value.recovered;
      await this.layout.readFor(token.leaseEpoch); // after the acquire, before any start of this epoch (epochLayout.ts)
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
    this.state.loaded(this.clock.nowMs());
    return 'done';
  }

  private finish(sum: TickSummary, t0: number, stopReason: string): TickSummary {
    this.state.takeBetweenTicks(sum); // the bridge's and the settler's work since the last tick
    sum.stopReason = stopReason;
    if (stopReason === 'lease_lost') sum.leaseLost = true; // whichever check noticed first (fence, renew, gate)
    sum.durationMs = Math.round(this.clock.nowMs() - t0);
    sum.scheduleSize = this.refresher.schedule.size;
    sum.refreshLeadMs = Math.round(this.state.refreshLeadMs * 10) / 10; // 0.1 ms: an idle PGlite read is under 1 ms
    this.ops.tickFinished(sum);
    return sum;
  }
}
