// Issue 15, no leaderless gap and the due-intent nudge, against real databases (every dialect):
// a tick that runs out while leading carries its provider calls into the next tick instead of waiting for them
// (so the timer's next occurrence is never skipped), and nothing is lost or sent twice on the way; a NOTIFY from
// an intent write wakes the leader before its refresh interval, and a lost notice still loses nothing. The notice
// tests run where the dialect has notices (`notices`: LISTEN/NOTIFY); SQL Server and MySQL have none, the last test's
// refresh interval is their bound.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { LEASE_NAME, submit } from '../support/instances.js';
import { buildExecutor, intentRow, stalePairs, type Built } from '../support/executorHarness.js';
import { StoreError } from '../../src/store/ports.js';

describe.each(dialects)('tick hand-off and due notices: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  useDialectWithProvider(dialect, (fresh, started) => {
    ctx = fresh;
    provider = started;
  });

  const intent = (id: string) => intentRow(ctx, id);
  const noStaleWrites = async (b: Built) => expect(await stalePairs(ctx, b)).toEqual([]);
  /** The provider holds every answer until the returned `open()`: a call is still out when a tick ends, however
   *  slowly a loaded machine ran that tick. */
  const holdAnswers = (): (() => void) => {
    let open!: () => void;
    const gate = new Promise<void>((r) => (open = r));
    provider.answer = async () => {
      await gate;
      return { status: 200 };
    };
    return open;
  };
  /** Ticks of `budgetMs` until one has started the attempt (a loaded machine may spend a tick acquiring); its summary. */
  const tickUntilStarted = async (b: Built, budgetMs = 200) => {
    let sum = await b.executor.tick(budgetMs);
    for (let i = 0; i < 10 && b.executor.inFlight.size === 0; i++) sum = await b.executor.tick(budgetMs);
    expect(b.executor.inFlight.size).toBe(1);
    return sum;
  };
  let answered = 0;
  const slowAnswer = (delayMs: number) => () => {
    setTimeout(() => answered++, delayMs);
    return { status: 200, delayMs };
  };

  it('a tick that runs out while leading returns without waiting for its call; the next tick writes the 2xx', async () => {
    const b = await buildExecutor(ctx, { providerUrl: provider.url });
    answered = 0;
    provider.answer = slowAnswer(1_500);
    const id = (await submit(b.stores)).intentId;
    const first = await tickUntilStarted(b, 300); // the first tick that starts the attempt is judged
    expect(first).toMatchObject({ role: 'leader', stopReason: 'deadline', started: 1, succeeded: 0 });
    expect(answered).toBe(0); // returned while the provider was still answering
    expect(b.executor.inFlight.size).toBe(1); // carried, not abandoned
    expect((await intent(id)).status).toBe('in_flight');
    await b.executor.inFlight.settled(); // its completion is written between the ticks, or by the next one
    const second = await b.executor.tick(300);
    expect(second).toMatchObject({ role: 'leader', leaseEpoch: first.leaseEpoch, started: 0 });
    expect((await intent(id)).status).toBe('succeeded');
    expect(provider.calls.map((c) => c.intentId)).toEqual([id]); // sent once
    expect((await ctx.attemptRows()).map((a) => [a.attemptNo, a.outcome])).toEqual([[1, 'succeeded']]);
    await noStaleWrites(b);
  });

  it('completions the settler writes between ticks count in the next tick\'s summary (issue 22 item 7)', async () => {
    const b = await buildExecutor(ctx, { providerUrl: provider.url });
    const open = holdAnswers(); // outlives the tick: carried, written after it
    const id = (await submit(b.stores)).intentId;
    const first = await tickUntilStarted(b, 300);
    expect(first).toMatchObject({ role: 'leader', started: 1, succeeded: 0 });
    open();
    const t0 = Date.now(); // written between the ticks, by the settler
    while ((await intent(id)).status !== 'succeeded' && Date.now() - t0 < 10_000) await new Promise((r) => setTimeout(r, 20));
    expect((await intent(id)).status).toBe('succeeded');
    const second = await b.executor.tick(200);
    expect(second).toMatchObject({ role: 'leader', started: 0, succeeded: 1 });
    expect((await b.executor.tick(200)).succeeded).toBe(0); // counted once
    await noStaleWrites(b);
  });

  it('a call carried into the next tick counts against its concurrency and is written there', async () => {
    const b = await buildExecutor(ctx, { providerUrl: provider.url, concurrency: 1 });
    provider.answer = () => ({ status: 200, delayMs: 700 });
    const a = (await submit(b.stores, { n: 1 })).intentId;
    await b.executor.tick(200); // starts a, carries it
    const c = (await submit(b.stores, { n: 2 })).intentId;
    const next = b.executor.tick(3_000);
    await provider.waitFor((calls) => calls.length === 2);
    // b's call was sent only after a's finished: one slot, shared across the two ticks.
    expect(provider.calls[1]!.arrivedAt).toBeGreaterThanOrEqual(provider.calls[0]!.arrivedAt + 650);
    await next;
    await b.executor.drain();
    for (const id of [a, c]) expect((await intent(id)).status).toBe('succeeded');
    await noStaleWrites(b);
  });

  it('shutdown (drain) waits for carried calls and writes their completions before the lease is let go', async () => {
    const b = await buildExecutor(ctx, { providerUrl: provider.url });
    const open = holdAnswers();
    const id = (await submit(b.stores)).intentId;
    await tickUntilStarted(b);
    setTimeout(open, 300); // answered while the drain waits
    await b.executor.drain();
    expect((await intent(id)).status).toBe('succeeded');
    expect(b.executor.completions.size).toBe(0);
    await b.lease.release();
    await noStaleWrites(b);
  });

  it('a step-down between two ticks (local deadline) releases the row only after carried calls are written', async () => {
    const b = await buildExecutor(ctx, { providerUrl: provider.url, leaseMs: 10_000 });
    const open = holdAnswers();
    const id = (await submit(b.stores)).intentId;
    await tickUntilStarted(b);
    b.lease.drop('local_deadline'); // between ticks, while the call is still out
    await new Promise((r) => setTimeout(r, 100));
    expect((await b.stores.lease.listEvents(LEASE_NAME)).map((e) => e.event)).toEqual(['acquired']); // not yet released
    open();
    await b.executor.inFlight.settled();
    const deadline = Date.now() + 5_000;
    while ((await b.stores.lease.listEvents(LEASE_NAME)).length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const events = await b.stores.lease.listEvents(LEASE_NAME);
    expect(events.map((e) => e.event)).toEqual(['acquired', 'released']);
    expect((await intent(id)).status).toBe('succeeded'); // written under the still-valid fence, then released
    const completeSeq = (await ctx.auditLog()).filter((a) => a.action === 'complete_attempts').at(-1)!.seq;
    expect(events[1]!.seq).toBeGreaterThan(completeSeq);
    expect(provider.calls).toHaveLength(1);
    await noStaleWrites(b);
  });

  it('a completion write that fails between ticks drops leadership, is retried, and the row is released only after it', async () => {
    let failures = 2;
    const b = await buildExecutor(ctx, { providerUrl: provider.url, leaseMs: 10_000, wrapStore: (s) => ({
      ...s,
      rebuildStart: (g) => s.rebuildStart(g),
      loadScheduled: (a, l) => s.loadScheduled(a, l),
      refreshPage: (c, l, g) => s.refreshPage(c, l, g),
      fencedRecoverOrphans: (tk) => s.fencedRecoverOrphans(tk),
      fencedStartAttempts: (tk, r) => s.fencedStartAttempts(tk, r),
      async fencedCompleteAttempts(tk, c) {
        if (failures-- > 0) throw new StoreError('transient', 'simulated: canceling statement due to statement timeout', '57014');
        return s.fencedCompleteAttempts(tk, c);
      },
    }) });
    const open = holdAnswers();
    const id = (await submit(b.stores)).intentId;
    expect(await tickUntilStarted(b)).toMatchObject({ stopReason: 'deadline', leaseLost: false });
    open(); // answered between the ticks: the settler writes it
    await b.executor.inFlight.settled();
    const deadline = Date.now() + 5_000;
    while ((await b.stores.lease.listEvents(LEASE_NAME)).length < 2 && Date.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    expect(b.lease.requireLeader()).toBeNull(); // the SQL error dropped leadership between the ticks
    const events = await b.stores.lease.listEvents(LEASE_NAME);
    expect(events.map((e) => e.event)).toEqual(['acquired', 'released']);
    expect((await intent(id)).status).toBe('succeeded'); // the third write went through under the fence
    const completeSeq = (await ctx.auditLog()).filter((a) => a.action === 'complete_attempts').at(-1)!.seq;
    expect(events[1]!.seq).toBeGreaterThan(completeSeq);
    expect(provider.calls).toHaveLength(1);
    await noStaleWrites(b);
  });

  it.skipIf(!dialect.notices)('the leader listens for notices only while it leads, and subscribes again after losing and regaining it', async () => {
    const b = await buildExecutor(ctx, { providerUrl: provider.url, notices: true });
    expect(b.executor.listeningForNotices).toBe(false);
    await b.executor.tick(100);
    expect(b.executor.listeningForNotices).toBe(true);
    b.lease.drop('renew_refused');
    expect(b.executor.listeningForNotices).toBe(false);
    await ctx.expireLeases();
    expect(await b.executor.tick(100)).toMatchObject({ role: 'leader' });
    expect(b.executor.listeningForNotices).toBe(true);
    await b.executor.drain();
    expect(b.executor.listeningForNotices).toBe(false);
  });

  it.skipIf(!dialect.notices)('a notice from an intent write wakes the leader before its refresh interval', async () => {
    const b = await buildExecutor(ctx, { providerUrl: provider.url, refreshMs: 60_000, notices: true, leaseMs: 30_000 });
    expect(b.stores.notices).not.toBeNull();
    const tick = b.executor.tick(20_000);
    await new Promise((r) => setTimeout(r, 300)); // acquired, rebuilt, subscribed, idle until the next refresh (60 s)
    const id = (await submit(b.stores)).intentId;
    await provider.waitFor((calls) => calls.length === 1, 10_000);
    expect(provider.calls[0]!.intentId).toBe(id);
    await b.executor.drain();
    const sum = await tick;
    expect(sum.nudgedRefreshes).toBeGreaterThanOrEqual(1);
    expect(sum.refreshes).toBe(0); // the interval refresh never ran: the notice did it
    expect((await intent(id)).status).toBe('succeeded');
    await noStaleWrites(b);
  });

  it('without notices (a lost NOTIFY, a broken listener) the refresh interval still picks every intent up', async () => {
    const b = await buildExecutor(ctx, { providerUrl: provider.url, refreshMs: 300, notices: false });
    const tick = b.executor.tick(5_000);
    await new Promise((r) => setTimeout(r, 200));
    const ids = [(await submit(b.stores, { n: 1 })).intentId, (await submit(b.stores, { n: 2 })).intentId];
    await provider.waitFor((calls) => calls.length === 2, 10_000);
    await b.executor.drain();
    const sum = await tick;
    expect(sum.nudgedRefreshes).toBe(0);
    expect(sum.refreshes).toBeGreaterThanOrEqual(1);
    for (const id of ids) expect((await intent(id)).status).toBe('succeeded');
  });
});
