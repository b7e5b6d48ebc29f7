// Issue 22 item 2: the order "SQL error → gate closed → calls awaited", pinned without polling. The provider call
// is held open on a promise this test controls; once the refresh statement has failed and its rejection has run
// its course (microtasks only: nothing awaits I/O between the failure and the drop), the gate must already be
// closed and /readyz must say follower, while that call is still outstanding. A drop deferred until the calls
// in flight have settled fails here (checked by making that change in batch.ts's fail()).
import { describe, expect, it } from 'vitest';
import { dialects } from '../support/dialects.js';
import { request } from '../support/apps.js';
import { delegateExecution, useWrappedApp } from '../support/wrappedApp.js';
import { readyz } from '../../src/http/health.js';
import { StoreError } from '../../src/store/ports.js';

describe.each(dialects)('gate order on an SQL error: $name', (dialect) => {
  const f = useWrappedApp(dialect);

  it('the gate is closed and /readyz says follower while the provider call is still outstanding', async () => {
    let failRefresh = false;
    let refreshFailed!: () => void;
    const failed = new Promise<void>((r) => (refreshFailed = r));
    const { app } = await f.open((base) => delegateExecution(base, {
      async refreshPage(c, l, g) {
        if (!failRefresh) return base.refreshPage(c, l, g);
        refreshFailed();
        throw new StoreError('transient', 'simulated: canceling statement due to statement timeout', '57014');
      },
    }), { DUE_NOTICES: 'off' });
    const provider = f.provider;
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
    expect((await f.ctx.intentRows()).find((r) => r.intentId === id)!.status).toBe('succeeded'); // its 2xx written
  });
});
