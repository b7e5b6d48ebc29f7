// Issue 22 item 2: the order "SQL error → gate closed → calls awaited", pinned without polling. The provider call
// is held open on a promise this test controls; once the refresh statement has failed and its rejection has run
// its course (microtasks only: nothing awaits I/O between the failure and the drop), the gate must already be
// closed and /readyz must say follower, while that call is still outstanding. A drop deferred until the calls
// in flight have settled fails here (checked by making that change in batch.ts's fail()).
import { afterEach, describe, expect, it } from 'vitest';
import { executorDialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { request, testConfig } from '../support/apps.js';
import { createApp, type App } from '../../src/app.js';
import { readyz } from '../../src/http/health.js';
import { silentLogger } from '../../src/observability/logger.js';
import { StoreError } from '../../src/store/ports.js';
import type { ExecutionStore } from '../../src/store/intentPorts.js';
import type { Stores } from '../../src/store/stores.js';

describe.each(executorDialects)('gate order on an SQL error: $name', (dialect) => {
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

  it('the gate is closed and /readyz says follower while the provider call is still outstanding', async () => {
    let failRefresh = false;
    let refreshFailed!: () => void;
    const failed = new Promise<void>((r) => (refreshFailed = r));
    stores = await ctx.openStores({ poolMax: 4 });
    const base = stores.execution;
    const execution: ExecutionStore = {
      rebuildStart: (g) => base.rebuildStart(g), loadScheduled: (a, l) => base.loadScheduled(a, l),
      fencedRecoverOrphans: (t) => base.fencedRecoverOrphans(t), fencedStartAttempts: (t, r) => base.fencedStartAttempts(t, r),
      fencedCompleteAttempts: (t, c) => base.fencedCompleteAttempts(t, c),
      async refreshPage(c, l, g) {
        if (!failRefresh) return base.refreshPage(c, l, g);
        refreshFailed();
        throw new StoreError('transient', 'simulated: canceling statement due to statement timeout', '57014');
      },
    };
    app = await createApp({ config: testConfig(provider.url, { DUE_NOTICES: 'off' }), stores: { ...stores, execution },
      logger: silentLogger, migrate: false });
    let answer!: () => void;
    const held = new Promise<void>((r) => (answer = r));
    let answered = false;
    provider.answer = async () => {
      await held; // the call stays outstanding until the test answers it
      answered = true;
      return { status: 200 };
    };
    const id = JSON.parse((await app.handlers.postIntent(request('POST', '/api/intents', JSON.stringify({ payload: { n: 1 } }),
      { 'content-type': 'application/json' }))).body!).intentId as string;
    const tick = app.executor.tick(3_000);
    await provider.waitFor((calls) => calls.length === 1); // the call is on the wire, held
    failRefresh = true; // the next refresh fails
    await failed;
    await new Promise((r) => setImmediate(r)); // the rejection's microtasks have all run: no I/O before the drop
    expect(answered).toBe(false);
    expect(app.executor.inFlight.size).toBe(1); // the call is still outstanding…
    expect(app.lease.requireLeader()).toBeNull(); // …and the gate is already closed
    const ready = await readyz(app)(request('GET', '/api/readyz', undefined, { accept: 'application/json' }));
    expect(JSON.parse(ready.body!)).toMatchObject({ mode: 'follower' });
    expect(answered).toBe(false); // (still outstanding after /readyz answered)
    answer();
    const sum = await tick;
    expect(sum.stopReason).toBe('sql_error');
    expect(provider.calls).toHaveLength(1);
    expect((await ctx.intentRows()).find((r) => r.intentId === id)!.status).toBe('succeeded'); // its 2xx written
  });
});
