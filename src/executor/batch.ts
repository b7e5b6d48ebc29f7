// One leader tick's batch, as a small state machine: RUNNING (refresh/renew at their intervals, fenced starts,
// provider calls, fenced completions, all overlapping) → CLOSING (nothing new starts; in-flight calls finish;
// their completions are written under the fence) → DONE (stop reason). Rules:
//  - a batch that ends at its deadline, or hands over to the next tick, still leading waits for no provider call:
//    its calls stay in flight in the ExecutionState and the next batch writes their completions (no gap);
//  - an SQL error anywhere closes the gate at once (LeaderFaults drops leadership before anything is awaited), so no call
//    is sent after it; the in-flight ones finish and their completions are still written under the fence (the
//    database decides); the row is released only once nothing is unwritten (LeaseManager.holdReleaseWhile);
//  - a completion is never dropped: what cannot be written now stays in the ExecutionState's completion buffer, and
//    the settler (settler.ts) keeps writing it under the same token after the tick; a START whose outcome is unknown
//    records its attempts as aborted there (never sent, so never charged as sent);
//  - a START may start up to 2 × startBatch attempts beyond the free slots when a later batch carries them: they wait
//    ready (ExecutionState, START order) and a freed slot sends the next at once, through the same gate, unless a
//    provider hold aborts them; carried with the calls, otherwise aborted at close before the completions are written
//    (nothing is sent after the stop);
//  - the batch stops starting at the tick deadline (min(budget, local lease deadline)); provider calls are
//    clipped to the lease deadline; closing retries the completion write only within a bounded window.
import type { Clock } from '../lease/clock.js';
import type { LeaseManager } from '../lease/leaseManager.js';
import type { ProviderPermits } from '../provider/partitionPermits.js';
import type { ScheduleRefresher } from '../schedule/refresher.js';
import type { ExecutionStore } from '../store/intentPorts.js';
import type { LeaseToken } from '../store/ports.js';
import type { ExecutionState } from './executionState.js';
import type { ExecutorOps } from './executorOps.js';
import type { LeaderFaults } from './leaderFaults.js';
import { callProvider, type ProviderCallDeps } from './providerCall.js';
import { refreshStep } from './refreshStep.js';
import { startDue } from './starts.js';
import type { ExecutorSettings, TickSummary } from './tickSummary.js';

/** Pause between two completion-write attempts within the closing window. */
const CLOSE_WRITE_RETRY_MS = 100;

/** What every batch of this executor uses, built once. */
export interface BatchDeps {
  lease: LeaseManager;
  store: ExecutionStore;
  settings: ExecutorSettings;
  clock: Clock;
  ops: ExecutorOps;
  refresher: ScheduleRefresher;
  /** Provider protection (rate, in-flight cap, Retry-After, breaker); asked before every fenced start. */
  guard: ProviderPermits | null;
  /** Kept across ticks and bridges: calls in flight, unwritten completions (and their one write road), the cadence. */
  state: ExecutionState;
  /** What a started attempt's provider call uses (providerCall.ts). */
  calls: ProviderCallDeps;
  /** An SQL error or a refused fence becomes a step-down there. */
  faults: LeaderFaults;
}

/** One batch's run: its token, when it stops starting, where it counts, and how it is stopped. */
export interface BatchRun {
  token: LeaseToken;
  /** Monotonic end of its budget (Infinity for a bridge: it runs until stopped or the local deadline). */
  budgetEnd: number;
  sum: TickSummary;
  /** Executor-level stop request (shutdown drain; 'next_tick': a bridge hands over to the tick that began). */
  stopRequested: () => string | null;
  /** Renew the lease when due until this monotonic time: Infinity for a tick's batch; a bridge between ticks, the
   *  timer's next occurrence. Past it the bridge runs under the lease it has, so a leader whose ticks stop coming
   *  steps down at its local deadline: at most one timer period + LEASE_DURATION_MS after its last tick began. */
  renewsUntilMs: number;
  /** A later batch sends what this one leaves ready at its deadline (a bridge, or the tick after a bridge): it may start
   *  beyond the free slots. Otherwise it starts only into free slots (a tick with no next occurrence). */
  startsAhead: boolean;
}

