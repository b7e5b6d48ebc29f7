// What the executor's leader work keeps across ticks, bridges and epochs of this process, with one owner and named
// operations (its parts are private): provider calls in flight, started attempts waiting for a free slot (ready),
// completions not yet written, the refresh cadence, and the counts of work between ticks. Guarantees:
//  - calls in flight never exceed the concurrency; ready attempts are sent oldest first (START order) or aborted
//    (recorded here, never sent; a provider hold begun since its permit was taken aborts it); one holds its guard
//    permit until its call's result or its abort;
//  - every completion is recorded here (record) and every completion write goes through write(): one fenced road,
//    whose written rows return to the schedule in releaseWritten() (a schedule dropped with leadership ignores
//    them) and whose counts go to the summary given;
//  - the lease row is never released while anything is unwritten (LeaseManager.holdReleaseWhile); before handing
//    back an unseen epoch of ours, the lease manager has writeUnder() write what waits under it (the fence decides).
// Due intents a fenced START skipped return to the schedule separately, in starts.ts: no attempt was started, so
// there is no completion to write; only the schedule's claim goes back (with a short retry time), and the same rule
// holds there (a reset schedule ignores it).
import type { LeaseManager } from '../lease/leaseManager.js';
import type { Logger } from '../observability/logger.js';
import { sqlErrorField } from '../observability/logger.js';
import type { ProviderPermits } from '../provider/partitionPermits.js';
import { aborted } from '../provider/retryPolicy.js';
import { RefreshCadence, type CadenceStep } from '../schedule/cadence.js';
import type { ScheduleRefresher } from '../schedule/refresher.js';
import type { AttemptCompletion, CompletedAttempt, ExecutionStore, StartedAttempt } from '../store/intentPorts.js';
import type { LeaseToken } from '../store/ports.js';
import { CompletionBuffer, countCompleted, type FlushOutcome } from './completions.js';
import type { ExecutorOps } from './executorOps.js';
import { InFlightCalls } from './inFlight.js';
import { emptySummary, readyAhead, takeBetweenTicks, type ExecutorSettings, type TickSummary } from './tickSummary.js';

/** A started attempt waiting for a free slot: its epoch, and when its provider permit was taken (monotonic). */
interface Ready { token: LeaseToken; attempt: StartedAttempt; grantedAtMs: number }

export class ExecutionState {
  /** Completions not yet written, kept across ticks and epochs of this process. */
  private readonly completions: CompletionBuffer;
  /** Provider calls in flight, kept across ticks (counted against concurrency, awaited on a step-down). */
  private readonly inFlight = new InFlightCalls();
  /** Started attempts whose call is not sent yet, in the order their STARTs returned them. */
  private readonly ready: Ready[] = [];
  /** Refresh, notice tail reads and reconcile (a notice between ticks is read at the next step). */
  private readonly cadence: RefreshCadence;
  /** Counts of the work done between ticks (bridge, settler), added to the next tick's summary. */
  private readonly between: TickSummary;
  /** A send the guard refused: another partition's call ended, so the watching batch sends again (one closure). */
  private readonly onFree = (): void => this.inFlight.notify();

  constructor(lease: LeaseManager, private readonly store: ExecutionStore, private readonly refresher: ScheduleRefresher,
    private readonly settings: ExecutorSettings, private readonly log: Logger, ops: ExecutorOps) {
    this.completions = new CompletionBuffer((rows) => this.releaseWritten(rows), (c, e) => {
      ops.completionUnwritable?.();
      log.error({ event: 'completion_unwritable', holder_id: lease.holderId, intent_id: c.intentId, attempt_no: c.attemptNo,
        outcome: c.outcome, sql_error: sqlErrorField(e) }, 'the database refuses this completion: dropped (orphan recovery closes its attempt)');
    }, (token, kept) => {
      log.warn({ event: 'completions_fence_refused', holder_id: token.holderId, lease_epoch: token.leaseEpoch, kept },
        'the fence refused our completions (that epoch ended): kept for this process\'s next epoch; the next leader may send them again');
    });
    this.cadence = new RefreshCadence({ refreshIntervalMs: settings.refresh.intervalMs, reconcileIntervalMs: settings.reconcileIntervalMs });
    this.between = emptySummary(lease.holderId);
    lease.holdReleaseWhile(() => this.unwritten, (token) => this.writeUnder(token));
  }

  // --- calls in flight ---

  /** Track a provider call; when it settles it leaves the calls in flight, then the watching batch is woken. */
  track(call: Promise<void>): void {
    this.inFlight.add(call);
  }

