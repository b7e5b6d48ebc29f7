// What the executor's leader work keeps across ticks, bridges and epochs of this process, with one owner:
// provider calls in flight, completions not yet written, the stalls seen while calls are out, the refresh cadence,
// and the counts of work between ticks. Guarantees:
//  - every completion write goes through write(): one fenced road, whose written rows return to the schedule in
//    releaseWritten() (a schedule dropped with leadership ignores them) and whose counts go to the summary given;
//  - the lease row is never released while anything is unwritten (LeaseManager.holdReleaseWhile); before handing
//    back an unseen epoch of ours, the lease manager has writeUnder() write what waits under it (the fence decides).
import type { Clock } from '../lease/clock.js';
import type { LeaseManager } from '../lease/leaseManager.js';
import type { Logger } from '../observability/logger.js';
import { sqlErrorField } from '../observability/logger.js';
import { RefreshCadence } from '../schedule/cadence.js';
import type { ScheduleRefresher } from '../schedule/refresher.js';
import type { CompletedAttempt, ExecutionStore } from '../store/intentPorts.js';
import type { LeaseToken } from '../store/ports.js';
import { CompletionBuffer, countCompleted, type FlushOutcome } from './completions.js';
import type { ExecutorOps } from './executorOps.js';
import { InFlightCalls } from './inFlight.js';
import { StallWatch } from './stallWatch.js';
import { emptySummary, type ExecutorSettings, type TickSummary } from './tickSummary.js';

export class ExecutionState {
  /** Completions not yet written, kept across ticks and epochs of this process. */
  readonly completions: CompletionBuffer;
  /** Provider calls in flight, kept across ticks (counted against concurrency, awaited on a step-down). */
  readonly inFlight = new InFlightCalls();
  /** Stalls of this process while calls are out (a timeout they caused is not the provider's failure). */
  readonly stalls: StallWatch;
  /** Refresh, notice tail reads and reconcile (a notice between ticks is read at the next step). */
  readonly cadence: RefreshCadence;
  /** Counts of the work done between ticks (bridge, settler), added to the next tick's summary. */
  readonly between: TickSummary;

  constructor(lease: LeaseManager, private readonly store: ExecutionStore, private readonly refresher: ScheduleRefresher,
    private readonly settings: ExecutorSettings, clock: Clock, private readonly log: Logger, ops: ExecutorOps) {
    this.completions = new CompletionBuffer((rows) => this.releaseWritten(rows), (c, e) => {
      ops.completionUnwritable?.();
      log.error({ event: 'completion_unwritable', holder_id: lease.holderId, intent_id: c.intentId, attempt_no: c.attemptNo,
        outcome: c.outcome, sql_error: sqlErrorField(e) }, 'the database refuses this completion: dropped (orphan recovery closes its attempt)');
    }, (token, kept) => {
      log.warn({ event: 'completions_fence_refused', holder_id: token.holderId, lease_epoch: token.leaseEpoch, kept },
        'the fence refused our completions (that epoch ended): kept for this process\'s next epoch; the next leader may send them again');
    });
    this.stalls = new StallWatch(clock);
    this.cadence = new RefreshCadence({ refreshIntervalMs: settings.refresh.intervalMs, reconcileIntervalMs: settings.reconcileIntervalMs });
    this.between = emptySummary(lease.holderId);
    lease.holdReleaseWhile(() => this.unwritten, (token) => this.writeUnder(token));
  }

  /** Results not yet written: calls in flight or completions waiting for the fence. */
  get unwritten(): boolean {
    return this.inFlight.size > 0 || this.completions.size > 0;
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

  /** CARRY: completions left by an earlier tick (step-down, SQL error) are written before anything else —
   *  in particular before orphan recovery, which would otherwise abandon their attempts and send them again.
   *  `sameEpoch`: logged at debug if the schedule is still this epoch's once written (info otherwise). */
  async carry(token: LeaseToken, sum: TickSummary, sameEpoch: () => boolean): Promise<'ok' | 'leaseLost'> {
    if (this.completions.size === 0) return 'ok';
    const n = this.completions.size;
    const out = await this.write(token, sum);
    if (out === 'ok') this.log[sameEpoch() ? 'debug' : 'info']({ event: 'completions_carried', holder_id: token.holderId, lease_epoch: token.leaseEpoch, count: n },
      'completions of an earlier tick written under this fence');
    return out === 'leaseLost' ? 'leaseLost' : 'ok';
  }

  /** The one road back to the schedule: written rows (and a dropped completion's claim) release their claim,
   *  if the schedule still holds it (a schedule dropped with leadership ignores them). */
  private releaseWritten(rows: CompletedAttempt[]): void {
    for (const r of rows) this.refresher.schedule.release(r.intentId, r.row);
  }

  /** Before the lease manager hands back an unseen epoch of ours: write what waits under it (never throws). */
  private async writeUnder(token: LeaseToken): Promise<void> {
    try {
      await this.write(token, this.between);
    } catch (e) {
      this.log.warn({ event: 'carried_flush_failed', holder_id: token.holderId, lease_epoch: token.leaseEpoch, sql_error: sqlErrorField(e),
        pending: this.completions.size }, 'completions not written under our unseen epoch; its row is kept');
    }
  }
}
