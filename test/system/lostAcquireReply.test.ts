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
      while (Date.now() - t0 < 6_000 && !firstLeaderAt) {
        const sum = await built.executor.tick(200);
        roles.push(`${sum.role}#${sum.leaseEpoch ?? '-'}`);
        if (sum.role === 'leader') firstLeaderAt = Date.now() - t0;
        else await sleep(100);
      }
      expect(roles).toEqual(['follower#-', 'leader#2']); // one follower tick (the lost reply), then epoch 2
      const events = (await stores.lease.listEvents(LEASE_NAME)).map((e) => `${e.event}#${e.leaseEpoch}`);
      expect(events).toEqual(['acquired#1', 'released#1', 'acquired#2']);
      await t.provider.waitFor((c) => c.some((x) => x.intentId === id), 5_000);
      expect(t.provider.calls.find((x) => x.intentId === id)!.leaseEpoch).toBe(2);
    } finally {
      await built?.executor.drain();
      await built?.lease.release();
      await stores.close();
    }
  });
});
