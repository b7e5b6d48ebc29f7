// The pause's reaction time includes attempts already started but not yet sent: an attempt whose fenced START
// committed before the leader read the cluster's pause, and whose call had not gone out when it read it, is aborted
// at the gate (never sent, no attempt used) and sent after the resume. The START's reply is held on a promise this
// test controls until the leader has read the pause (its own refresh, beside the START in flight), so the order is
// pinned without timing. A send also rests on a control read begun within one refresh interval: after a stall of
// the process (the event loop blocked past the interval, as a stopped or starved process is), the gate reads the
// flags again before the call goes out. So does a START: when the refresh's control read (the one right before a START
// is issued for the intent that refresh brought in) returns its "not paused" only after a stall past the interval,
// with the pause committed meanwhile, the leader reads the flags again and starts nothing (no attempt row at all).
import { describe, expect, it } from 'vitest';
import { dialects } from '../support/dialects.js';
import { request, waitUntil, TEST_LEASE } from '../support/apps.js';
import { delegateExecution, useWrappedApp } from '../support/wrappedApp.js';
import { clusterControlName } from '../../src/limits.js';

describe.each(dialects)('pause gate: a started, unsent attempt is not sent after the pause is read: $name', (dialect) => {
  const f = useWrappedApp(dialect);

  it('an attempt started before the pause was read is aborted at the gate, then sent after the resume', async () => {
    let release!: () => void;
    const held = new Promise<void>((r) => (release = r));
    let startsHeld = 0;
    const { app, stores } = await f.open((base) => delegateExecution(base, {
      async fencedStartAttempts(t, r) {
        const out = await base.fencedStartAttempts(t, r); // committed: the attempt is `started`
        if (startsHeld++ === 0) await held; // the first START's reply waits until the pause has been read
        return out;
      },
    }), { DUE_NOTICES: 'off', LEASE_DURATION_MS: '5000' });
    const { ctx, provider } = f;
    const id = JSON.parse((await app.handlers.postIntent(request('POST', '/api/intents', JSON.stringify({ payload: { n: 1 } }),
      { 'content-type': 'application/json' }))).body!).intentId as string;
    const tick = app.executor.tick(2_500);
    await waitUntil('the START committed and its reply is held', () => startsHeld === 1, 10_000);
    await stores.ops.setPaused(clusterControlName(TEST_LEASE), true, 'test', 'gate');
    await waitUntil('the leader read the pause (its refresh, beside the START in flight)', () => app.partitions[0]!.ops.paused === true, 10_000);
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

  it('after a stall longer than the refresh interval, the gate reads the pause again before sending', async () => {
    const intervalMs = 1_000; // the cadence's next control read is this far away while the START and the pause run
    let startsSeen = 0;
    const { app, stores } = await f.open((base) => delegateExecution(base, {
      async fencedStartAttempts(t, r) {
        const began = performance.now(); // the leader's last control read began before this
        const out = await base.fencedStartAttempts(t, r);
        if (startsSeen++ === 0) {
          await stores.ops.setPaused(clusterControlName(TEST_LEASE), true, 'test', 'stall');
          while (performance.now() - began < intervalMs * 1.2) { /* a stall: no timer, no read, no reply runs */ }
        }
        return out;
      },
    }), { DUE_NOTICES: 'off', LEASE_DURATION_MS: '10000', SCHEDULE_REFRESH_INTERVAL_MS: String(intervalMs) });
    const { ctx, provider } = f;
    const id = JSON.parse((await app.handlers.postIntent(request('POST', '/api/intents', JSON.stringify({ payload: { n: 2 } }),
      { 'content-type': 'application/json' }))).body!).intentId as string;
    const sum = await app.executor.tick(3_000);
    expect(sum.role).toBe('leader');
    expect(startsSeen).toBeGreaterThan(0);
    expect(provider.calls.filter((c) => c.intentId === id)).toEqual([]); // the stale "not paused" sent nothing
    expect(app.partitions[0]!.ops.paused).toBe(true);
    expect((await ctx.attemptRows()).filter((a) => a.intentId === id).map((a) => a.outcome)).toEqual(['aborted']);
  });

  it('after a stall longer than the refresh interval, a START reads the pause first: nothing is started while paused', async () => {
    const intervalMs = 1_000;
    let id: string | undefined;
    let armed = false; // a refresh has brought the intent into the schedule: its control read comes next
    let stalled = false;
    const startsAsked: string[] = [];
    const { app, stores } = await f.open((base) => delegateExecution(base, {
      async refreshPage(c, l, g) {
        const page = await base.refreshPage(c, l, g);
        if (id !== undefined && page.rows.some((r) => r.intentId === id)) armed = true;
        return page;
      },
      async fencedStartAttempts(t, r) {
        startsAsked.push(...r.map((x) => x.intentId));
        return base.fencedStartAttempts(t, r);
      },
    }), { DUE_NOTICES: 'off', LEASE_DURATION_MS: '10000', SCHEDULE_REFRESH_INTERVAL_MS: String(intervalMs) });
    let reads = 0;
    const read = stores.ops.getExecutionControl.bind(stores.ops);
    stores.ops.getExecutionControl = async (...a) => {
      reads++;
      const began = performance.now(); // the leader's read began before this
      const out = await read(...a); // not paused yet
      if (armed && !stalled) { // the refresh's read, just before the START the intent is due for
        stalled = true;
        await stores.ops.setPaused(clusterControlName(TEST_LEASE), true, 'test', 'stall before start');
        while (performance.now() - began < intervalMs * 1.2) { /* a stall: the "not paused" it returns is stale */ }
      }
      return out;
    };
    const { ctx, provider } = f;
    const tick = app.executor.tick(4_000);
    await waitUntil('the leader read its flags (the schedule is loaded: the intent comes in by a refresh)', () => reads > 0, 10_000);
    id = JSON.parse((await app.handlers.postIntent(request('POST', '/api/intents', JSON.stringify({ payload: { n: 3 } }),
      { 'content-type': 'application/json' }))).body!).intentId as string;
    const sum = await tick;
    expect(sum.role).toBe('leader');
    expect(stalled).toBe(true);
    expect(app.partitions[0]!.ops.paused).toBe(true);
    expect(startsAsked).not.toContain(id); // the stale "not paused" started nothing
    expect((await ctx.attemptRows()).filter((a) => a.intentId === id)).toEqual([]);
    expect(provider.calls.filter((c) => c.intentId === id)).toEqual([]);
    await stores.ops.setPaused(clusterControlName(TEST_LEASE), false, 'test', null);
    await app.executor.tick(1_500);
    expect(provider.calls.filter((c) => c.intentId === id)).toHaveLength(1); // it was due: started once resumed
  });
});