  /** The batch to wake when a call finishes (one at a time; null: none). */
  watchCalls(listener: (() => void) | null): void {
    this.inFlight.watch(listener);
  }

  /** Provider calls in flight now. */
  get callsInFlight(): number {
    return this.inFlight.size;
  }

  /** Resolves once no call is in flight (calls added meanwhile are awaited too). Never rejects. */
  settled(): Promise<void> {
    return this.inFlight.settled();
  }

  // --- ready attempts (started, call not sent yet) ---

  /** A started attempt waits behind those queued before it (START order, so one partition key's intents are sent
   *  in submission order) until sendReady() finds a free slot. */
  queueReady(token: LeaseToken, a: StartedAttempt, grantedAtMs: number): void {
    this.ready.push({ token, attempt: a, grantedAtMs });
  }

  /** Started attempts waiting for a free slot. */
  get readyAttempts(): number {
    return this.ready.length;
  }

  /** How many permits a START may take beyond the provider's in-flight cap (`ahead`: as startRoom's). */
  aheadOfCap(ahead: boolean, callLimit = 0): number {
    return ahead ? readyAhead(this.slots(callLimit)) : 0;
  }

  /** The call slots a START counts: the concurrency, or the provider's in-flight cap where lower (`callLimit`, 0:
   *  none), with the start batch scaled to them (so a cap does not turn every freed call into a START). */
  private slots(callLimit: number): { concurrency: number; startBatch: number } {
    const { concurrency, startBatch } = this.settings;
    if (callLimit <= 0 || callLimit >= concurrency) return { concurrency, startBatch };
    return { concurrency: callLimit, startBatch: Math.min(startBatch, Math.max(1, Math.floor(callLimit / 4))) };
  }

  /** How many attempts a START may start now (0: none). `ahead` (a later batch sends what this one leaves ready): up to
   *  2 × startBatch beyond the free slots, refilled once fewer than startBatch are left (or nothing is in flight): a
   *  START of at least startBatch goes out while startBatch sends remain to cover its round trip, so a freed slot
   *  seldom waits for it. Otherwise only into free slots, once startBatch of them are free (or nothing is in flight):
   *  nothing is started that the batch's end would abort unsent. Slots and start batch: slots(callLimit). */
  startRoom(ahead: boolean, callLimit = 0): number {
    const { concurrency, startBatch } = this.slots(callLimit);
    const busy = this.inFlight.size + this.ready.length;
    if (!ahead) {
      const free = concurrency - busy;
      return free > 0 && (free >= startBatch || busy === 0) ? free : 0;
    }
    const free = concurrency + this.aheadOfCap(true, callLimit) - busy;
    return free > startBatch || (free > 0 && this.inFlight.size === 0) ? free : 0;
  }

  /** Send ready attempts, oldest first, while fewer than `concurrency` calls are in flight and the guard lets another
   *  call out (guard.beginCall: its in-flight cap bounds calls sent; never more); `send` is the call with its gate
   *  (callProvider, which gives the permit back as begun if it stops it). Those a provider hold keeps back
   *  (Retry-After, a breaker, now or begun since their permit was taken: guard.holdNow) are aborted instead.
   *  Returns how many were sent. */
  sendReady(send: (token: LeaseToken, a: StartedAttempt, grantedAtMs: number) => Promise<void>, guard: ProviderPermits | null): number {
    const hold = (r: Ready) => guard?.holdNow(r.grantedAtMs) ?? null;
    const first = this.ready.find((r) => hold(r) !== null);
    if (first) this.abortWhere((r) => hold(r) !== null, `provider calls held (${hold(first)})`, guard);
    let n = 0;
    for (; this.ready.length > 0 && this.inFlight.size < this.settings.concurrency && (guard?.beginCall(this.onFree) ?? true); n++) {
      const r = this.ready.shift()!;
      this.inFlight.add(send(r.token, r.attempt, r.grantedAtMs));
    }
    return n;
  }

  /** Abort the ready attempts (all, or those started under an epoch other than `keepEpoch`): none is sent, each is
   *  recorded aborted under its epoch (never charged as sent) and its permit goes back to `guard`. Returns how many. */
  abortReady(reason: string, guard: Pick<ProviderPermits, 'release'> | null, keepEpoch?: number): number {
    return this.abortWhere((r) => r.token.leaseEpoch !== keepEpoch, reason, guard);
  }

