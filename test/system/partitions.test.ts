// Partitioned execution (issue 25) with whole in-process apps on each dialect, every partition's executor ticking
// like its timer function: each partition has its own lease row, epoch and holder; an intent is executed only by
// its partition's holder; pause and drain act on one partition (`?partition=k`) or on all; /readyz lists the
// partitions an instance leads.
import { describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { executionControlHandler, releaseLeaseHandler } from '../../src/http/ops.js';
import { readyz } from '../../src/http/health.js';
import { partitionLeaseName } from '../../src/limits.js';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import { startRecordingProvider, type RecordingProvider } from '../support/recordingProvider.js';
import { TEST_LEASE, metric, request, scrape, startApps, submitVia, testConfig, tickLoops, waitUntil, sleep } from '../support/apps.js';

const P = 4;

describe.each(dialects)('partitions (P = 4): $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  let apps: App[] = [];
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    provider = await startRecordingProvider(() => ({ status: 200, delayMs: 20 }));
  }, async () => {
    for (const a of apps) await a.close();
    apps = [];
    await provider?.close();
  });

  const config = () => testConfig(provider.url, { EXECUTOR_PARTITIONS: String(P), DB_POOL_MAX: '13' });
  /** Apps with pools big enough to lead every partition (3 connections each), as DB_POOL_MAX's default. */
  const start = (n: number, c = config()) => startApps(ctx, n, c, undefined, 13);
  const partitionOf = async (id: string) => (await apps[0]!.stores.intents.get(id))!.partition;
  const holders = async () => Promise.all(Array.from({ length: P }, (_, k) => apps[0]!.stores.lease.get(partitionLeaseName(TEST_LEASE, k))));
  const succeeded = async (n: number) => ((await ctx.statusCounts()).succeeded ?? 0) >= n;

  it('one holder per partition; each intent executed once, by its partition\'s holder under that partition\'s epoch', async () => {
    apps = await start(3);
    const loops = tickLoops(apps, 400, 50);
    const ids: string[] = [];
    try {
      for (let i = 0; i < 32; i++) ids.push(await submitVia(apps[i % 3]!, { i }));
      await waitUntil('all 32 succeeded', () => succeeded(32));
    } finally {
      await loops.stop();
    }
    const rows = await holders();
    expect(rows.every((r) => r !== null && r.leaseEpoch === 1)).toBe(true);
    const attempts = await ctx.attemptRows();
    for (const id of ids) {
      const k = await partitionOf(id);
      const mine = attempts.filter((a) => a.intentId === id);
      // (A loaded runner may time a call out or drop one unsent past its send-by bound: retries, same holder and epoch.)
      expect([...new Set(mine.map((a) => `${a.holderId}@${a.leaseEpoch}`))], `intent ${id} of partition ${k}`).toEqual([`${rows[k]!.holderId}@1`]);
      expect(mine.filter((a) => a.outcome === 'succeeded')).toHaveLength(1);
      expect(provider.calls.filter((c) => c.intentId === id).every((c) => c.leaseEpoch === 1)).toBe(true);
    }
    // Every partition had work (the ids hash over all four), and each lease had its own events.
    expect(new Set(await Promise.all(ids.map(partitionOf))).size).toBe(P);
    for (let k = 0; k < P; k++) {
      const events = await apps[0]!.stores.lease.listEvents(partitionLeaseName(TEST_LEASE, k));
      expect(events.filter((e) => e.event === 'acquired').map((e) => e.leaseEpoch)).toEqual([1]);
    }
  });

  it('pause one partition (?partition=k): only its intents wait; resume runs them; a bad partition is a 400 naming the range', async () => {
    apps = await start(2);
    const bad = await executionControlHandler(apps[0]!, 'pause')(request('POST', `/api/ops/execution/pause?partition=${P}`));
    expect(bad.status).toBe(400);
    expect(bad.body).toContain(`from 0 to ${P - 1}`);
    const paused = await executionControlHandler(apps[1]!, 'pause')(request('POST', '/api/ops/execution/pause?partition=2'));
    expect(paused.status).toBe(200);
    expect(JSON.parse(paused.body!)).toMatchObject({ leaseName: partitionLeaseName(TEST_LEASE, 2), paused: true });
    const loops = tickLoops(apps, 400, 50);
    try {
      const ids: string[] = [];
      for (let i = 0; i < 24; i++) ids.push(await submitVia(apps[i % 2]!, { i }));
      const parts = await Promise.all(ids.map(partitionOf));
      const held = ids.filter((_, i) => parts[i] === 2);
      expect(held.length).toBeGreaterThan(0);
      await waitUntil('the other partitions executed', () => succeeded(ids.length - held.length));
      await sleep(600); // more than a tick: partition 2 still starts nothing
      expect(provider.calls.filter((c) => held.includes(c.intentId))).toEqual([]);
      // GET without ?partition= lists every partition's row.
      const all = JSON.parse((await executionControlHandler(apps[0]!, null)(request('GET', '/api/ops/execution'))).body!) as { partitions: { paused: boolean }[] };
      expect(all.partitions.map((c) => c.paused)).toEqual([false, false, true, false]);
      await executionControlHandler(apps[0]!, 'resume')(request('POST', '/api/ops/execution/resume?partition=2'));
      await waitUntil('all succeeded after resume', () => succeeded(ids.length));
    } finally {
      await loops.stop();
    }
  });

  it('retention per partition: each partition\'s leader purges its own terminal intents, fenced by its own lease', async () => {
    const base = config();
    apps = await start(1, { ...base, retention: { ...base.retention, olderThanMs: 1_000, batchSize: 50, maxBatchesPerTick: 2, intervalMs: 60_000 } });
    const [app] = apps as [App];
    const ids: string[] = [];
    for (let i = 0; i < 16; i++) {
      const id = await submitVia(app, { t: i });
      await ctx.setIntentStatus(id, 'succeeded');
      ids.push(id);
    }
    const parts = await Promise.all(ids.map(partitionOf));
    await sleep(1_200);
    const left = async () => new Set((await ctx.intentRows()).map((r) => r.intentId));
    // Partition k's executor, tick after tick (a loaded machine's tick may end before its purge): k's intents alone.
    const purge = async (k: number) => {
      const mine = parts.filter((p) => p === k).length;
      let n = 0;
      for (let i = 0; i < 20 && n < mine; i++) n += (await app.partitions[k]!.executor.tick(600)).purgedIntents;
      return n;
    };
    expect(await purge(2)).toBe(parts.filter((k) => k === 2).length);
    expect([...await left()].sort()).toEqual(ids.filter((_, i) => parts[i] !== 2).sort());
    for (const k of [0, 1, 3]) expect(await purge(k)).toBe(parts.filter((p) => p === k).length);
    expect((await left()).size).toBe(0);
  });

  it('drain one partition: only its epoch moves on; /readyz lists the partitions each instance leads', async () => {
    apps = await start(2);
    const loops = tickLoops(apps, 400, 50);
    try {
      await waitUntil('every partition led', async () => (await holders()).every((r) => r !== null));
      const res = await releaseLeaseHandler(apps[0]!)(request('POST', '/api/ops/lease/release?partition=1'));
      expect(res.status).toBe(202);
      expect(JSON.parse(res.body!)).toMatchObject({ leaseName: partitionLeaseName(TEST_LEASE, 1), status: 'pending' });
      await waitUntil('partition 1 handed over', async () => (await holders())[1]!.leaseEpoch === 2);
      await sleep(600);
      expect((await holders()).map((r) => r!.leaseEpoch)).toEqual([1, 2, 1, 1]);
      const views = await Promise.all(apps.map(async (a) =>
        JSON.parse((await readyz(a)(request('GET', '/api/readyz', undefined, { accept: 'application/json' }))).body!) as
          { mode: string; partitions: { partition: number; leaseEpoch: number }[] }));
      const rows = await holders();
      for (const [i, v] of views.entries()) {
        const mine = rows.flatMap((r, k) => (r!.holderId === apps[i]!.lease.holderId && r!.expiresAt > r!.dbNow ? [k] : []));
        expect(v.partitions.map((p) => p.partition).sort()).toEqual(mine.sort());
        expect(v.mode).toBe(mine.length > 0 ? 'leader' : 'follower');
        // Metrics: the executor's gauges per partition (label `partition`), the instance's own without it.
        const text = await scrape(apps[i]!);
        for (let k = 0; k < P; k++) expect(metric(text, 'is_leader', { partition: String(k) }), `is_leader partition ${k}`).toBe(mine.includes(k) ? 1 : 0);
        expect(text).toMatch(/^provider_breaker_state\{holder_id="[^"]+"\} 0$/m);
      }
    } finally {
      await loops.stop();
    }
  });
});
