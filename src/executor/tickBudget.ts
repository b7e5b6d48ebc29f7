// The tick budget derived from the timer's schedule, so that one leader executes without a gap: a tick ends
// EXECUTOR_TICK_HANDOFF_MS before the timer's next occurrence (Azure skips an occurrence that falls while the
// previous invocation still runs), capped by EXECUTOR_TICK_BUDGET_MS. Calls still in flight at the end are
// carried into the next tick (inFlight.ts), so closing a tick waits for no provider call.
import { Cron } from 'croner';

/** An invocation this close to (or past) its own occurrence's successor budgets up to the one after it. */
const MIN_AHEAD_MS = 500;
/** The smallest budget handed out (a late invocation still renews, refreshes and writes what it carries). */
const MIN_BUDGET_MS = 100;

export class TickBudget {
  private readonly cron: Cron;

  /** `schedule`: 6-field NCRONTAB in UTC (validated by config); `wallNowMs`: wall clock (injected for tests). */
  constructor(schedule: string, private readonly capMs: number, private readonly handoffMs: number,
    private readonly wallNowMs: () => number = Date.now) {
    this.cron = new Cron(schedule, { paused: true, timezone: 'Etc/UTC' });
  }

  /** Budget for a tick starting now: until the next occurrence (at least MIN_AHEAD_MS away) less the hand-off. */
  forTickStartingNow(): number {
    const now = this.wallNowMs();
    const next = this.cron.nextRun(new Date(now + MIN_AHEAD_MS));
    if (!next) return this.capMs;
    return Math.max(MIN_BUDGET_MS, Math.min(this.capMs, next.getTime() - now - this.handoffMs));
  }

  /** Milliseconds from now to the next occurrence (at least MIN_AHEAD_MS away): when the next tick is expected. */
  nextOccurrenceInMs(): number {
    const now = this.wallNowMs();
    const next = this.cron.nextRun(new Date(now + MIN_AHEAD_MS));
    return next ? next.getTime() - now : this.capMs + this.handoffMs;
  }
}
