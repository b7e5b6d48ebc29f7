// Provider protection for the cluster (issue 25): one ProviderGuard per process, shared by its partitions' executors,
// and — whenever the RECORDED partition count (the layout as last read from SQL) is above 1, whatever this process's
// EXECUTOR_PARTITIONS — tied to the other processes' guards in two ways, neither costing a statement per call:
// - limits: the guard uses this process's share of the cluster-wide rate and in-flight cap, from the partitions it
//   leads and is not handing back (`counted`, guardShare.ts), re-read at each grant and at each leadership change.
//   The leases keep one leader per partition, and a lease is released only once this process's calls fit the share
//   of the partitions it keeps (`fits`, LeaseManager.releaseWhenFits), so the shares add up to the limits.
// - holds: a breaker this process opens is recorded with when it closes again, a Retry-After pause with when it ends
//   (both in the provider_state row of LEASE_NAME, database time); while this process leads any partition it reads that
//   row every `syncMs` (SCHEDULE_REFRESH_INTERVAL_MS) and holds back until then too. Staleness: a hold opened elsewhere
//   stops this process's calls at most syncMs + one read + the opener's one write after it opened (calls already
//   sent finish). Best effort: a failed read or write is logged and the next interval tries again; meanwhile each
//   process still has its own breaker and Retry-After pause.
// With a recorded count of 1 the share is the configured limits and no hold is read or recorded (the breaker state
// still is, for the dashboard).
import type { Clock } from '../lease/clock.js';
import { RepeatLog } from '../lease/repeatLog.js';
import type { GuardSettings } from '../limits.js';
import { sqlErrorField, type Logger } from '../observability/logger.js';
import type { AppMetrics } from '../observability/metrics.js';
import type { OpsStore } from '../store/opsPorts.js';
import { ProviderGuard } from './guard.js';
import { fitsShare, ownPart, shareOf } from './guardShare.js';
import { partitionPermits, type ProviderPermits } from './partitionPermits.js';

export interface ClusterGuardSettings {
  guard: GuardSettings;
  /** The recorded partition count now (the layout as last read: it changes at run time). */
  partitionCount: () => number;
  /** LEASE_NAME: the provider_state row of the cluster. */
  leaseName: string;
  holderId: string;
  /** How often a leading process reads the holds others recorded (SCHEDULE_REFRESH_INTERVAL_MS). */
  syncMs: number;
  /** Permits each partition's executor may hold beyond its part of the in-flight cap (GuardOptions). */
  aheadPerPartition: number;
}

export interface ClusterGuard {
  guard: ProviderGuard;
  /** Partition k's permits of the guard: with a recorded count above 1, at most its own part of the in-flight cap
   *  (partitionInFlightQuota, at least 1) of its calls at once, so no partition of this process starves another. */
  permitsFor(k: number): ProviderPermits;
  /** The release condition: this process's calls sent (not its attempts waiting to be sent) fit the share of the
   *  partitions `counted()` gives now (those it keeps); nothing kept, none in flight. */
  fits(): boolean;
  /** Stop reading the holds (close). */
  stop(): Promise<void>;
}

type HoldStore = Pick<OpsStore, 'recordProviderBreaker' | 'recordProviderPause' | 'getProviderHold'>;

/** The process's guard; `counted()` gives the partitions below the recorded count that this process leads and is not
 *  handing back (draining, handing back, releasing) now. */
