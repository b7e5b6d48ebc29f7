// Issue 20 item 3: an acquire that commits but whose reply is lost (a client deadline, a reset after commit) must
// cost a tick, not a lease. A LeaseStore wrapper commits the first acquire and then throws. The next tick hands the
// unseen epoch back (conditional on it) and leads with the next one; the intent submitted meanwhile runs under it.
// Before the fix: no leader until the lost epoch's row expired (a 3 s lease: about ten 300-ms ticks).
import { describe, expect, it } from 'vitest';
import { dialects } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { DialectContext } from '../support/dialects.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { submit, LEASE_NAME } from '../support/instances.js';
import { buildExecutor, type Built } from '../support/executorHarness.js';
import { StoreError } from '../../src/store/ports.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(dialects)('acquire with a lost reply: $name', (dialect) => {
  const t = {} as { ctx: DialectContext; provider: RecordingProvider };
  useDialectWithProvider(dialect, (ctx, provider) => {
    t.ctx = ctx;
    t.provider = provider;
  });

  it('the first leader tick comes one tick after the lost reply, not after the lease expires', async () => {
    const stores = await t.ctx.openStores({ poolMax: 4 });
    const realAcquire = stores.lease.tryAcquire.bind(stores.lease);
    let lost = 0;
    stores.lease.tryAcquire = async (...args) => {
      const out = await realAcquire(...args); // committed …
      if (lost++ === 0) throw new StoreError('transient', 'Query read timeout (reply lost after commit)', 'ETIMEDOUT'); // … reply lost
      return out;
    };
    let built: Built | null = null;
    try {
      built = await buildExecutor(t.ctx, { providerUrl: t.provider.url, stores, leaseMs: 3_000 });
      const id = (await submit(stores, { p: 1 })).intentId;
      const roles: string[] = [];
      const t0 = Date.now();
      let firstLeaderAt = 0;
      while (Date.now() - t0 < 15_000 && !firstLeaderAt) { // a liveness guard; the bound is judged on the database's times
        const sum = await built.executor.tick(200);
        roles.push(`${sum.role}#${sum.leaseEpoch ?? '-'}`);
        if (sum.role === 'leader') firstLeaderAt = Date.now() - t0;
        else await sleep(100);
      }
      // The lost reply's tick is a follower's; the next tick finds the row its own and leads under epoch 2 (a loaded
      // machine's 200-ms tick may end before that acquire: then a later one), never waiting out epoch 1's lease.
      expect(roles[0]).toBe('follower#-');
      expect(roles.at(-1)).toBe('leader#2');
      expect(roles.slice(1, -1).every((r) => r === 'follower#-'), roles.join(' ')).toBe(true);
      const rows = await stores.lease.listEvents(LEASE_NAME);
      expect(rows.map((e) => `${e.event}#${e.leaseEpoch}`)).toEqual(['acquired#1', 'released#1', 'acquired#2']);
      expect(rows[2]!.at.getTime(), 'epoch 2 acquired before epoch 1 would have expired').toBeLessThan(rows[0]!.at.getTime() + 3_000);
      // Sent by epoch 2: at that leading tick, or (a loaded machine's 200-ms tick ended first) at a later one.
      for (let i = 0; i < 50 && !t.provider.calls.some((x) => x.intentId === id); i++) await built.executor.tick(200);
      expect(t.provider.calls.find((x) => x.intentId === id)!.leaseEpoch).toBe(2);
    } finally {
      await built?.executor.drain();
      await built?.lease.release();
      await stores.close();
    }
  });

  it('results of an earlier epoch are written under the unseen epoch before it is handed back: no re-send by an instance acquiring in the gap', async () => {
    const stores = await t.ctx.openStores({ poolMax: 4 });
    const flags = { failComplete: true, loseAcquire: false, raceOnRelease: false };
    const realAcquire = stores.lease.tryAcquire.bind(stores.lease);
    stores.lease.tryAcquire = async (...args) => {
      const out = await realAcquire(...args);
      if (flags.loseAcquire) {
        flags.loseAcquire = false;
        throw new StoreError('transient', 'Query read timeout (reply lost after commit)', 'ETIMEDOUT');
      }
      return out;
    };
    let b: Built | null = null;
    const realRelease = stores.lease.release.bind(stores.lease);
    stores.lease.release = async (token) => {
      const released = await realRelease(token);
      if (flags.raceOnRelease && released) await b!.executor.tick(300); // another instance acquires in the gap
      return released;
    };
    let a: Built | null = null;
    try {
      a = await buildExecutor(t.ctx, { providerUrl: t.provider.url, stores, leaseMs: 2_000, holderId: 'A', wrapStore: (store) => ({
        rebuildStart: (...x) => store.rebuildStart(...x), loadScheduled: (...x) => store.loadScheduled(...x),
        refreshPage: (...x) => store.refreshPage(...x), fencedRecoverOrphans: (...x) => store.fencedRecoverOrphans(...x),
        fencedStartAttempts: (...x) => store.fencedStartAttempts(...x),
        fencedCompleteAttempts: async (...x) => {
          if (flags.failComplete) throw new StoreError('transient', 'complete failed (test)', 'ECONNRESET');
          return store.fencedCompleteAttempts(...x);
        },
      }) });
      b = await buildExecutor(t.ctx, { providerUrl: t.provider.url, leaseMs: 2_000, holderId: 'B' });
      const id = (await submit(stores, { p: 1 })).intentId;
      // Epoch A#1 sends the intent (2xx) but cannot write its completion: carried, the row kept until it expires.
      expect((await a.executor.tick(300)).leaseEpoch).toBe(1);
      // (On a loaded runner the 300-ms tick may end before the call goes out: further ticks of epoch 1 send it.)
      for (let i = 0; i < 10 && !t.provider.calls.some((x) => x.intentId === id); i++) expect((await a.executor.tick(300)).leaseEpoch).toBe(1);
      await t.provider.waitFor((c) => c.some((x) => x.intentId === id), 5_000);
      await sleep(2_300); // A#1 expired; the settler's writes under epoch 1 can only be refused from now on
      flags.failComplete = false;
      flags.loseAcquire = true;
      expect((await a.executor.tick(300)).role).toBe('follower'); // A#2 committed, its reply lost
      flags.raceOnRelease = true;
      await a.executor.tick(300); // A finds its unseen A#2 and hands it back; B acquires at once
      flags.raceOnRelease = false;
      for (let i = 0; i < 3; i++) await b.executor.tick(300);
      const events = (await stores.lease.listEvents(LEASE_NAME)).map((e) => `${e.event} ${e.holderId}#${e.leaseEpoch}`);
      const calls = t.provider.calls.filter((x) => x.intentId === id).map((x) => `${x.attemptNo}@${x.leaseEpoch}`);
      // Before: the 2xx was written only at A's next epoch, which B took first: B abandoned attempt 1 and sent it again.
      expect(calls, events.join(', ')).toEqual(['1@1']);
      expect((await t.ctx.intentRows()).find((r) => r.intentId === id)!.status).toBe('succeeded');
      expect(events).toContain('acquired B#3');
    } finally {
      await b?.executor.drain();
      await a?.executor.drain(a.clock.nowMs() + 2_000);
      await b?.lease.release();
      await b?.stores.close();
      await stores.close();
    }
  }, 30_000);
});
