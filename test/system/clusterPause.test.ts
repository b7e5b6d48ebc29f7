// Pause, resume and drain without ?partition= act on the cluster, whoever answers: an instance whose
// EXECUTOR_PARTITIONS is below the recorded count (an HTTP-only one, or one of an older deployment) answers for every
// partition of the layout SQL records, and a count change during a pause leaves every partition, new ones included,
// paused. In-process apps on each dialect, every partition's timer run as the local host's every-instance mode runs
// it; "not sent" is judged by the provider's record and the attempt rows, "while paused" by the times the database
// recorded (the pause, the resume, the leases' renewals), never by a local clock.
import { describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { executionControlHandler, releaseLeaseHandler } from '../../src/http/ops.js';
import { partitionLeaseName } from '../../src/limits.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import { startRecordingProvider, type RecordingProvider } from '../support/recordingProvider.js';
import { TEST_LEASE, jsonBody, request, startApps, submitVia, testConfig, timerLoops, waitUntil } from '../support/apps.js';

const P = 4;

interface ControlBody { scope: string; paused: boolean; changedAt: string; partitionCount: number; partitions: { partition: number; paused: boolean; heldBy: string | null }[] }

describe.each(dialects)('cluster pause and drain, answered by any instance: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  let apps: App[] = [];
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    provider = await startRecordingProvider(() => ({ status: 200, delayMs: 10 }));
  }, async () => {
    for (const a of apps) await a.close();
    apps = [];
    await provider?.close();
  });

  /** Records `count`, then starts two executor apps (EXECUTOR_PARTITIONS 4, every-instance) and one app with
   *  `answering` partitions that runs no timer (it only answers HTTP). */
  const start = async (count: number, answering: number) => {
    const seed = await ctx.openStores({ poolMax: 2 });
    await seed.partitions.recordPartitionCount(count, 'test');
    await seed.close();
    const executors = await startApps(ctx, 2, testConfig(provider.url, { EXECUTOR_PARTITIONS: String(P), DB_POOL_MAX: '13' }), undefined, 13, 'every-instance');
    const [http] = await startApps(ctx, 1, testConfig(provider.url, { EXECUTOR_PARTITIONS: String(answering) }));
    apps = [...executors, http!];
    return { executors, http: http!, loops: timerLoops(executors) };
  };
  const leases = (n: number) => Promise.all(Array.from({ length: n }, (_, k) => apps[0]!.stores.lease.get(partitionLeaseName(TEST_LEASE, k))));
  /** Partitions 0..n−1 held by one of the executor apps (by database time). */
  const allLed = async (n: number) => (await leases(n)).every((r) => r !== null && r.expiresAt > r.dbNow && apps.slice(0, 2).some((a) => a.lease.holderId === r.holderId));
  const succeeded = async (n: number) => ((await ctx.statusCounts()).succeeded ?? 0) >= n;
  const post = async (app: App, change: 'pause' | 'resume', query = '') => {
    const b = jsonBody({ reason: `${change} by ${app.lease.holderId}` });
    const r = await executionControlHandler(app, change)(request('POST', `/api/ops/execution/${change}${query}`, b.body, b.headers));
    expect(r.status, r.body).toBe(200);
    return JSON.parse(r.body!) as ControlBody;
  };

  /** Intents submitted after the pause stay unsent while every partition `0..n−1` is led and its leader renewed its
   *  lease at least 1.5 s of database time after the last one was written (refresh 100 ms, ticks of 500 ms: many
   *  refreshes); then resume (through another instance) sends them all, every attempt after the resume was recorded. */
  const heldUntilResumed = async (n: number, ids: string[], resumeVia: App) => {
    const rows = await ctx.intentRows();
    const lastWritten = Math.max(...rows.filter((r) => ids.includes(r.intentId)).map((r) => r.createdAt.getTime()));
    await waitUntil('every partition renewed 1.5 s after the last submit', async () =>
      (await leases(n)).every((r) => r !== null && r.renewedAt.getTime() > lastWritten + 1_500 && r.expiresAt > r.dbNow), 30_000);
    expect(provider.calls.filter((c) => ids.includes(c.intentId))).toEqual([]);
    expect((await ctx.attemptRows()).filter((a) => ids.includes(a.intentId))).toEqual([]);
    const resumed = await post(resumeVia, 'resume');
    expect(resumed).toMatchObject({ scope: 'cluster', paused: false });
    await waitUntil(`all ${ids.length} sent after resume`, async () => (await ctx.attemptRows()).filter((a) => ids.includes(a.intentId) && a.outcome === 'succeeded').length === ids.length, 90_000);
    const attempts = (await ctx.attemptRows()).filter((a) => ids.includes(a.intentId));
    expect(Math.min(...attempts.map((a) => a.startedAt.getTime()))).toBeGreaterThanOrEqual(new Date(resumed.changedAt).getTime());
  };

  it('a pause answered by an EXECUTOR_PARTITIONS=1 instance under a recorded count of 4 holds every partition until resumed', async () => {
    const { executors, http, loops } = await start(P, 1);
    try {
      await waitUntil('partitions 0..3 led', () => allLed(P), 30_000);
      for (let i = 0; i < 8; i++) await submitVia(executors[i % 2]!, { before: i });
      await waitUntil('the first 8 succeeded', () => succeeded(8));
      const paused = await post(http, 'pause');
      expect(paused).toMatchObject({ scope: 'cluster', paused: true, partitionCount: P });
      expect(paused.partitions.map((p) => [p.partition, p.paused, p.heldBy])).toEqual([0, 1, 2, 3].map((k) => [k, false, 'cluster']));
      // ?partition=3 is judged by the recorded count, not by the answering instance's EXECUTOR_PARTITIONS (1).
      const p3 = await executionControlHandler(http, null)(request('GET', '/api/ops/execution?partition=3'));
      expect(p3.status).toBe(200);
      expect(JSON.parse(p3.body!)).toMatchObject({ scope: 'partition', partition: 3, paused: false, heldBy: 'cluster', clusterPaused: true });
      // Partition 4 is beyond the layout: its row can be read (and resumed: a shrink leaves such rows), never paused.
      const p4 = await executionControlHandler(http, null)(request('GET', '/api/ops/execution?partition=4'));
      expect([p4.status, JSON.parse(p4.body!)]).toMatchObject([200, { partition: 4, paused: false, inLayout: false, heldBy: null }]);
      expect((await executionControlHandler(http, 'pause')(request('POST', '/api/ops/execution/pause?partition=4'))).status).toBe(400);
      const ids: string[] = [];
      for (let i = 0; i < 40; i++) ids.push(await submitVia(apps[i % 3]!, { after: i }));
      expect(new Set(await Promise.all(ids.map(async (id) => (await http.stores.intents.get(id))!.partition))).size).toBe(P);
      await heldUntilResumed(P, ids, executors[0]!);
    } finally {
      await loops.stop();
    }
  }, 150_000);

  it('a grow 2 → 4 during a cluster pause (answered by an instance of the 2-partition deployment) leaves the new partitions paused', async () => {
    const { executors, http, loops } = await start(2, 2);
    try {
      await waitUntil('partitions 0..1 led', () => allLed(2), 30_000);
      expect((await post(http, 'pause')).partitions).toHaveLength(2);
      expect((await executors[1]!.stores.partitions.requestChange(P, 'test', uuidv7())).kind).toBe('created');
      await waitUntil('the change to 4 completed', async () => (await http.stores.partitions.readLayout()).active === null, 60_000);
      await waitUntil('partitions 0..3 led', () => allLed(P), 30_000);
      const view = JSON.parse((await executionControlHandler(http, null)(request('GET', '/api/ops/execution'))).body!) as ControlBody;
      expect(view).toMatchObject({ scope: 'cluster', paused: true, partitionCount: P });
      expect(view.partitions.map((p) => p.heldBy)).toEqual(['cluster', 'cluster', 'cluster', 'cluster']);
      const ids: string[] = [];
      for (let i = 0; i < 40; i++) ids.push(await submitVia(apps[i % 3]!, { grown: i }));
      const parts = await Promise.all(ids.map(async (id) => (await http.stores.intents.get(id))!.partition));
      expect(parts.some((k) => k >= 2)).toBe(true);
      await heldUntilResumed(P, ids, executors[0]!);
    } finally {
      await loops.stop();
    }
  }, 150_000);

  it('a drain answered by an EXECUTOR_PARTITIONS=1 instance hands over every partition of the recorded layout', async () => {
    const { http, loops } = await start(P, 1);
    try {
      await waitUntil('partitions 0..3 led', () => allLed(P), 30_000);
      const before = (await leases(P)).map((r) => r!.leaseEpoch);
      const res = await releaseLeaseHandler(http)(request('POST', '/api/ops/lease/release'));
      expect(res.status).toBe(202);
      const body = JSON.parse(res.body!) as { scope: string; partitions: { leaseName: string; status: string }[] };
      expect(body.scope).toBe('cluster');
      expect(body.partitions.map((r) => r.leaseName)).toEqual([0, 1, 2, 3].map((k) => partitionLeaseName(TEST_LEASE, k)));
      await waitUntil('every partition handed over and led again', async () =>
        (await leases(P)).every((r, k) => r !== null && r.leaseEpoch > before[k]!) && allLed(P), 30_000);
      for (let k = 0; k < P; k++) {
        const list = await http.stores.ops.listHandovers(partitionLeaseName(TEST_LEASE, k), 5);
        expect(list.map((r) => r.status), `partition ${k}`).toEqual(['completed']);
      }
    } finally {
      await loops.stop();
    }
  });
});
