// The tick budget derived from the timer schedule: a tick ends EXECUTOR_TICK_HANDOFF_MS before the next
// occurrence (so that occurrence is not skipped and the leader keeps executing), capped by EXECUTOR_TICK_BUDGET_MS.
import { describe, expect, it } from 'vitest';
import { TickBudget } from '../../src/executor/tickBudget.js';
import { loadConfig } from '../../src/config.js';

const at = (iso: string) => () => Date.parse(iso);

describe('TickBudget', () => {
  it.each([
    // schedule, wall clock at the tick's start, cap, hand-off, expected budget
    ['*/10 * * * * *', '2026-11-26T10:00:00.020Z', 44_000, 250, 9_730], // on time: until :10 less the hand-off
    ['*/10 * * * * *', '2026-11-26T10:00:03.000Z', 44_000, 250, 6_750], // late (host start, past due)
    ['*/10 * * * * *', '2026-11-26T10:00:09.700Z', 44_000, 250, 10_050], // < 500 ms before :10 → budget to :20
    ['*/10 * * * * *', '2026-11-26T09:59:59.999Z', 44_000, 250, 9_751], // timer fired a hair early: to :10, not :00
    ['*/10 * * * * *', '2026-11-26T10:00:00.000Z', 8_000, 250, 8_000], // an explicit cap wins
    ['0 */5 * * * *', '2026-11-26T10:00:00.050Z', 44_000, 250, 44_000], // a 5-min schedule: capped by the lease rule
    ['*/1 * * * * *', '2026-11-26T10:00:00.010Z', 44_000, 900, 100], // hand-off ≥ period: the minimum, never ≤ 0
    ['*/2 * * * * *', '2026-11-26T10:00:00.005Z', 44_000, 0, 1_995],
  ])('%s at %s, cap %i, hand-off %i → %i ms', (schedule, now, cap, handoff, expected) => {
    expect(new TickBudget(schedule, cap, handoff, at(now)).forTickStartingNow()).toBe(expected);
  });

  it.each([
    // schedule, wall clock, expected ms to the next occurrence (the bridge renews until then)
    ['*/10 * * * * *', '2026-11-26T10:00:00.020Z', 9_980],
    ['*/10 * * * * *', '2026-11-26T10:00:09.700Z', 10_300], // < 500 ms before :10 → the one after (its budget's end)
    ['0 */5 * * * *', '2026-11-26T10:00:00.050Z', 299_950], // past the budget cap: the occurrence, not the cap
  ])('next occurrence of %s at %s → %i ms', (schedule, now, expected) => {
    expect(new TickBudget(schedule, 44_000, 250, at(now)).nextOccurrenceInMs()).toBe(expected);
  });

  it('defaults: the cap is the largest the lease allows, and a default tick covers the 10 s timer period', () => {
    const c = loadConfig({});
    expect(c.executor.tickBudgetMs).toBe(60_000 - 10_000 - 5_000 - 1_000);
    expect(c.executor.handoffMs).toBe(250);
    const b = new TickBudget(c.executor.schedule, c.executor.tickBudgetMs, c.executor.handoffMs, at('2026-11-26T10:00:00.000Z'));
    expect(b.forTickStartingNow()).toBe(9_750);
  });

  it('a lease too short for the default cap fails at start naming the settings', () => {
    expect(() => loadConfig({ LEASE_DURATION_MS: '12000', LEASE_RENEW_INTERVAL_MS: '4000',
      PROVIDER_TIMEOUT_MS: '10000', LEASE_SAFETY_MARGIN_MS: '1000' }))
      .toThrow(/EXECUTOR_TICK_BUDGET_MS \(default\).*LEASE_DURATION_MS.*PROVIDER_TIMEOUT_MS/);
  });
});