export class Batch {
  private starting: Promise<void> | null = null;
  private flushing: Promise<void> | null = null;
  private stop: string | null = null;
  private failure: unknown = null;
  private fenceRefused = false;
  private woken = false;
  private wake: () => void = () => {};
  /** Monotonic time before which the guard will grant nothing more (null: a finishing call wakes us). */
  private heldUntilMs: number | null = null;

  constructor(private readonly d: BatchDeps, private readonly r: BatchRun) {}

  private get token(): LeaseToken { return this.r.token; }
  private get sum(): TickSummary { return this.r.sum; }

  /** RUNNING until a stop reason, then CLOSING; resolves with the stop reason once everything begun has ended. */
  async run(): Promise<string> {
    this.d.state.watchCalls(this.callEnded);
    try {
      while (this.stop === null) {
        this.woken = false;
        try {
          await this.iteration();
        } catch (e) {
          this.fail(e);
        }
      }
      return await this.close();
    } finally {
      this.d.state.watchCalls(null);
    }
  }

  /** Re-evaluate now (a due-intent notice, a stop request): wakes an idle loop. */
  interrupt(): void {
    this.signal();
  }

  private get leading(): boolean {
    return this.d.lease.ensureEpoch(this.token.leaseEpoch);
  }

  private deadline(): number {
    return Math.min(this.r.budgetEnd, this.d.clock.nowMs() + this.d.lease.remainingMs());
  }

  private get renewing(): boolean {
    return this.d.clock.nowMs() < this.r.renewsUntilMs;
  }

  /** A START may start beyond the free slots: a later batch sends what this one leaves ready (BatchRun.startsAhead),
   *  in a bridge only while the next tick may still come (renewing), and no rate limit paces the calls (its tokens
   *  are taken at the START: started ahead, they could go out faster than the rate). */
  private get startsAhead(): boolean {
    return this.r.startsAhead && this.renewing && !(this.d.guard?.paced() ?? false);
  }

  private signal = (): void => {
    this.woken = true;
    this.wake();
  };

  /** A call ended: its slot sends the next ready attempt at once (sendReady), then the loop re-evaluates. */
  private callEnded = (): void => { this.sendReady(); this.signal(); };

  /** An SQL error on the leader path: drop leadership now (gate closed, before awaiting anything). */
  private fail(e: unknown): void {
    if (this.failure === null) {
      this.failure = e;
      this.d.faults.sqlError(this.token, e);
    }
    this.stop ??= 'sql_error';
    this.signal();
  }

  private fenceLost(): void {
    this.fenceRefused = true;
    this.d.faults.fenceRefusedLeading(this.token, this.sum);
    this.stop ??= 'lease_lost';
  }

  private background(work: () => Promise<void>, done: () => void): Promise<void> {
    return work().catch((e: unknown) => this.fail(e)).finally(() => {
      done();
      this.signal();
    });
  }

