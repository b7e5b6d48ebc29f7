// Pause rows the cluster resume leaves: a pause recorded by an earlier release (the row LEASE_NAME, partition 0's own
// flag, which its "Pause" wrote) and the flag of a partition a shrink removed. The documented cluster resume never
// answers "running" while a partition is still held (409, stillHeld), `?partition=all` resumes everything, the
// dashboard offers Resume wherever a flag holds (one partition included), and rows beyond the recorded count are
// listed and clearable (never pausable). Sent or not is judged by the provider's record after leader ticks.
import { afterEach, describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { request, testConfig, TEST_LEASE } from '../support/apps.js';
import { createApp, type App } from '../../src/app.js';
import { executionControlHandler } from '../../src/http/ops.js';
import { overview } from '../../src/http/dashboard/data.js';
import { clusterControlName, partitionLeaseName } from '../../src/limits.js';
import { silentLogger } from '../../src/observability/logger.js';

interface Row { partition: number; paused: boolean; heldBy: string | null; inLayout: boolean }
interface ClusterBody { paused: boolean; running: boolean; stillHeld: number[]; partitions: Row[]; resumed?: { cluster: boolean; partitions: number[] } }

describe.each(dialects)('pause rows a cluster resume leaves: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  let app: App | null = null;
  useDialectWithProvider(dialect, (fresh, started) => {
    ctx = fresh;
    provider = started;
  });
  afterEach(async () => {
    await app?.close();
    app = null;
  });

  const open = async (env: Record<string, string> = {}) => {
    app = await createApp({ config: testConfig(provider.url, { DUE_NOTICES: 'off', ...env }), stores: await ctx.openStores({ poolMax: 4 }),
      logger: silentLogger, migrate: false });
    return app;
  };
  const call = async (a: App, change: 'pause' | 'resume' | null, query = '') => {
    const r = await executionControlHandler(a, change)(request(change ? 'POST' : 'GET', `/api/ops/execution${change ? `/${change}` : ''}${query}`));
    return { status: r.status, type: r.headers['content-type'], body: JSON.parse(r.body!) as ClusterBody & Record<string, unknown> };
  };

  it('a pause recorded before the upgrade (partition 0\'s own row): the cluster resume says 409 stillHeld [0], ?partition=all resumes and the intent is sent', async () => {
    const a = await open();
    // What the previous release's POST /api/ops/execution/pause wrote with EXECUTOR_PARTITIONS=1.
    await a.stores.ops.setPaused(TEST_LEASE, true, 'old release', 'maintenance');
    const id = JSON.parse((await a.handlers.postIntent(request('POST', '/api/intents', JSON.stringify({ payload: { n: 1 } }),
      { 'content-type': 'application/json' }))).body!).intentId as string;

    // The documented resume lifts the cluster's flag (never set) and says plainly what still holds: never 200 "running".
    const resumed = await call(a, 'resume');
    expect([resumed.status, resumed.type]).toEqual([409, 'application/problem+json']);
    expect(resumed.body).toMatchObject({ type: 'urn:submission-manager:problem:execution-still-held', stillHeld: [0],
      execution: { paused: false, running: false, stillHeld: [0], partitions: [{ partition: 0, paused: true, heldBy: 'partition', inLayout: true }] } });
    expect(String(resumed.body.detail)).toContain('?partition=all');
    expect((await call(a, 'resume')).status).toBe(409); // a retry answers the same
    // The single-partition dashboard shows the hold and offers Resume (client.ts: paused || partitionPaused).
    expect((await overview(a)).execution).toMatchObject({ paused: false, partitionPaused: true, partitionPauseReason: 'maintenance', stillHeld: [0] });
    await a.executor.tick(1_500);
    expect(provider.calls.filter((c) => c.intentId === id)).toHaveLength(0); // held, and the answer said so

    const all = await call(a, 'resume', '?partition=all');
    expect(all.status).toBe(200);
    expect(all.body).toMatchObject({ paused: false, running: true, stillHeld: [], resumed: { cluster: false, partitions: [0] } });
    expect((await overview(a)).execution).toMatchObject({ paused: false, partitionPaused: false, stillHeld: [], pausedBeyondLayout: [] });
    await a.executor.tick(1_500);
    await a.executor.tick(1_500);
    expect({ sent: provider.calls.filter((c) => c.intentId === id).length, heldBy: a.partitions[0]!.ops.pausedBy }).toEqual({ sent: 1, heldBy: null });
  });

  it('?partition=all clears the cluster\'s flag and every partition\'s (the old "Pause all" wrote each); a pause of "all" is a 400', async () => {
    const seed = await ctx.openStores({ poolMax: 2 });
    await seed.partitions.recordPartitionCount(2, 'test');
    await seed.close();
    const a = await open({ EXECUTOR_PARTITIONS: '2' });
    for (const k of [0, 1]) await a.stores.ops.setPaused(partitionLeaseName(TEST_LEASE, k), true, 'old release', 'pause all');
    expect((await call(a, 'pause')).body).toMatchObject({ paused: true, running: false, stillHeld: [0, 1] });
    expect((await call(a, 'pause', '?partition=all')).status).toBe(400);
    const r = await call(a, 'resume', '?partition=all');
    expect([r.status, r.body.resumed]).toEqual([200, { cluster: true, partitions: [0, 1] }]);
    expect(r.body.partitions.map((p) => [p.paused, p.heldBy])).toEqual([[false, null], [false, null]]);
    expect((await a.stores.ops.getExecutionControl(TEST_LEASE, clusterControlName(TEST_LEASE)))).toMatchObject({ paused: false, cluster: { paused: false } });
    expect((await call(a, 'resume')).status).toBe(200); // nothing holds: the cluster resume answers running
  });

  it('a partition a shrink removed (4 → 2) keeps its flag: listed beyond the layout, clearable, never pausable', async () => {
    const seed = await ctx.openStores({ poolMax: 2 });
    await seed.partitions.recordPartitionCount(2, 'test');
    await seed.close();
    const a = await open({ EXECUTOR_PARTITIONS: '2' });
    // What a pause of partition 3 under the count 4 left behind the shrink.
    await a.stores.ops.setPaused(partitionLeaseName(TEST_LEASE, 3), true, 'ops', 'partition 3 before the shrink');
    const listed = await call(a, null);
    expect(listed.body).toMatchObject({ running: true, stillHeld: [] }); // it holds nothing now
    expect(listed.body.partitions.map((p) => [p.partition, p.paused, p.heldBy, p.inLayout]))
      .toEqual([[0, false, null, true], [1, false, null, true], [3, true, null, false]]);
    expect((await overview(a)).execution).toMatchObject({ stillHeld: [], pausedBeyondLayout: [3] });
    const one = await call(a, null, '?partition=3');
    expect([one.status, one.body]).toMatchObject([200, { partition: 3, paused: true, inLayout: false, heldBy: null }]);
    expect((await call(a, 'pause', '?partition=3')).status).toBe(400);
    expect((await call(a, 'pause', '?partition=2')).status).toBe(400);
    expect((await call(a, 'resume', '?partition=64')).status).toBe(400);
    const cleared = await call(a, 'resume', '?partition=3');
    expect([cleared.status, cleared.body]).toMatchObject([200, { partition: 3, paused: false }]);
    expect((await call(a, null)).body.partitions.map((p) => p.partition)).toEqual([0, 1]);
    // A later grow finds partition 3 running.
    expect((await a.stores.ops.getExecutionControl(partitionLeaseName(TEST_LEASE, 3))).paused).toBe(false);
  });
});