export function createClusterGuard(s: ClusterGuardSettings, store: HoldStore, clock: Clock, logger: Logger, metrics: AppMetrics,
  counted: () => readonly number[]): ClusterGuard {
  const shared = () => s.partitionCount() > 1;
  const warnRecordFailed = (what: string) => (e: unknown) =>
    logger.warn({ event: 'provider_breaker_record_failed', sql_error: sqlErrorField(e) }, `could not record the ${what}`);
  const atStart = s.partitionCount();
  if (atStart > 1 && s.guard.maxInFlight > 0 && s.guard.maxInFlight < atStart) {
    logger.warn({ event: 'provider_in_flight_below_partitions', max_in_flight: s.guard.maxInFlight, partitions: atStart },
      `PROVIDER_MAX_IN_FLIGHT (${s.guard.maxInFlight}) is below the recorded partition count (${atStart}): ${atStart - s.guard.maxInFlight} ` +
      'partitions carry no permit and a process leading only such partitions still sends one call at a time, so the cluster ' +
      `may have up to ${s.guard.maxInFlight} + (processes leading only permit-less partitions, at most ${atStart - s.guard.maxInFlight}) in flight`);
  }
  const guard = new ProviderGuard(s.guard, clock, (state) => {
    metrics.breakerChanged(state);
    logger.warn({ event: 'provider_breaker', state }, `provider circuit breaker ${state}`);
    // Recorded in SQL so every instance (the dashboard) shows it and, with several partitions, every leader holds back
    // until it closes; best effort, never blocks the executor.
    store.recordProviderBreaker(s.leaseName, state, s.holderId, state === 'open' ? s.guard.breakerCooldownMs : 0).catch(warnRecordFailed('breaker state'));
  }, {
    share: () => {
      const kept = counted();
      return { ...shareOf(s.guard, s.partitionCount(), kept), leading: kept.length > 0, led: kept.length };
    },
    aheadPerPartition: s.aheadPerPartition,
    onPause: (pauseMs) => {
      if (shared()) void store.recordProviderPause(s.leaseName, pauseMs, s.holderId).catch(warnRecordFailed('Retry-After pause'));
    },
  });
  const sync = new HoldSync(guard, store, s, clock, logger, () => shared() && counted().length > 0);
  return { guard, permitsFor: (k) => partitionPermits(guard, () => ownPart(s.guard, s.partitionCount(), k)),
    fits: () => fitsShare(guard.state().sent, s.guard, s.partitionCount(), counted()), stop: () => sync.stop() };
}

/** Reads the holds recorded by any process every syncMs while this process leads a partition; never throws. */
class HoldSync {
  private timer: NodeJS.Timeout | null = null;
  private running: Promise<void> | null = null;
  private stopped = false;
  private holding = false;
  private readonly failures = new RepeatLog(60_000);

  constructor(private readonly guard: ProviderGuard, private readonly store: HoldStore, private readonly s: ClusterGuardSettings,
    private readonly clock: Clock, private readonly logger: Logger, private readonly leading: () => boolean) {
    this.schedule();
  }

  async stop(): Promise<void> {
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    await this.running;
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => {
      this.running = (this.leading() ? this.readOnce() : Promise.resolve()).finally(() => {
        this.running = null;
        this.schedule();
      });
    }, this.s.syncMs);
    this.timer.unref?.();
  }

  private async readOnce(): Promise<void> {
    try {
      const hold = await this.store.getProviderHold(this.s.leaseName);
      // Remaining ms are by database time, applied from after the read: a hold lasts at most one read longer here.
      const now = this.clock.nowMs();
      const openForMs = hold && hold.holderId !== this.s.holderId ? hold.openForMs : 0; // our own breaker is the guard's
      this.guard.holdFor('breaker_open', openForMs > 0 ? now + openForMs : 0);
      if (hold && hold.pausedForMs > 0) this.guard.holdFor('retry_after', now + hold.pausedForMs);
      const holding = openForMs > 0 || (hold?.pausedForMs ?? 0) > 0;
      if (holding && !this.holding) {
        this.logger.warn({ event: 'provider_hold_observed', recorded_by: hold!.holderId, breaker: hold!.breaker, open_for_ms: openForMs,
          paused_for_ms: hold!.pausedForMs }, 'provider held back by another leader (its breaker or a Retry-After pause): sending nothing until it ends');
      }
      this.holding = holding;
      this.failures.reset();
    } catch (e) {
      const sqlError = sqlErrorField(e);
      const { level, repeats } = this.failures.next(sqlError?.message ?? String(e), this.clock.nowMs());
      const fields = { event: 'provider_hold_read_failed', sql_error: sqlError, ...(repeats ? { repeats } : {}) };
      if (level === 'info') this.logger.warn(fields, 'could not read the provider holds other leaders recorded (retried every SCHEDULE_REFRESH_INTERVAL_MS)');
      else this.logger.debug(fields, 'provider holds still unreadable');
    }
  }
}
