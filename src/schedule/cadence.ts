// The leader's refresh cadence, with one owner across its ticks and the bridge between them: when the interval
// refresh (the guarantee), a due-intent notice's tail read and the periodic reconcile are due, and how long an
// idle batch may sleep. Only the batch loop takes steps; a notice only marks one (noticed()). Monotonic ms.
//
// The interval refresh bounds pickup (commit → fenced START done; the call then leaves, or, all slots busy, waits
// ready for the next freed one, as it would have waited for a slot before its START) by the interval itself,
// not the interval plus the leader's own overhead. An intent committed just after a refresh's snapshot (taken
// after that refresh began) is read by the next refresh and then started: it waits at most (next begin − this
// begin) + the next read + one fenced START. So each interval refresh begins early by the overhead this leader
// measures with its monotonic clock (refreshLeadMs): how far past its planned begin a refresh's read and the
// control row were done (timer lateness, a step the loop was busy with, the read itself), plus one fenced START,
// each as a high-percentile estimate (TailEstimate). The lead is capped at LEAD_CAP_SHARE of the interval: a slow
// database never turns the refresh into a tight loop, and refreshes run at most 1 / (1 − 0.1) = 1.11 × as often
// as the interval says. Not covered (not seen by the leader): the intake's own time to commit, and the network
// between the leader's HTTP client and the provider.

/** Tail reads for notices at most this often: a steady stream of notices costs one tail read per interval. */
export const TAIL_SPACING_MS = 20;

/** The early start is at most this share of the refresh interval (at most 11 % more refreshes). Beyond it the
 *  overhead is the database or the machine being slow, which more frequent refreshes would only add to. */
export const LEAD_CAP_SHARE = 0.1;

/** `reconcilePage`: the next page of a reconcile in progress (the refresher's state, passed in). */
export type CadenceStep = 'refresh' | 'tail' | 'reconcilePage' | 'reconcile' | null;

/** A high-percentile estimate of a duration from its samples: smoothed mean + 4 × smoothed mean deviation (the
 *  estimator of TCP's retransmission timer, RFC 6298: α = 1/8, β = 1/4). Two numbers, no window; a single
 *  outlier raises it by at most half its excess over the mean, and it decays within a few dozen samples. */
export class TailEstimate {
  private mean: number | null = null;
  private dev = 0;

  sample(ms: number): void {
    if (this.mean === null) {
      this.mean = ms;
      this.dev = ms / 2;
      return;
    }
    this.dev += (Math.abs(ms - this.mean) - this.dev) / 4;
    this.mean += (ms - this.mean) / 8;
  }

  /** The estimate (0 before any sample). */
  get ms(): number {
    return this.mean === null ? 0 : this.mean + 4 * this.dev;
  }
}

export class RefreshCadence {
  private lastRefreshMs = Number.NEGATIVE_INFINITY;
  private lastReconcileMs = Number.NEGATIVE_INFINITY;
  private lastTailMs = Number.NEGATIVE_INFINITY;
  private notice = false;
  /** When the interval refresh in progress was planned to begin (null: none in progress, or the first after a load). */
  private plannedMs: number | null = null;
  /** Planned begin of a refresh → its read (and the control row) done: timer lateness, a step the loop was busy
   *  with, the read itself. */
  private readonly overdue = new TailEstimate();
  /** One fenced START (the intents a refresh brought in wait for it before their calls go out). */
  private readonly start = new TailEstimate();

  constructor(private readonly s: { refreshIntervalMs: number; reconcileIntervalMs: number }) {}

  /** A due-intent notice arrived (between ticks too): a tail read at the next step, at most one per spacing. */
  noticed(): void {
    this.notice = true;
  }

  /** A full load finished at `nowMs`: the schedule is current, refresh and reconcile count from here. */
  loaded(nowMs: number): void {
    this.lastRefreshMs = this.lastReconcileMs = nowMs;
    this.plannedMs = null;
  }

  /** How early each interval refresh begins: the measured overhead, at most LEAD_CAP_SHARE of the interval. */
  get refreshLeadMs(): number {
    return Math.min(this.overdue.ms + this.start.ms, LEAD_CAP_SHARE * this.s.refreshIntervalMs);
  }

  /** The step to run now, recorded as begun (a notice arriving during it is read at a later step), by priority:
   *  the interval refresh, a notice's tail read, the next page of a reconcile in progress, a new reconcile. */
  take(nowMs: number, reconciling: boolean): CadenceStep {
    const refreshAt = this.nextRefreshMs();
    if (nowMs >= refreshAt) {
      this.plannedMs = Number.isFinite(refreshAt) ? refreshAt : null;
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

  /** The interval refresh take() returned has been read, with the control row, at `nowMs`: how overdue its rows
   *  were (a sample of at most one interval: a refresh that ended with a leader's pause is not the read's cost). */
  refreshRead(nowMs: number): void {
    if (this.plannedMs === null) return;
    this.overdue.sample(Math.min(Math.max(0, nowMs - this.plannedMs), this.s.refreshIntervalMs));
    this.plannedMs = null;
  }

  /** A fenced START that started attempts took `ms`. */
  startTook(ms: number): void {
    this.start.sample(Math.min(Math.max(0, ms), this.s.refreshIntervalMs));
  }

  /** How long an idle loop may sleep before take() has a step (0: now). */
  untilNextMs(nowMs: number, reconciling: boolean): number {
    if (reconciling) return 0;
    const next = Math.min(this.nextRefreshMs(), this.lastReconcileMs + this.s.reconcileIntervalMs,
      this.notice ? this.lastTailMs + TAIL_SPACING_MS : Number.POSITIVE_INFINITY);
    return Math.max(0, next - nowMs);
  }

  private nextRefreshMs(): number {
    return this.lastRefreshMs + this.s.refreshIntervalMs - this.refreshLeadMs;
  }
}
