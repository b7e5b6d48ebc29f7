// The tick budget derived from the timer's schedule, so that one leader executes without a gap: a tick ends
// EXECUTOR_TICK_HANDOFF_MS before the timer's next occurrence (Azure skips an occurrence that falls while the
// previous invocation still runs), capped by EXECUTOR_TICK_BUDGET_MS. Calls still in flight at the end are
// carried into the next tick (inFlight.ts), so closing a tick waits for no provider call.
import { Cron } from 'croner';
import { CLIENT_DEADLINE_MARGIN_MS } from '../store/deadline.js';

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

/** The shortest gap between the schedule's next few occurrences (throws on an invalid expression). */
export function shortestPeriodMs(schedule: string, from = new Date()): number {
  const runs = new Cron(schedule, { paused: true, timezone: 'Etc/UTC' }).nextRuns(6, from);
  let min = Number.POSITIVE_INFINITY;
  for (let i = 1; i < runs.length; i++) min = Math.min(min, runs[i]!.getTime() - runs[i - 1]!.getTime());
  return min;
}

/** An invocation (and a shutdown) ends this long before host.json functionTimeout, when the host kills it. */
export const INVOCATION_MARGIN_MS = 5_000;
/** The smallest budget worth a tick after the first in one invocation. */
export const MIN_TICK_BUDGET_MS = 1_000;

/** Closing a batch retries an unwritten completion batch for this long: room for one more write after a failed one. */
export function settleWindowMs(statementTimeoutMs: number): number {
  return Math.min(2 * statementTimeoutMs, 10_000);
}

/**
 * The longest a tick can run past its budget, each database call bounded by connect (PostgreSQL: max(1 s, the
 * statement timeout)) + its client-side deadline: the last statement begun before the deadline, overlapping the
 * calls in flight (provider timeout); a renew while they finish; the awaited completion write; the settle window
 * and the retry begun at its end; a handover record and the row release. (An acquire that ran over — up to three
 * calls with a lost reply — leaves nothing in flight.) An invocation fits its ticks' budgets around this.
 */
export function closingReserveMs(o: { providerTimeoutMs: number; statementTimeoutMs: number }): number {
  const dbCallMs = Math.max(1_000, o.statementTimeoutMs) + o.statementTimeoutMs + CLIENT_DEADLINE_MARGIN_MS;
  return Math.max(o.providerTimeoutMs, dbCallMs) + settleWindowMs(o.statementTimeoutMs) + 5 * dbCallMs;
}
