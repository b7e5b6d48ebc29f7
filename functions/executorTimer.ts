// The executor timer: each tick tries/renews the lease and, if leading, runs one bounded, fenced batch that ends
// EXECUTOR_TICK_HANDOFF_MS before the next occurrence (calls still in flight carry into it, so a leader executes
// without a gap); host.json functionTimeout exceeds the budget.
import '../src/observability/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import type { InvocationContext, Timer } from '@azure/functions';
import { getApp } from '../src/app.js';
import { withInvocationLog } from '../src/observability/invocationLog.js';

azf.app.timer('executorTimer', {
  schedule: '%EXECUTOR_SCHEDULE%',
  runOnStartup: false,
  // Schedule monitoring persists each occurrence to storage to catch up missed ones after restarts; the docs
  // default it off below a 1-minute interval, and a missed 10-s tick needs no catch-up (the next one follows).
  useMonitor: false,
  handler: (timer: Timer, context: InvocationContext) =>
    withInvocationLog(context, async () => {
      const app = await getApp();
      if (timer.isPastDue) app.logger.warn({ event: 'tick_past_due', is_past_due: true }, 'executor timer is past due');
      const budgetMs = app.tickBudget.forTickStartingNow();
      const summary = await app.executor.tick(budgetMs);
      app.logger.info({ event: 'tick_summary', is_past_due: timer.isPastDue, ...summary }, 'executor tick');
      if (summary.durationMs > budgetMs + app.config.executor.handoffMs) {
        app.logger.warn({ event: 'tick_overran_handoff', duration_ms: summary.durationMs, budget_ms: budgetMs },
          'the tick ended after the next occurrence: the host skips it, so the next tick comes one period later');
      }
    }),
});