  private abortWhere(drop: (r: Ready) => boolean, reason: string, guard: Pick<ProviderPermits, 'release'> | null): number {
    const kept: Ready[] = [];
    const dropped: Ready[] = [];
    for (const r of this.ready) (drop(r) ? dropped : kept).push(r); // one pass: each entry either kept or recorded
    this.ready.splice(0, this.ready.length, ...kept);
    for (const r of dropped) {
      this.record({ ...aborted(r.attempt, reason), attemptEpoch: r.token.leaseEpoch });
      guard?.release(1, r.grantedAtMs);
    }
    return dropped.length;
  }

  // --- completions ---

  /** A completion (provider result or abort) to write under the fence; kept until written. */
  record(c: AttemptCompletion): void {
    this.completions.push(c);
  }

  /** Completions not yet written (pending, or on the wire now). */
  get pending(): number {
    return this.completions.size;
  }

  /** Results not yet written: ready attempts, calls in flight or completions waiting for the fence. */
  get unwritten(): boolean {
    return this.ready.length > 0 || this.inFlight.size > 0 || this.completions.size > 0;
  }

  /** A batch should write now: a full completion batch waits, or some wait and no call is out to add to them. */
  get flushDue(): boolean {
    const pending = this.completions.size;
    return pending >= this.settings.completionBatch || (pending > 0 && this.inFlight.size === 0);
  }

  /** Write the waiting completions under `token` (serialised, one fenced statement per batch), counting them in
   *  `sum`. Throws on an SQL error; 'leaseLost': the fence refused, they wait for this process's next epoch. */
  write(token: LeaseToken, sum: TickSummary): Promise<FlushOutcome> {
    return this.completions.flush(this.store, token, (batch, rows) => countCompleted(sum, batch, rows));
  }

  /** write() between ticks (the settler): counted in the counts between ticks. */
  writeBetweenTicks(token: LeaseToken): Promise<FlushOutcome> {
    return this.write(token, this.between);
  }

  // --- the counts between ticks ---

  /** Where a bridge batch counts its work (the next tick's summary takes it). */
  get betweenTicks(): TickSummary {
    return this.between;
  }

  /** Add the work done since the last tick (bridge, settler) to the tick's summary `sum`, and start counting anew. */
  takeBetweenTicks(sum: TickSummary): void {
    takeBetweenTicks(sum, this.between);
  }

  // --- the refresh cadence (one across ticks and the bridge) ---

  /** A due-intent notice arrived (between ticks too): a tail read at the next step. */
  noticed(): void {
    this.cadence.noticed();
  }

  /** A full load finished at `nowMs`: refresh and reconcile count from here. */
  loaded(nowMs: number): void {
    this.cadence.loaded(nowMs);
  }

  /** The refresh step to run now, recorded as begun (RefreshCadence.take; a reconcile in progress: its next page). */
  takeRefreshStep(nowMs: number): CadenceStep {
    return this.cadence.take(nowMs, this.refresher.reconciling);
  }

  /** The interval refresh takeRefreshStep() returned has been read, with the control row (RefreshCadence.refreshRead).
   *  Logged at debug with the database time of its read: what the pickup guarantee is judged by (an intent committed
   *  before one refresh's read_at is started before the next refresh's). */
  refreshRead(nowMs: number): void {
    this.cadence.refreshRead(nowMs);
    this.log.debug({ event: 'schedule_refreshed', read_at: this.refresher.lastReadAt?.toISOString() }, 'schedule refreshed');
  }

  /** A fenced START that started attempts took `ms` (RefreshCadence.startTook). */
  startTook(ms: number): void {
    this.cadence.startTook(ms);
  }

  /** How early each interval refresh begins, to cover the leader's measured pickup overhead (RefreshCadence). */
  get refreshLeadMs(): number {
    return this.cadence.refreshLeadMs;
  }

  /** How long an idle batch may sleep before takeRefreshStep() has a step (0: now). */
  untilRefreshStepMs(nowMs: number): number {
    return this.cadence.untilNextMs(nowMs, this.refresher.reconciling);
  }

  /** The one road back to the schedule: written rows (and a dropped completion's claim) release their claim,
   *  if the schedule still holds it (a schedule dropped with leadership ignores them). */
  private releaseWritten(rows: CompletedAttempt[]): void {
    for (const r of rows) this.refresher.schedule.release(r.intentId, r.row);
  }

  /** Before the lease manager hands back an unseen epoch of ours: write what waits under it (never throws). */
  private async writeUnder(token: LeaseToken): Promise<void> {
    try {
      await this.writeBetweenTicks(token);
    } catch (e) {
      this.log.warn({ event: 'carried_flush_failed', holder_id: token.holderId, lease_epoch: token.leaseEpoch, sql_error: sqlErrorField(e),
        pending: this.completions.size }, 'completions not written under our unseen epoch; its row is kept');
    }
  }
}