  private async iteration(): Promise<void> {
    const { lease, refresher, ops } = this.d;
    const now = this.d.clock.nowMs();
    const requested = this.r.stopRequested();
    if (now >= this.deadline()) this.stop = 'deadline';
    else if (requested) this.stop = requested;
    else if (ops.handoverRequest()) {
      this.stop = 'handover';
      this.d.guard?.shareChanged(); // the partition counts for no share from now (its lease waits for the calls to fit)
    }
    else if (!this.leading) this.stop = 'lease_lost';
    else if (this.renewing && lease.renewDue() && !(await this.renewWriting())) this.stop = 'lease_lost';
    if (this.stop !== null) return;

    this.sendReady(); // a carried ready queue goes out at the first iteration
    const { state } = this.d;
    await refreshStep(this.d, state.takeRefreshStep(now), this.sum, this.deadline());
    if (this.stop !== null) return;

    if (!this.flushing && state.flushDue) {
      this.flushing = this.background(() => this.flush(), () => (this.flushing = null));
    }
    const callLimit = this.d.guard?.callLimit() ?? 0;
    const ahead = this.startsAhead;
    const free = state.startRoom(ahead, callLimit);
    // A start rests on flags this iteration found fresh (read within one refresh interval of now, none after a stall
    // or a late reply); an intent that fell due after that check waits for the next iteration's (null: not asked).
    let fresh: boolean | null = null;
    if (free > 0 && this.startIsDue()) {
      fresh = await ops.freshControl();
      if (this.stop !== null) return;
    }
    // (re-checked after that read: a handover or hand-back it brought, or the deadline it ran into, starts nothing)
    const canStart = free > 0 && ops.mayStart() && !ops.handoverRequest() && this.d.clock.nowMs() < this.deadline();
    const due = canStart && this.leading && this.startIsDue();
    // Due, but no control read was answered within one interval (control_read_late): held, and idle below as if
    // nothing could start (the next refresh step reads again), not read again at once (two reads per 1 ms spin).
    const stale = due && fresh === false;
    if (stale) ops.staleControlHeld('start');
    let held = false;
    if (due && fresh === true) {
      // Provider protection decides how many may start; held back means no attempt row, so no attempt used.
      const grantedAt = this.d.clock.nowMs();
      // Refused by the process's cap: woken when room frees (another partition's call may hold it), not at the next step.
      const grant = this.d.guard ? this.d.guard.acquire(free, state.aheadOfCap(ahead, callLimit), this.signal)
        : { granted: free, retryAtMs: null };
      if (grant.granted > 0) this.starting = this.background(() => this.start(grant.granted, grantedAt), () => (this.starting = null));
      held = grant.granted === 0;
      this.heldUntilMs = held ? grant.retryAtMs : null;
    }
    if (this.woken || this.stop !== null) return;

    // Idle until the next thing to do: a completion or finished batch, the next refresh, a renew, the next due intent
    // (only if we could start it now; otherwise a completion wakes us), the guard's next grant, the deadline.
    const nextDue = refresher.schedule.nextDueMs();
    const untilDue = held ? (this.heldUntilMs === null ? Infinity : this.heldUntilMs - this.d.clock.nowMs())
      : nextDue === undefined || !canStart || stale || this.starting ? Infinity : nextDue - refresher.dbNowMs();
    const untilStep = state.untilRefreshStepMs(this.d.clock.nowMs());
    const untilRenew = this.renewing ? this.d.lease.renewDueInMs() : Infinity; // renewed on time while idle too
    const waitMs = Math.max(1, Math.min(untilStep, untilDue, untilRenew, this.deadline() - this.d.clock.nowMs()));
    const woke = new Promise<void>((r) => (this.wake = r));
    if (!this.woken) await Promise.race([this.d.clock.sleep(waitMs), woke]);
  }

  /** A START is due: none is in flight (one at a time) and the schedule's earliest intent is due in database time.
   *  Asked before the control read a start rests on and again after it (time has passed meanwhile). */
  private startIsDue(): boolean {
    const { schedule } = this.d.refresher;
    return this.starting === null && (schedule.nextDueMs() ?? Infinity) <= this.d.refresher.dbNowMs();
  }

  private async flush(): Promise<void> {
    if ((await this.d.state.write(this.token, this.sum)) === 'leaseLost') this.fenceLost();
  }

  /** Fenced start (starts.ts): a started attempt's call joins the calls in flight (a finished one wakes us). */
  private async start(granted: number, grantedAtMs: number): Promise<void> {
    const { state, clock } = this.d;
    const t0 = clock.nowMs();
    let calls = 0;
    let held: Promise<void> | null = null;
    await startDue(this.d, this.token, granted, this.sum, { call: (a) => { calls++; state.queueReady(this.token, a, grantedAtMs); this.sendReady(); },
      refused: () => this.fenceLost(), held: (by, n) => (held = this.d.ops.startHeld(by, n)) }, grantedAtMs);
    await held; // the flags read now: the next iteration drains or holds (no START every few ms meanwhile)
    if (calls > 0) state.startTook(clock.nowMs() - t0); // part of the pickup overhead the refresh cadence covers
  }

  /** Ready attempts into the free slots (ExecutionState.sendReady), each through the gate just before its call, under
   *  its epoch: while running or ending with its calls carried, never once another stop is due (asked first: a drain
   *  or handover requested after the deadline counts too). */
  private sendReady(): void {
    const { calls, lease, guard } = this.d;
    if (this.sendStopped() !== null) return;
    this.d.state.sendReady((t, a, grantedAtMs) =>
      callProvider(calls, t, a, () => lease.ensureEpoch(t.leaseEpoch), () => this.sendStopped(), grantedAtMs), guard);
  }

