// Provider protection for the cluster (issue 25): one ProviderGuard per process, shared by its partitions' executors,
// and with EXECUTOR_PARTITIONS > 1 tied to the other processes' guards in two ways, neither costing a statement per call:
// - limits: the guard uses this process's share of the cluster-wide rate and in-flight cap, from the partitions it
//   leads at each acquire (guardShare.ts). The leases keep one leader per partition, so the shares add up to the limits.
// - holds: a breaker this process opens is recorded with when it closes again, a Retry-After pause with when it ends
//   (both in the provider_state row of LEASE_NAME, database time); while this process leads any partition it reads that
//   row every `syncMs` (SCHEDULE_REFRESH_INTERVAL_MS) and holds back until then too. Staleness: a hold opened elsewhere
//   stops this process's calls at most syncMs + one read + the opener's one write after it opened (calls already
//   sent finish). Best effort: a failed read or write is logged and the next interval tries again; meanwhile each
//   process still has its own breaker and Retry-After pause.
// With one partition nothing of this runs: the guard has the configured limits, reads nothing, records as before.
import type { Clock } from '../lease/clock.js';
import { RepeatLog } from '../lease/repeatLog.js';
import type { GuardSettings } from '../limits.js';
import { sqlErrorField, type Logger } from '../observability/logger.js';
import type { AppMetrics } from '../observability/metrics.js';
import type { OpsStore } from '../store/opsPorts.js';
import { ProviderGuard } from './guard.js';
import { shareOf } from './guardShare.js';

export interface ClusterGuardSettings {
  guard: GuardSettings;
  partitions: number;
  /** The recorded partition count now (issue 26: it changes at run time); default `partitions`. */
  partitionCount?: () => number;
  /** LEASE_NAME: the provider_state row of the cluster. */
  leaseName: string;
  holderId: string;
  /** How often a leading process reads the holds others recorded (SCHEDULE_REFRESH_INTERVAL_MS). */
  syncMs: number;
}

export interface ClusterGuard {
  guard: ProviderGuard;
  /** Stop reading the holds (close). */
  stop(): Promise<void>;
}

type HoldStore = Pick<OpsStore, 'recordProviderBreaker' | 'recordProviderPause' | 'getProviderHold'>;

/** The process's guard; `led()` gives the partitions this process leads now. */
export function createClusterGuard(s: ClusterGuardSettings, store: HoldStore, clock: Clock, logger: Logger, metrics: AppMetrics,
  led: () => readonly number[]): ClusterGuard {
  const shared = s.partitions > 1;
  const warnRecordFailed = (what: string) => (e: unknown) =>
    logger.warn({ event: 'provider_breaker_record_failed', sql_error: sqlErrorField(e) }, `could not record the ${what}`);
  if (shared && s.guard.maxInFlight > 0 && s.guard.maxInFlight < s.partitions) {
    logger.warn({ event: 'provider_in_flight_below_partitions', max_in_flight: s.guard.maxInFlight, partitions: s.partitions },
      `PROVIDER_MAX_IN_FLIGHT (${s.guard.maxInFlight}) is below EXECUTOR_PARTITIONS (${s.partitions}): a leader of only ` +
      'partitions without a permit still sends one call at a time, so the cluster may exceed the cap by that many');
  }
  const guard = new ProviderGuard(s.guard, clock, (state) => {
    metrics.breakerChanged(state);
    logger.warn({ event: 'provider_breaker', state }, `provider circuit breaker ${state}`);
    // Recorded in SQL so every instance (the dashboard) shows it and, with several partitions, every leader holds back
    // until it closes; best effort, never blocks the executor.
    store.recordProviderBreaker(s.leaseName, state, s.holderId, state === 'open' ? s.guard.breakerCooldownMs : 0).catch(warnRecordFailed('breaker state'));
  }, shared ? {
    share: () => shareOf(s.guard, s.partitionCount?.() ?? s.partitions, led()),
    onPause: (pauseMs) => void store.recordProviderPause(s.leaseName, pauseMs, s.holderId).catch(warnRecordFailed('Retry-After pause')),
  } : {});
  if (!shared) return { guard, stop: async () => {} };
  const sync = new HoldSync(guard, store, s, clock, logger, () => led().length > 0);
  return { guard, stop: () => sync.stop() };
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
