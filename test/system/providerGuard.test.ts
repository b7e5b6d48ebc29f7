// Provider protection wired into the real executor (PGlite and the PostgreSQL server): the guard is asked before
// every fenced start, so holding back creates no attempt row, uses up no attempt and fails no intent.
// - breaker: after N consecutive retryable failures nothing is sent (and nothing started) during the cool-down,
//   then one probe; its success closes the breaker and the backlog drains;
// - a 429 with Retry-After pauses every call, not just that intent's;
// - the rate limit holds across ticks of the real executor.
import { afterEach, describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { submit } from '../support/instances.js';
import { buildExecutor, type Built } from '../support/executorHarness.js';
import { burstOf, ProviderGuard, type BreakerState } from '../../src/provider/guard.js';
import type { App } from '../../src/app.js';
import { overview } from '../../src/http/dashboard/data.js';
import { metric, scrape, startApps, submitVia, testConfig } from '../support/apps.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(dialects)('provider guard in the executor: $name', (dialect) => {
  const t = {} as { ctx: DialectContext; provider: RecordingProvider };
  useDialectWithProvider(dialect, (ctx, provider) => {
    t.ctx = ctx;
    t.provider = provider;
  });
  let built: Built | null = null;
  afterEach(async () => {
    await built?.executor.drain();
    await built?.lease.release();
    await built?.stores.close();
    built = null;
  });

  /** Ticks until `done()` or `ms` elapsed. */
  async function tickUntil(b: Built, done: () => boolean | Promise<boolean>, ms: number): Promise<void> {
    const end = Date.now() + ms;
    while (!(await done()) && Date.now() < end) await b.executor.tick(300);
  }

  it('breaker: opens after N retryable failures, sends and starts nothing while open, probes once, closes; no intent fails', async () => {
    const provider: RecordingProvider = t.provider;
    let failing = true;
    provider.answer = () => (failing ? { status: 503 } : { status: 200 });
    const transitions: BreakerState[] = [];
    // Judged on the guard's own record, not on how long a loaded machine's ticks ran: nothing is sent between the
    // opening and the half-open probe, which comes no sooner than the cool-down. The time of each transition is the
    // reading the guard decided it on (its last clock reading before it reports the change: the failure's result
    // that opened it, the acquire that let the probe through), not a reading of our own inside the report, which a
    // stall (GC, preemption) after the guard's reading makes later: the probe follows the guard's open time by the
    // cool-down plus a fraction of a ms, so such a stall of the open report made the span read short (1488 of 1500).
    const cooldownMs = 1_500;
    const at: Record<string, { ms: number; calls: number }> = {};
    built = await buildExecutor(t.ctx, {
      providerUrl: provider.url, concurrency: 1,
      guard: (clock) => {
        let read = 0;
        const guardClock = { nowMs: () => (read = clock.nowMs()), sleep: clock.sleep.bind(clock) };
        return new ProviderGuard({ ratePerSec: 0, maxInFlight: 1, breakerThreshold: 3, breakerCooldownMs: cooldownMs, retryAfterMaxMs: 0 },
          guardClock, (s) => {
            transitions.push(s);
            at[s] ??= { ms: read, calls: provider.calls.length };
            if (s === 'half_open') failing = false; // the provider has recovered by the probe
          });
      },
    });
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push((await submit(built.stores, { p: 1 }, { maxAttempts: 4 })).intentId);
    await tickUntil(built, () => transitions.includes('open'), 10_000);
    expect(transitions).toEqual(['open']);
    expect(provider.calls.length).toBe(3);
    expect(at.open!.calls).toBe(3);
    // Open: ticks run on (the provider still failing: a call sent now would fail again); after the cool-down one
    // probe finds it recovered, closes the breaker, and everything succeeds.
    await tickUntil(built, async () => (await t.ctx.countIntents('succeeded')) === ids.length, 15_000);
    expect(transitions).toEqual(['open', 'half_open', 'closed']);
    expect(at.half_open!.calls, 'calls sent while open').toBe(at.open!.calls);
    // (the guard's own rule, reading for reading: half-open once now ≥ the open time + the cool-down)
    expect(at.half_open!.ms, 'the probe, on the guard\'s clock: its open time + the cool-down at the earliest')
      .toBeGreaterThanOrEqual(at.open!.ms + cooldownMs);
    expect(await t.ctx.countIntents('succeeded')).toBe(ids.length);
    expect(await t.ctx.countIntents('failed')).toBe(0);
    // Only sent calls became attempts: one row per provider call, numbers contiguous per intent.
    const rows = await t.ctx.attemptRows();
    expect(rows.length).toBe(provider.calls.length);
    for (const id of ids) {
      const nos = rows.filter((r) => r.intentId === id).map((r) => r.attemptNo).sort((a, b) => a - b);
      expect(nos.length, `attempts of ${id}`).toBeGreaterThan(0);
      expect(nos).toEqual(nos.map((_, i) => i + 1));
    }
  });

  it.each([[false, 'open'], [true, 'closed']])('a timeout while this process stalled past it (stall %s) leaves the breaker %s', async (stall, expected) => {
    const provider: RecordingProvider = t.provider;
    provider.answer = () => ({ status: 200, delayMs: 3_000 }); // longer than the call's timeout (2 s here)
    const transitions: BreakerState[] = [];
    built = await buildExecutor(t.ctx, {
      providerUrl: provider.url, concurrency: 1, leaseMs: 30_000,
      guard: (clock) => new ProviderGuard({ ratePerSec: 0, maxInFlight: 1, breakerThreshold: 1, breakerCooldownMs: 60_000, retryAfterMaxMs: 0 },
        clock, (s) => transitions.push(s)),
    });
    await submit(built.stores, { p: 1 }, { maxAttempts: 3 });
    const b = built;
    const tick = b.executor.tick(1_000);
    await provider.waitFor((c) => c.length === 1);
    if (stall) b.clock.offset += 5_000; // as a SIGSTOP / GC pause sees it: the timeout surfaces 5 s late
    await tick;
    await b.executor.inFlight.settled();
    expect(transitions.at(-1) ?? 'closed').toBe(expected);
    expect((b.executor.guard as ProviderGuard).state().inFlight).toBe(0); // the slot was freed either way
  });

  it('a timeout after a stall that ended before it (the pause ate the call\'s window; its timer fired on time) leaves the breaker closed', async () => {
    // Campaign seed 210024 (azure): a 733 ms SIGSTOP while calls with an 800 ms timeout were out; they timed out on
    // time after it, the breaker opened, and nothing was sent for its 30 s cool-down. Here the event loop is really
    // blocked (as a pause blocks it) for all but 300 ms of the call's 2 s timeout; the answer takes longer than that.
    const provider: RecordingProvider = t.provider;
    provider.answer = () => ({ status: 200, delayMs: 3_000 });
    const transitions: BreakerState[] = [];
    let stalledOnce = false;
    built = await buildExecutor(t.ctx, {
      providerUrl: provider.url, concurrency: 1, leaseMs: 30_000,
      guard: (clock) => new ProviderGuard({ ratePerSec: 0, maxInFlight: 1, breakerThreshold: 1, breakerCooldownMs: 60_000, retryAfterMaxMs: 0 },
        clock, (s) => transitions.push(s)),
      wrapProvider: (p) => ({
        submit: (req, bounds) => {
          const call = p.submit(req, bounds);
          if (!stalledOnce) {
            stalledOnce = true;
            const end = performance.now() + bounds.timeoutMs - 300;
            while (performance.now() < end); // the process stalls (nothing else runs), then resumes before the timeout
          }
          return call;
        },
      }),
    });
    await submit(built.stores, { p: 1 }, { maxAttempts: 3 });
    const b = built;
    await b.executor.tick(1_000);
    await b.executor.inFlight.settled();
    expect((b.executor.guard as ProviderGuard).state().inFlight).toBe(0); // its slot was freed
    await b.executor.tick(300); // writes the carried completion
    expect(stalledOnce).toBe(true);
    expect((await t.ctx.attemptRows()).find((r) => r.attemptNo === 1)?.outcome).toBe('retryable_error'); // it did time out
    expect(transitions).toEqual([]); // before: ['open'] (the timeout surfaced on time, so it counted as the provider's)
  });

  it('a 429 with Retry-After pauses every call, not only that intent', async () => {
    const provider: RecordingProvider = t.provider;
    let first = true;
    provider.answer = () => {
      if (!first) return { status: 200 };
      first = false;
      return { status: 429, headers: { 'retry-after': '1' } };
    };
    built = await buildExecutor(t.ctx, {
      providerUrl: provider.url, concurrency: 1,
      guard: (clock) => new ProviderGuard({ ratePerSec: 0, maxInFlight: 1, breakerThreshold: 0, breakerCooldownMs: 1, retryAfterMaxMs: 5_000 }, clock),
    });
    for (let i = 0; i < 4; i++) await submit(built.stores, { p: 1 }, { maxAttempts: 3 });
    await tickUntil(built, async () => (await t.ctx.countIntents('succeeded')) === 4, 15_000);
    expect(await t.ctx.countIntents('succeeded')).toBe(4);
    const [c429, next] = provider.calls;
    // The other intents were due at once, yet the next call (to any intent) waited out the Retry-After.
    expect(next!.arrivedAt - c429!.arrivedAt).toBeGreaterThanOrEqual(950);
    expect((await t.ctx.attemptRows()).length).toBe(5); // 4 successes + the 429, nothing held back became an attempt
  });

  it('the composition root wires the guard from the settings: the breaker opens, stops the calls, shows in /metrics', async () => {
    const provider: RecordingProvider = t.provider;
    provider.answer = () => ({ status: 503 });
    const apps: App[] = await startApps(t.ctx, 1, testConfig(provider.url, { PROVIDER_BREAKER_THRESHOLD: '2', PROVIDER_BREAKER_COOLDOWN_MS: '60000' }));
    const [app] = apps as [App];
    try {
      for (let i = 0; i < 3; i++) await submitVia(app, { i });
      expect(metric(await scrape(app), 'provider_breaker_state')).toBe(0);
      const end = Date.now() + 10_000;
      while (metric(await scrape(app), 'provider_breaker_state') !== 2 && Date.now() < end) await app.executor.tick(300);
      await app.executor.inFlight.settled(); // a call granted before it opened may reach the provider after
      const atOpen = provider.calls.length;
      expect(atOpen).toBeGreaterThanOrEqual(2); // the calls granted together before the second failure came back
      for (let i = 0; i < 3; i++) await app.executor.tick(300); // open: nothing more is sent
      expect(provider.calls.length).toBe(atOpen);
      const text = await scrape(app);
      expect(metric(text, 'provider_breaker_state')).toBe(2);
      expect(metric(text, 'provider_breaker_transitions_total', { state: 'open' })).toBe(1);
      // Recorded in SQL for every instance: the dashboard's overview (served by any instance) shows it.
      const until = Date.now() + 5_000;
      while ((await app.stores.ops.getExecutionControl(app.config.lease.name)).providerBreaker?.state !== 'open' && Date.now() < until) await sleep(50);
      const o = await overview(app);
      expect(o.providerBreaker).toMatchObject({ state: 'open', holderId: app.lease.holderId });
      expect(await t.ctx.countIntents('failed')).toBe(0);
    } finally {
      for (const a of apps) await a.close();
    }
  });

  it('the rate limit holds across ticks: calls per second stay within the limit', async () => {
    const provider: RecordingProvider = t.provider;
    provider.answer = () => ({ status: 200 });
    // Permits as the guard grants them, net of those given back unused, on the guard's own clock: a token bucket of
    // 20/s holding at most `burst` grants in any window W at most 20 × W + burst, whatever the machine's speed.
    const permits: { at: number; n: number }[] = [];
    const burst = burstOf(20);
    built = await buildExecutor(t.ctx, {
      providerUrl: provider.url, concurrency: 8,
      guard: (clock) => {
        const g = new ProviderGuard({ ratePerSec: 20, maxInFlight: 8, breakerThreshold: 0, breakerCooldownMs: 1, retryAfterMaxMs: 0 }, clock);
        const acquire = g.acquire.bind(g);
        const release = g.release.bind(g);
        g.acquire = (wanted) => { const r = acquire(wanted); if (r.granted > 0) permits.push({ at: clock.nowMs(), n: r.granted }); return r; };
        g.release = (unused) => { release(unused); if (unused > 0) permits.push({ at: clock.nowMs(), n: -unused }); };
        return g;
      },
    });
    for (let i = 0; i < 60; i++) await submit(built.stores, { p: 1 }, { maxAttempts: 3 });
    await tickUntil(built, async () => (await t.ctx.countIntents('succeeded')) === 60, 20_000);
    expect(await t.ctx.countIntents('succeeded')).toBe(60);
    const inWindow = (from: number, ms: number) => permits.filter((p) => p.at >= from && p.at < from + ms).reduce((n, p) => n + p.n, 0);
    expect(Math.max(...permits.map((p) => inWindow(p.at, 1_000)))).toBeLessThanOrEqual(20 + burst); // (unlimited: 60)
    expect(permits.reduce((n, p) => n + p.n, 0)).toBe(60); // every call the provider saw was granted, once
    expect(provider.calls).toHaveLength(60);
    // 60 grants at 20/s from a bucket of `burst`: the last is at least (60 − burst) / 20 s after the first.
    expect(permits[permits.length - 1]!.at - permits[0]!.at).toBeGreaterThanOrEqual(((60 - burst) / 20) * 1_000 - 50);
  });
});
