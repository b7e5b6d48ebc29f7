// One timer invocation: normally one tick; a tick that overruns the hand-off (the host then skips the occurrence
// that fell meanwhile) is followed by another in the same invocation, at most three, so a transient fault near
// the end of a tick does not cost the cluster a whole timer period.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { buildExecutor } from '../support/executorHarness.js';
import { runTimerInvocation } from '../../src/executor/timerInvocation.js';
import type { TickBudget } from '../../src/executor/tickBudget.js';
import { MIN_TICK_BUDGET_MS } from '../../src/limits.js';
import { silentLogger } from '../../src/observability/logger.js';

describe.each(dialects)('timer invocation: $name', (dialect) => {
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
    // three ticks of the schedule's budget ran back to back: 3 × 1 200 ms in a 1 500 ms limit. Now the first budget
    // is cut to the room the reserve leaves (1 100 ms), and no tick follows without the least budget's room. Judged
    // on the invocation's own clock (its readings recorded), not by how long a loaded machine took to run the ticks.
    const b = await buildExecutor(ctx, { providerUrl: provider.url, leaseMs: 10_000 });
    const budgets: number[] = [];
    const readings: number[] = [];
    const executor = { tick: (ms: number) => (budgets.push(ms), b.executor.tick(ms)) };
    const clock = () => (readings.push(performance.now()), readings.at(-1)!);
    const ticks = await runTimerInvocation({ executor, tickBudget: budget(1_200), logger: silentLogger,
      config: { executor: { handoffMs: -1_000, invocationLimitMs: 1_500, closingReserveMs: 400 } } }, false, clock);
    expect(ticks.length).toBeLessThan(3);
    expect(budgets).toHaveLength(ticks.length);
    // readings: the invocation's start (its end-by is 1 500 ms later), then one before each tick's budget.
    const endBy = readings[0]! + 1_500;
    for (let i = 0; i < budgets.length; i++) {
      const room = endBy - readings[i + 1]! - 400;
      expect(budgets[i], `tick ${i + 1}: budget ${budgets[i]} ms with ${Math.round(room)} ms of room left`).toBeLessThanOrEqual(Math.max(1, room));
      if (i > 0) expect(room, `tick ${i + 1} started with less than the least budget`).toBeGreaterThanOrEqual(MIN_TICK_BUDGET_MS);
    }
    // After the last tick: either its close left no room for another, or it ended within its hand-off.
    const last = readings.length - 1 === budgets.length ? null : endBy - readings.at(-1)! - 400;
    if (last !== null) expect(last).toBeLessThan(MIN_TICK_BUDGET_MS);
    await b.executor.drain();
  });
});
