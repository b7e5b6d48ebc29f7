// Issue 13, liveness under transient faults, against real databases (PGlite and the PostgreSQL server): a
// provider result is never thrown away after a transient SQL error; an SQL error closes the gate before the
// in-flight calls are awaited and the row is released only after their completions are written; rebuild is
// resumable and executes nothing until done; leadership lost during a rebuild or between two ticks.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { LEASE_NAME, submit } from '../support/instances.js';
import { buildExecutor, intentRow, stalePairs, type Built } from '../support/executorHarness.js';
import type { ExecutionStore } from '../../src/store/intentPorts.js';
import { StoreError } from '../../src/store/ports.js';

const CONTRACT = { provider: { url: null }, payload: { bulk: true }, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 50 } };

/** An execution store whose calls can be made to fail (a transient SQL error) or observed. */
function faulty(s: ExecutionStore, f: { failComplete?: () => boolean; failRefresh?: () => boolean; onLoad?: () => void }): ExecutionStore {
  const err = () => new StoreError('transient', 'simulated: canceling statement due to statement timeout', '57014');
  return {
    rebuildStart: (g) => s.rebuildStart(g),
    async loadScheduled(a, l) {
      f.onLoad?.();
      return s.loadScheduled(a, l);
    },
    async refreshPage(c, l, g) {
      if (f.failRefresh?.()) throw err();
      return s.refreshPage(c, l, g);
    },
    fencedRecoverOrphans: (t) => s.fencedRecoverOrphans(t),
    fencedStartAttempts: (t, r) => s.fencedStartAttempts(t, r),
    async fencedCompleteAttempts(t, c) {
      if (f.failComplete?.()) throw err();
      return s.fencedCompleteAttempts(t, c);
    },
  };
}

