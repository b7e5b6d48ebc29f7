// The leader's refresh cadence, with one owner across its ticks and the bridge between them: when the interval
// refresh (the guarantee), a due-intent notice's tail read and the periodic reconcile are due, and how long an
// idle batch may sleep. Only the batch loop takes steps; a notice only marks one (noticed()). Monotonic ms.

/** Tail reads for notices at most this often: a steady stream of notices costs one tail read per interval. */
export const TAIL_SPACING_MS = 20;

/** `reconcilePage`: the next page of a reconcile in progress (the refresher's state, passed in). */
export type CadenceStep = 'refresh' | 'tail' | 'reconcilePage' | 'reconcile' | null;

export class RefreshCadence {
  private lastRefreshMs = Number.NEGATIVE_INFINITY;
  private lastReconcileMs = Number.NEGATIVE_INFINITY;
  private lastTailMs = Number.NEGATIVE_INFINITY;
  private notice = false;

  constructor(private readonly s: { refreshIntervalMs: number; reconcileIntervalMs: number }) {}

  /** A due-intent notice arrived (between ticks too): a tail read at the next step, at most one per spacing. */
  noticed(): void {
    this.notice = true;
  }

  /** A full load finished at `nowMs`: the schedule is current, refresh and reconcile count from here. */
  loaded(nowMs: number): void {
    this.lastRefreshMs = this.lastReconcileMs = nowMs;
  }

  /** The step to run now, recorded as begun (a notice arriving during it is read at a later step), by priority:
   *  the interval refresh, a notice's tail read, the next page of a reconcile in progress, a new reconcile. */
  take(nowMs: number, reconciling: boolean): CadenceStep {
    if (nowMs - this.lastRefreshMs >= this.s.refreshIntervalMs) {
      this.lastRefreshMs = nowMs;
      this.notice = false; // the refresh reads past the tail too
      return 'refresh';
    }
    if (this.notice && nowMs - this.lastTailMs >= TAIL_SPACING_MS) {
      this.lastTailMs = nowMs;
      this.notice = false;
      return 'tail';
    }
    if (reconciling) return 'reconcilePage';
    if (nowMs - this.lastReconcileMs >= this.s.reconcileIntervalMs) {
      this.lastReconcileMs = nowMs;
      return 'reconcile';
    }
    return null;
  }

  /** How long an idle loop may sleep before take() has a step (0: now). */
  untilNextMs(nowMs: number, reconciling: boolean): number {
    if (reconciling) return 0;
    const next = Math.min(this.lastRefreshMs + this.s.refreshIntervalMs, this.lastReconcileMs + this.s.reconcileIntervalMs,
      this.notice ? this.lastTailMs + TAIL_SPACING_MS : Number.POSITIVE_INFINITY);
    return Math.max(0, next - nowMs);
  }
}
