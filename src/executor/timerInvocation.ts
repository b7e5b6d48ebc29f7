// One invocation of the executor timer. Normally one tick, ending EXECUTOR_TICK_HANDOFF_MS before the next
// occurrence. A tick that overruns that hand-off (an SQL error's closing window, a slow last statement) makes
// the host skip the occurrence that fell meanwhile (one instance's invocations never overlap); instead of
// leaving the cluster without a tick for a period, the invocation runs the tick that occurrence would have run,
// at most MAX_TICKS_PER_INVOCATION in all. The invocation never outlives host.json functionTimeout less a margin
// (invocationLimitMs): each tick's budget leaves room for the longest close (closingReserveMs), and no further tick
// starts without at least MIN_TICK_BUDGET_MS of budget.
import type { Logger } from '../observability/logger.js';
import type { Executor, TickSummary } from './executor.js';
import { MIN_TICK_BUDGET_MS } from '../limits.js';
import type { TickBudget } from './tickBudget.js';

const MAX_TICKS_PER_INVOCATION = 3;

export async function runTimerInvocation(app: { executor: Pick<Executor, 'tick'>; tickBudget: Pick<TickBudget, 'forTickStartingNow' | 'nextOccurrenceInMs'>;
  logger: Logger; config: { executor: { handoffMs: number; invocationLimitMs: number; closingReserveMs: number } } },
isPastDue: boolean, nowMs: () => number = () => performance.now()): Promise<TickSummary[]> {
  if (isPastDue) app.logger.warn({ event: 'tick_past_due', is_past_due: true }, 'executor timer is past due');
  const { handoffMs, invocationLimitMs, closingReserveMs } = app.config.executor;
  const endBy = nowMs() + invocationLimitMs;
  const ticks: TickSummary[] = [];
  for (let i = 0; i < MAX_TICKS_PER_INVOCATION; i++) {
    const room = endBy - nowMs() - closingReserveMs;
    if (i > 0 && room < MIN_TICK_BUDGET_MS) {
      app.logger.warn({ event: 'tick_overran_handoff_stopped', room_ms: Math.round(room) },
        'no room for another tick before functionTimeout: the next occurrence runs it');
      break;
    }
    // (The configuration guarantees the first tick at least MIN_TICK_BUDGET_MS.)
    const budgetMs = Math.max(1, Math.min(app.tickBudget.forTickStartingNow(), room));
    // The timer's next tick follows: a bridge runs (and renews) until then.
    const summary = await app.executor.tick(budgetMs, app.tickBudget.nextOccurrenceInMs());
    ticks.push(summary);
    app.logger.info({ event: 'tick_summary', is_past_due: isPastDue && i === 0, ...summary }, 'executor tick');
    if (summary.durationMs <= budgetMs + handoffMs || summary.stopReason === 'draining') break;
    app.logger.warn({ event: 'tick_overran_handoff', duration_ms: summary.durationMs, budget_ms: budgetMs, continuing: i + 1 < MAX_TICKS_PER_INVOCATION },
      'the tick ended after the next occurrence, which the host skips: this invocation runs that tick instead');
  }
  return ticks;
}