describe.each(dialects)('liveness: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  useDialectWithProvider(dialect, (fresh, started) => {
    ctx = fresh;
    provider = started;
  });

  const intent = (id: string) => intentRow(ctx, id);
  const noStaleWrites = async (b: Built) => expect(await stalePairs(ctx, b)).toEqual([]);

  it('refresh SQL error mid-call: gate closed before the call ends, its 2xx written, then the row released', async () => {
    let failRefresh = false;
    const b = await buildExecutor(ctx, { providerUrl: provider.url, wrapStore: (s) => faulty(s, { failRefresh: () => failRefresh }) });
    provider.answer = () => ({ status: 200, delayMs: 600 });
    const id = (await submit(b.stores, { n: 1 })).intentId;
    const tick = b.executor.tick(2_000);
    await provider.waitFor((c) => c.length === 1);
    failRefresh = true;
    // The gate closes at the SQL error (≤ one refresh interval), while the provider call is still running.
    const t0 = Date.now();
    while (b.lease.requireLeader() && Date.now() - t0 < 2_000) await new Promise((r) => setTimeout(r, 10));
    expect(b.lease.requireLeader()).toBeNull();
    expect(b.lease.status().mode).toBe('follower'); // what /readyz reports
    expect(provider.calls).toHaveLength(1); // …while the first call is still running
    await submit(b.stores, { n: 2 }); // due now, while the gate is closed
    const sum = await tick;
    expect(sum.stopReason).toBe('sql_error');
    expect(provider.calls).toHaveLength(1); // nothing sent after the error
    expect((await intent(id)).status).toBe('succeeded'); // the 2xx was written, under the fence
    const events = await b.stores.lease.listEvents(LEASE_NAME);
    expect(events.map((e) => e.event)).toEqual(['acquired', 'released']);
    const completeSeq = (await ctx.auditLog()).filter((a) => a.action === 'complete_attempts').at(-1)!.seq;
    expect(events[1]!.seq).toBeGreaterThan(completeSeq); // order: completion written, then the row released
    // The next tick of the same instance acquires at once (a transient fault costs a tick, not a lease).
    failRefresh = false;
    provider.answer = () => ({ status: 200 });
    expect(await b.executor.tick(1_000)).toMatchObject({ role: 'leader', leaseEpoch: 2 });
    await noStaleWrites(b);
  });

  it('a completion write that fails once is retried while closing: the 2xx is written, nothing sent twice', async () => {
    let failures = 1;
    const b = await buildExecutor(ctx, { providerUrl: provider.url,
      wrapStore: (s) => faulty(s, { failComplete: () => failures-- > 0 }) });
    const id = (await submit(b.stores)).intentId;
    const sum = await b.executor.tick(1_000);
    expect(sum.stopReason).toBe('sql_error');
    expect((await intent(id)).status).toBe('succeeded');
    expect(b.executor.completions.size).toBe(0);
    expect(await b.executor.tick(1_000)).toMatchObject({ role: 'leader', leaseEpoch: 2 });
    expect(provider.calls.map((c) => c.intentId)).toEqual([id]);
    await noStaleWrites(b);
  });

  it('completions that could not be written before the row expired are carried into the next epoch, before orphan recovery', async () => {
    let failComplete = true;
    const b = await buildExecutor(ctx, { providerUrl: provider.url, wrapStore: (s) => faulty(s, { failComplete: () => failComplete }) });
    const ids = [(await submit(b.stores, { n: 1 })).intentId, (await submit(b.stores, { n: 2 })).intentId];
    const first = await b.executor.tick(1_000);
    expect(first).toMatchObject({ stopReason: 'sql_error', leaseEpoch: 1 });
    expect(b.executor.completions.size).toBe(2); // kept, not dropped
    expect((await b.stores.lease.listEvents(LEASE_NAME)).map((e) => e.event)).toEqual(['acquired']); // the row is kept
    await ctx.expireLeases(); // it expires
    failComplete = false; // the settler's write under epoch 1 is refused by the fence now: kept for the next epoch
    const second = await b.executor.tick(1_000);
    expect(second).toMatchObject({ role: 'leader', leaseEpoch: 2, recovered: 0 });
    for (const id of ids) expect((await intent(id)).status).toBe('succeeded');
    const attempts = await ctx.attemptRows();
    expect(attempts.map((a) => [a.attemptNo, a.leaseEpoch, a.outcome])).toEqual([[1, 1, 'succeeded'], [1, 1, 'succeeded']]);
    expect(provider.calls).toHaveLength(2); // each sent once
    await noStaleWrites(b);
  });

  it('carried completions of an attempt another leader abandoned change nothing', async () => {
    let failComplete = true;
    const b = await buildExecutor(ctx, { providerUrl: provider.url, wrapStore: (s) => faulty(s, { failComplete: () => failComplete }) });
    const id = (await submit(b.stores)).intentId;
    await b.executor.tick(1_000);
    expect(b.executor.completions.size).toBe(1);
    // Another instance takes the lease and recovers the orphan (attempt 1 abandoned, intent rescheduled).
    const other = await buildExecutor(ctx, { providerUrl: provider.url, stores: b.stores, holderId: 'other' });
    await ctx.expireLeases();
    expect(await other.executor.tick(1_000)).toMatchObject({ role: 'leader', recovered: 1 });
    await other.lease.release();
    failComplete = false;
    expect(await b.executor.tick(300)).toMatchObject({ role: 'leader' });
    expect(b.executor.completions.size).toBe(0);
    const attempts = await ctx.attemptRows();
    expect(attempts.find((a) => a.attemptNo === 1)!.outcome).toBe('abandoned'); // not overwritten by the carried 2xx
    expect((await intent(id)).attemptCount).toBeGreaterThanOrEqual(2);
    await noStaleWrites(b);
  });

  it('rebuild is resumable across ticks and executes nothing until it has finished', async () => {
    let pages = 0;
    const b = await buildExecutor(ctx, { providerUrl: provider.url,
      wrapStore: (s, clock) => faulty(s, { onLoad: () => { pages++; clock.offset += 400; } }) }); // each page takes 400 ms
    await ctx.insertIntentsOneStatement(2_500, CONTRACT); // 3 pages of 1 000
    const ticks = [];
    for (let i = 0; i < 6; i++) {
      const t = await b.executor.tick(700);
      ticks.push(t);
      if (t.stopReason !== 'rebuilding') break;
      expect(t).toMatchObject({ role: 'leader', started: 0 });
      expect(provider.calls).toHaveLength(0); // 2 500 due intents, but the schedule is incomplete
    }
    expect(ticks.length).toBeGreaterThan(1); // the deadline interrupted the load at least once
    expect(pages).toBe(3); // resumed where it stopped, never restarted
    // The schedule is complete: execution starts (in the finishing tick if its budget allows, else the next).
    const t2 = ticks.at(-1)!.started > 0 ? ticks.at(-1)! : await b.executor.tick(700);
    expect(t2.started).toBeGreaterThan(0);
    await noStaleWrites(b);
  });

  it('lease lost during the rebuild: nothing executes, the schedule is dropped', async () => {
    let steal = false;
    const b = await buildExecutor(ctx, { providerUrl: provider.url, wrapStore: (s, clock) => faulty(s, {
      onLoad: () => {
        if (steal) clock.offset += 10_000; // the process stalls past its local deadline mid-rebuild
      },
    }) });
    await submit(b.stores);
    steal = true;
    const sum = await b.executor.tick(1_000);
    expect(sum).toMatchObject({ role: 'leader', stopReason: 'lease_lost', started: 0 });
    expect(b.executor.refresher.schedule.size).toBe(0);
    expect(provider.calls).toHaveLength(0);
  });

  it('lease taken between two ticks: the old leader starts nothing more, the new one executes', async () => {
    const b = await buildExecutor(ctx, { providerUrl: provider.url });
    const first = (await submit(b.stores)).intentId;
    expect(await b.executor.tick(500)).toMatchObject({ role: 'leader', leaseEpoch: 1, succeeded: 1 });
    await ctx.stealLease(LEASE_NAME, 'thief'); // epoch 2, behind our back
    const second = (await submit(b.stores)).intentId;
    const sum = await b.executor.tick(500);
    expect(sum.stopReason).toBe('lease_lost');
    expect(sum.started).toBe(0);
    expect(provider.calls.map((c) => c.intentId)).toEqual([first]);
    expect((await intent(second)).status).toBe('scheduled');
    await noStaleWrites(b);
  });
});