  /** Why nothing may be sent now (null: it may): a stop other than the deadline or the next tick's hand-over, a
   *  handover request, a failure or refused fence, leadership lost. Asked again by the gate after its control read. */
  private sendStopped(): string | null {
    const carried = (x: string | null) => x === null || x === 'deadline' || x === 'next_tick';
    const requested = this.r.stopRequested();
    if (!carried(requested)) return `stop requested (${requested})`;
    if (this.d.ops.handoverRequest()) return 'handover requested';
    if (!carried(this.stop)) return `the batch stopped (${this.stop})`;
    if (this.failure !== null || this.fenceRefused || !this.leading) return 'leadership lost';
    return null;
  }

  /** Await `work` (in-flight calls, the last writes) while still renewing the lease when due, so a long close
   *  (a provider call up to its timeout) does not run into the local deadline and cost the next tick an epoch. */
  private async keepingLease(work: Promise<unknown>): Promise<void> {
    let done = false;
    const finished = work.then(() => (done = true), () => (done = true));
    while (!done) {
      await Promise.race([finished, this.d.clock.sleep(50)]);
      if (!done && this.renewing && this.stop !== 'sql_error' && this.leading && this.d.lease.renewDue()) await this.renewWriting();
    }
  }

  /** Renew, writing the completions that arrive meanwhile: a renew whose reply is late (lost, held until the client
   *  deadline) must not hold back results the fence still accepts, or the row may expire first and the next leader
   *  recover their attempts and send them again. Resolves with the renew's outcome (it never throws). */
  private async renewWriting(): Promise<boolean> {
    const renew = { done: false, ok: false };
    const renewal = this.d.lease.renew().then((ok) => Object.assign(renew, { done: true, ok }), () => (renew.done = true));
    while (!renew.done) {
      if (!this.flushing && this.d.state.pending > 0) this.flushing = this.background(() => this.flush(), () => (this.flushing = null));
      const woke = new Promise<void>((r) => (this.wake = r)); // a finished call or flush
      await Promise.race([renewal, woke]);
    }
    return renew.ok;
  }

  /** The batch simply ran out (deadline, the next tick took over) with leadership and the fence intact: calls in
   *  flight are carried into the next batch instead of being awaited, so closing takes no provider time. */
  private get carriesCalls(): boolean {
    return (this.stop === 'deadline' || this.stop === 'next_tick') && this.failure === null && !this.fenceRefused && this.leading;
  }

  /** CLOSING: nothing new starts; wait for what runs (unless carried); write the completions (bounded retries
   *  under the fence). */
  private async close(): Promise<string> {
    const carry = this.carriesCalls;
    // In order: a start still in flight adds its calls to the calls in flight only when it returns.
    await this.keepingLease((async () => {
      await this.starting;
      if (!carry) this.d.state.abortReady(`the batch stopped (${this.stop})`, this.d.guard); // before its completions are written
      if (!carry) await this.d.state.settled();
      await this.flushing;
    })());
    const { clock, settings } = this.d;
    // Retry within the closing window while the fence has not refused the token (the database decides whether
    // it is still good, also past the local deadline: a write under a valid fence is always safe); what is
    // left stays buffered: the executor's settler goes on writing it after the tick, and the row is kept meanwhile.
    const until = clock.nowMs() + (settings.settleWindowMs ?? 1_000);
    while (this.d.state.pending > 0 && !this.fenceRefused) {
      try {
        await this.flush();
      } catch (e) {
        this.fail(e);
        if (clock.nowMs() + CLOSE_WRITE_RETRY_MS >= until) break;
        await clock.sleep(CLOSE_WRITE_RETRY_MS);
      }
    }
    if (this.stop === 'handover' && this.failure === null && !this.fenceRefused && this.d.state.pending === 0) {
      const req = this.d.ops.handoverRequest();
      // In-flight work is written: report it, then hand the row back (no stand-down: anyone may acquire).
      if (req) await this.d.ops.handoverCompleted(this.token, req.requestId);
      await this.d.lease.release();
    }
    // A failure while closing (a carried tick's last start or flush) is what the tick reports, not its deadline.
    if (this.failure !== null) return 'sql_error';
    if (this.fenceRefused) return 'lease_lost';
    return this.stop ?? 'deadline';
  }
}
