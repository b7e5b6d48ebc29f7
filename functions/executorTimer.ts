// The executor timers, one per partition (EXECUTOR_PARTITIONS; partition 0 is `executorTimer`, k is
// `executorTimer-k`), each under its own listener lock, so the host spreads partitions over instances. Each tick
// tries/renews its partition's lease and, if leading, runs one bounded, fenced batch that ends
// EXECUTOR_TICK_HANDOFF_MS before the next occurrence (calls still in flight carry into it, so a leader executes
// without a gap); a tick that overruns the hand-off is followed by another in the same invocation (the host skips
// the occurrence that fell meanwhile). host.json functionTimeout exceeds the budget.
import '../src/instrument/telemetryPreload.js'; // first: sets up OpenTelemetry before anything it instruments loads
import azf from '@azure/functions';
import type { InvocationContext, Timer } from '@azure/functions';
import { getApp, runPartitionTimer } from '../src/app.js';
import { executorTimerFunctions, partitionCountSetting } from '../src/config.js';
import { withInvocationLog } from '../src/observability/invocationLog.js';

for (const { name, partition } of executorTimerFunctions(partitionCountSetting())) {
  azf.app.timer(name, {
    schedule: '%EXECUTOR_SCHEDULE%',
    runOnStartup: false,
    // Schedule monitoring persists each occurrence to storage to catch up missed ones after restarts; the docs
    // default it off below a 1-minute interval, and a missed 10-s tick needs no catch-up (the next one follows).
    useMonitor: false,
    handler: (timer: Timer, context: InvocationContext) =>
      withInvocationLog(context, async () => {
        await runPartitionTimer(await getApp(), partition, timer.isPastDue);
      }),
  });
}
