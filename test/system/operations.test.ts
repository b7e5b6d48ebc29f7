// Operations with whole in-process apps on each dialect, their executors ticking like timers:
// - a leader drain requested through any instance (SQL) hands over within refresh + one tick, no attempt runs twice;
// - a cluster-wide pause stops execution on every instance within one tick (also mid-tick, within one refresh);
// - the leader purges terminal intents past retention in bounded batches, never an active one.
import { describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { executionControlHandler, handoversHandler, releaseLeaseHandler } from '../../src/http/ops.js';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import { startRecordingProvider, type RecordingProvider } from '../support/recordingProvider.js';
import { TEST_LEASE, jsonBody, metric, request, scrape, sleep, startApps, submitVia, testConfig, tickLoops, waitUntil } from '../support/apps.js';

describe.each(dialects)('operations: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  let apps: App[] = [];
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    provider = await startRecordingProvider(() => ({ status: 200, delayMs: 60 }));
  }, async () => {
    for (const a of apps) await a.close();
    apps = [];
    await provider?.close();
  });

  const leaderOf = () => apps.find((a) => a.lease.requireLeader() !== null);
  const succeeded = async (n: number) => ((await ctx.statusCounts()).succeeded ?? 0) >= n;

  it('drain requested through a follower (SQL): the leader finishes in-flight work and releases; a new epoch executes within refresh + tick + 1 s; nothing lost or repeated', async () => {
    apps = await startApps(ctx, 3, testConfig(provider.url));
    const loops = tickLoops(apps, 400, 50);
    let requestId = '';
    let oldEpoch = 0;
    try {
      for (let i = 0; i < 40; i++) await submitVia(apps[i % 3]!, { i });
      await waitUntil('execution under way', () => provider.calls.length >= 8);
      const old = leaderOf()!;
      oldEpoch = old.lease.requireLeader()!.leaseEpoch;
      // Any instance records the request (on Flex an HTTP instance never leads): 202 with it, at once.
      const follower = apps.find((a) => a !== old)!;
      const res = await releaseLeaseHandler(follower)(request('POST', '/api/ops/lease/release'));
      expect(res.status).toBe(202);
      const req = JSON.parse(res.body!) as { requestId: string; status: string; requestedEpoch: number };
      expect(req).toMatchObject({ status: 'pending', requestedEpoch: oldEpoch });
      requestId = req.requestId;
      for (let i = 0; i < 20; i++) await submitVia(apps[i % 3]!, { after: i }); // work for the next epoch
      await provider.waitFor((c) => c.some((x) => x.leaseEpoch > oldEpoch), 20_000); // a liveness guard
      const firstNew = provider.calls.find((x) => x.leaseEpoch > oldEpoch)!;
      expect(firstNew.leaseEpoch).toBe(oldEpoch + 1);
      await waitUntil('all 60 succeeded', () => succeeded(60));
    } finally {
      await loops.stop();
    }
    // The request is completed by the drained epoch, before the release; the row was released (not expired).
    const list = JSON.parse((await handoversHandler(apps[0]!)(request('GET', '/api/ops/lease/release'))).body!) as { pending: unknown; requests: Record<string, unknown>[] };
    expect(list.pending).toBeNull();
    expect(list.requests[0]).toMatchObject({ requestId, status: 'completed', completedEpoch: oldEpoch });
    const events = await apps[0]!.stores.lease.listEvents(TEST_LEASE);
    expect(events.find((e) => e.event === 'released' && e.leaseEpoch === oldEpoch)).toBeTruthy();
    // Every intent once to success; attempt numbers contiguous; see below for what a second call may be.
    const perIntent = new Map<string, number>();
    for (const c of provider.calls) perIntent.set(c.intentId, (perIntent.get(c.intentId) ?? 0) + 1);
    expect(perIntent.size).toBe(60);
    const attempts = await ctx.attemptRows();
    // Exactly one success per intent and one provider call per attempt sent; the handover abandoned nothing. A
    // second call is only a retry after a retryable error (a provider timeout on a loaded machine); an attempt aborted
    // before its call (a loaded machine past its send-by bound) was never sent.
    expect(attempts.filter((a) => a.outcome === 'abandoned')).toEqual([]);
    for (const [id, calls] of perIntent) {
      const mine = attempts.filter((a) => a.intentId === id).sort((x, y) => x.attemptNo - y.attemptNo);
      expect(mine.map((a) => a.attemptNo)).toEqual(mine.map((_, i) => i + 1));
      expect(mine.filter((a) => a.outcome === 'succeeded')).toHaveLength(1);
      expect(mine.slice(0, -1).every((a) => a.outcome === 'retryable_error' || a.outcome === 'aborted')).toBe(true);
      const unsent = mine.filter((a) => a.outcome === 'aborted');
      for (const a of unsent) expect(a.error).toMatch(/^aborted before the provider call/);
      expect(provider.calls.filter((c) => c.intentId === id && unsent.some((a) => a.attemptNo === c.attemptNo))).toEqual([]);
      expect(calls).toBe(mine.length - unsent.length);
    }
  });

  it('pause: every instance starts nothing from its next tick on, also after a handover; resume executes the rest', async () => {
    apps = await startApps(ctx, 3, testConfig(provider.url));
    const loops = tickLoops(apps, 400, 50);
    try {
      for (let i = 0; i < 5; i++) await submitVia(apps[i % 3]!, { before: i });
      await waitUntil('first batch done', () => succeeded(5));
      // Paused through a follower: the flag is cluster-wide (SQL), not per instance.
      const follower = apps.find((a) => a.lease.requireLeader() === null)!;
      const paused = await executionControlHandler(follower, 'pause')(request('POST', '/api/ops/execution/pause', ...Object.values(jsonBody({ reason: 'test' })) as [string, Record<string, string>]));
      expect(paused.status).toBe(200);
      expect(JSON.parse(paused.body!)).toMatchObject({ paused: true, reason: 'test' });
      const pausedAt = Date.now();
      const callsAtPause = provider.calls.length;
      for (let i = 0; i < 6; i++) await submitVia(apps[i % 3]!, { after: i });
      await sleep(1_200); // several ticks on every instance
      // Drain while paused (requested through a follower): the leader releases, the next epoch is paused too.
      const old = leaderOf()!;
      const oldEpoch = old.lease.requireLeader()!.leaseEpoch;
      expect((await releaseLeaseHandler(follower)(request('POST', '/api/ops/lease/release'))).status).toBe(202);
      await waitUntil('a new epoch', () => (leaderOf()?.lease.requireLeader()?.leaseEpoch ?? 0) > oldEpoch, 5_000);
      await sleep(600);
      expect(provider.calls.length).toBe(callsAtPause);
      const leaderTicks = loops.summaries.filter((s) => s.sum.role === 'leader' && s.at > pausedAt + 600);
      expect(new Set(leaderTicks.map((s) => s.sum.leaseEpoch)).size).toBe(2); // both epochs ticked while paused (any instance may lead next)
      expect(leaderTicks.every((s) => s.sum.paused && s.sum.started === 0)).toBe(true);
      expect(metric(await scrape(leaderOf()!), 'execution_paused')).toBe(1);

      const resumed = await executionControlHandler(apps[0]!, 'resume')(request('POST', '/api/ops/execution/resume'));
      expect(JSON.parse(resumed.body!)).toMatchObject({ paused: false });
      await waitUntil('all 11 succeeded', () => succeeded(11));
    } finally {
      await loops.stop();
    }
  });

  it('pause mid-tick: the running leader tick starts nothing more after its next refresh', async () => {
    apps = await startApps(ctx, 1, testConfig(provider.url, { LEASE_DURATION_MS: '5000' }));
    const [app] = apps as [App];
    await app.executor.tick(100); // acquire
    let pausedAt = Number.POSITIVE_INFINITY;
    const feeder = (async () => {
      for (let i = 0; i < 25; i++) {
        await submitVia(app, { feed: i });
        await sleep(50);
      }
    })();
    const tick = app.executor.tick(1_500);
    await sleep(500);
    await app.stores.ops.setPaused(TEST_LEASE, true, 'test', null);
    pausedAt = Date.now();
    const sum = await tick;
    await feeder;
    expect(sum.role).toBe('leader');
    expect(sum.started).toBeGreaterThan(0);
    // Refresh interval 100 ms: calls started after the next refresh read the flag would arrive later than this.
    const late = provider.calls.filter((c) => c.arrivedAt > pausedAt + 100 + 250);
    expect(late).toEqual([]);
  });

  it('retention: the leader purges terminal intents past retention in bounded batches per tick, never active ones', async () => {
    const base = testConfig(provider.url);
    const retention = { ...base.retention, olderThanMs: 60_000, batchSize: 3, maxBatchesPerTick: 2, intervalMs: 60_000 };
    apps = await startApps(ctx, 1, { ...base, retention });
    const [app] = apps as [App];
    const terminal: string[] = [];
    for (let i = 0; i < 10; i++) {
      const id = await submitVia(app, { t: i });
      // Settled two retention periods ago (database time): past the horizon however slowly the ticks below run.
      await ctx.setIntentStatus(id, (['succeeded', 'failed', 'cancelled'] as const)[i % 3]!, 2 * retention.olderThanMs);
      terminal.push(id);
    }
    const active = [await submitVia(app, { a: 1 }), await submitVia(app, { a: 2 })];
    await app.stores.intents.reschedule(active[0]!, new Date(Date.now() + 3_600_000)); // scheduled, not due
    await ctx.setIntentStatus(active[1]!, 'in_flight', 2 * retention.olderThanMs); // old, but active: never purged
    const young = await submitVia(app, { young: true }); // terminal, one retention period short of the horizon
    await ctx.setIntentStatus(young, 'succeeded');

    // Retention runs in the maintenance slice at a tick's end (src/executor/maintenance.ts): at most maxBatchesPerTick
    // statements of batchSize (2 × 3) per tick. A statement the slice's end cuts off settles after its tick (that tick
    // reports what had finished; no run starts until it settles), so the ticks are judged by the rows, not by a count each.
    const purged: number[] = [];
    const left = async () => (await ctx.intentRows()).map((r) => r.intentId).sort();
    while ((await left()).length > 3 && purged.length < 20) purged.push((await app.executor.tick(600)).purgedIntents);
    expect(purged.every((n) => n <= retention.batchSize * retention.maxBatchesPerTick), String(purged)).toBe(true);
    expect(await left()).toEqual([...active, young].sort());
    await waitUntil('every purge counted', async () => metric(await scrape(app), 'retention_purged_rows_total', { table: 'intents' }) === 10);
    expect((await app.executor.tick(600)).purgedIntents).toBe(0);
    expect(await left()).toEqual([...active, young].sort());
  });
});
