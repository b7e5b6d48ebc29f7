// One timer invocation: normally one tick; a tick that overruns the hand-off (the host then skips the occurrence
// that fell meanwhile) is followed by another in the same invocation, at most three, so a transient fault near
// the end of a tick does not cost the cluster a whole timer period.
import { describe, expect, it } from 'vitest';
import { executorDialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { buildExecutor } from '../support/executorHarness.js';
import { runTimerInvocation } from '../../src/executor/timerInvocation.js';
import type { TickBudget } from '../../src/executor/tickBudget.js';
import { silentLogger } from '../../src/observability/logger.js';

describe.each(executorDialects)('timer invocation: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  useDialectWithProvider(dialect, (fresh, started) => {
    ctx = fresh;
    provider = started;
  });

  const budget = (ms: number) => ({ forTickStartingNow: () => ms, nextOccurrenceInMs: () => ms + 100 }) as unknown as TickBudget;

  it.each([
    // budget, hand-off → ticks in the invocation
    [300, 250, 1], // ended before the hand-off: one tick
    [50, -1_000, 3], // every tick "overran" (a negative hand-off makes any tick late): three at most, then stop
  ])('budget %i ms, hand-off %i ms → %i tick(s)', async (budgetMs, handoffMs, expected) => {
    const b = await buildExecutor(ctx, { providerUrl: provider.url, leaseMs: 10_000 });
    const ticks = await runTimerInvocation({ executor: b.executor, tickBudget: budget(budgetMs), logger: silentLogger,
      config: { executor: { handoffMs, invocationLimitMs: 60_000, closingReserveMs: 1_000 } } }, false);
    expect(ticks).toHaveLength(expected);
    expect(ticks.every((t) => t.role === 'leader' && t.leaseEpoch === 1)).toBe(true);
    await b.executor.drain();
  });

  it('an invocation never outlives functionTimeout less its margin: each budget leaves room for the longest close', async () => {
    // A tick may run closingReserveMs past its budget; every tick "overruns" the hand-off (negative), so before,
    // three ticks of the schedule's budget ran back to back: 3 × 600 ms in a 1 500 ms limit.
    const b = await buildExecutor(ctx, { providerUrl: provider.url, leaseMs: 10_000 });
    const budgets: number[] = [];
    const executor = { tick: (ms: number) => (budgets.push(ms), b.executor.tick(ms)) };
    const t0 = performance.now();
    const ticks = await runTimerInvocation({ executor, tickBudget: budget(600), logger: silentLogger,
      config: { executor: { handoffMs: -1_000, invocationLimitMs: 1_500, closingReserveMs: 400 } } }, false);
    const elapsed = performance.now() - t0;
    expect(ticks.length).toBeLessThan(3);
    for (let i = 0; i < budgets.length; i++) {
      const before = ticks.slice(0, i).reduce((n, t) => n + t.durationMs, 0);
      expect(before + budgets[i]! + 400, `tick ${i + 1}: budget ${budgets[i]} ms after ${before} ms`).toBeLessThanOrEqual(1_500 + 20);
    }
    expect(elapsed).toBeLessThan(1_500 + 400); // the reserve covers a close that overran its budget
    await b.executor.drain();
  });
});
