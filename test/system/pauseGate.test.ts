// The pause's reaction time includes attempts already started but not yet sent: an attempt whose fenced START
// committed before the leader read the cluster's pause, and whose call had not gone out when it read it, is aborted
// at the gate (never sent, no attempt used) and sent after the resume. The START's reply is held on a promise this
// test controls until the leader has read the pause (its own refresh, beside the START in flight), so the order is
// pinned without timing.
import { afterEach, describe, expect, it } from 'vitest';
import { executorDialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { request, testConfig, waitUntil, TEST_LEASE } from '../support/apps.js';
import { createApp, type App } from '../../src/app.js';
import { clusterControlName } from '../../src/limits.js';
import { silentLogger } from '../../src/observability/logger.js';
import type { ExecutionStore } from '../../src/store/intentPorts.js';
import type { Stores } from '../../src/store/stores.js';

describe.each(executorDialects)('pause gate: a started, unsent attempt is not sent after the pause is read: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  let app: App | null = null;
  let stores: Stores | null = null;
  useDialectWithProvider(dialect, (fresh, started) => {
    ctx = fresh;
    provider = started;
  });
  afterEach(async () => { // (before the fixture's: hooks run as a stack)
    await app?.close();
    await stores?.close();
    app = stores = null;
  });

  it('an attempt started before the pause was read is aborted at the gate, then sent after the resume', async () => {
    stores = await ctx.openStores({ poolMax: 4 });
    const base = stores.execution;
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let startsHeld = 0;
    const execution: ExecutionStore = {
      rebuildStart: (g) => base.rebuildStart(g), loadScheduled: (a, l) => base.loadScheduled(a, l), refreshPage: (c, l, g) => base.refreshPage(c, l, g),
      fencedRecoverOrphans: (t) => base.fencedRecoverOrphans(t), fencedCompleteAttempts: (t, c) => base.fencedCompleteAttempts(t, c),
      async fencedStartAttempts(t, r) {
        const out = await base.fencedStartAttempts(t, r); // committed: the attempt is `started`
        if (startsHeld++ === 0) await held; // the first START's reply waits until the pause has been read
        return out;
      },
    };
    app = await createApp({ config: testConfig(provider.url, { DUE_NOTICES: 'off', LEASE_DURATION_MS: '5000' }), stores: { ...stores, execution },
      logger: silentLogger, migrate: false });
    const id = JSON.parse((await app.handlers.postIntent(request('POST', '/api/intents', JSON.stringify({ payload: { n: 1 } }),
      { 'content-type': 'application/json' }))).body!).intentId as string;
    const tick = app.executor.tick(2_500);
    await waitUntil('the START committed and its reply is held', () => startsHeld === 1, 10_000);
    await stores.ops.setPaused(clusterControlName(TEST_LEASE), true, 'test', 'gate');
    await waitUntil('the leader read the pause (its refresh, beside the START in flight)', () => app!.partitions[0]!.ops.paused === true, 10_000);
    release();
    const sum = await tick;
    expect(sum.role).toBe('leader');
    expect(provider.calls.filter((c) => c.intentId === id)).toEqual([]); // never sent
    expect((await ctx.attemptRows()).filter((a) => a.intentId === id).map((a) => a.outcome)).toEqual(['aborted']);
    expect((await ctx.intentRows()).find((r) => r.intentId === id)!.status).toBe('scheduled');
    await stores.ops.setPaused(clusterControlName(TEST_LEASE), false, 'test', null);
    await app.executor.tick(1_500);
    expect(provider.calls.filter((c) => c.intentId === id)).toHaveLength(1);
    expect((await ctx.intentRows()).find((r) => r.intentId === id)!.status).toBe('succeeded');
  });
});
