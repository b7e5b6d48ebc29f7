// The bridge between ticks never renews; the next tick does. A tick used to wait for the bridge to hand over
// before renewing, so a bridge write whose reply was held (a lost reply waits for the client deadline) held back
// the renew: the local deadline passed, the lease expired, and the next leader sent a 2xx again (campaign on
// 544d11c, every-instance layout: 18 re-sends after a 2xx). The tick now renews beside the hand-over.
import { describe, expect, it } from 'vitest';
import { executorDialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { LEASE_NAME, submit } from '../support/instances.js';
import { buildExecutor, stalePairs, type Built } from '../support/executorHarness.js';
import { until } from '../support/replyFaults.js';

const LEASE_MS = 2_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(executorDialects)('the next tick renews while the bridge is held up: $name', (dialect) => {
  const t = {} as { ctx: DialectContext; provider: RecordingProvider };
  useDialectWithProvider(dialect, (ctx, provider) => {
    t.ctx = ctx;
    t.provider = provider;
  });

  it('a bridge completion whose reply is held for most of a lease costs no renew, no lease and no re-send', async () => {
    let a: Built | null = null;
    const held = { armed: false, count: 0 };
    try {
      a = await buildExecutor(t.ctx, {
        providerUrl: t.provider.url, leaseMs: LEASE_MS, holderId: 'A',
        // Once armed, the bridge's first completion write commits, then its reply is held 1.5 s: more than the
        // renew interval (667 ms), about the local deadline's distance (1.6 s), less than the client deadline.
        wrapStore: (s) => new Proxy(s, {
          get(target, prop, receiver) {
            if (prop !== 'fencedCompleteAttempts') return Reflect.get(target, prop, receiver);
            return async (...args: Parameters<typeof s.fencedCompleteAttempts>) => {
              const out = await target.fencedCompleteAttempts(...args);
              if (!held.armed || held.count > 0) return out;
              held.count++;
              await sleep(1_500); // a slow reply (a lock wait), inside the client deadline: no SQL error, no step-down
              return out;
            };
          },
        }),
      });
      expect((await a.executor.tick(300, true)).role).toBe('leader'); // leaves a bridge running
      held.armed = true;
      const id = (await submit(a.stores, { p: 1 })).intentId;
      await until(() => held.count === 1, 10_000, 'the bridge\'s completion write held');
      // Timer ticks every 400 ms, as the next occurrences would come, for longer than a lease.
      const sums = [];
      for (let i = 0; i < 7; i++) {
        sums.push(await a.executor.tick(300, true));
        await sleep(100);
      }
      const events = (await a.stores.lease.listEvents(LEASE_NAME)).map((e) => `${e.event} ${e.holderId}#${e.leaseEpoch}`);
      // Before: the tick waited for the hand-over (1.6 s) before renewing; the local deadline passed meanwhile.
      expect(sums.map((s) => `${s.role}#${s.leaseEpoch ?? '-'}`), events.join(', ')).toEqual(Array(7).fill('leader#1'));
      expect(sums.some((s) => s.leaseLost)).toBe(false);
      expect(t.provider.calls.filter((c) => c.intentId === id).map((c) => `${c.attemptNo}@${c.leaseEpoch}`)).toEqual(['1@1']);
      expect(await stalePairs(t.ctx, a)).toEqual([]);
    } finally {
      await a?.executor.drain(a.clock.nowMs() + 3_000);
      await a?.lease.release();
      await a?.stores.close();
    }
  }, 45_000);
});
