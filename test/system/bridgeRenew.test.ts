// The bridge between ticks renews when due until the timer's next occurrence; the next tick renews beside the
// hand-over. A tick used to wait for the bridge to hand over before renewing, so a bridge write whose reply was held
// (a lost reply waits for the client deadline) held back the renew: the local deadline passed, the lease expired,
// and the next leader sent a 2xx again (campaign on 544d11c, every-instance layout: 18 re-sends after a 2xx).
// A bridge that never renewed left a renew gap of a whole tick period instead of LEASE_RENEW_INTERVAL_MS, so a
// stalled write (a lost reply) ran into the local deadline sooner than the renew interval promises.
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
      expect((await a.executor.tick(300, 400)).role).toBe('leader'); // leaves a bridge running
      held.armed = true;
      const id = (await submit(a.stores, { p: 1 })).intentId;
      await until(() => held.count === 1, 10_000, 'the bridge\'s completion write held');
      // Timer ticks every 400 ms, as the next occurrences would come, for longer than a lease.
      const sums = [];
      for (let i = 0; i < 7; i++) {
        sums.push(await a.executor.tick(300, 400));
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

  it('the bridge renews every renew interval until the next occurrence, then stops renewing and steps down at its deadline', async () => {
    const RENEW_MS = Math.floor(LEASE_MS / 3); // the harness's renew interval
    const NEXT_TICK_MS = 2_000;
    const renews: number[] = [];
    const stores = await t.ctx.openStores({ poolMax: 4 });
    const lease = stores.lease;
    let a: Built | null = null;
    try {
      a = await buildExecutor(t.ctx, {
        providerUrl: t.provider.url, leaseMs: LEASE_MS, holderId: 'A',
        refreshMs: 10_000, // nothing else wakes an idle bridge: only a renew that is due
        stores: { ...stores, lease: new Proxy(lease, {
          get(target, prop, receiver) {
            if (prop !== 'renew') return Reflect.get(target, prop, receiver);
            return async (...args: Parameters<typeof lease.renew>) => {
              const sentAt = performance.now(); // the renew interval counts from the send
              const out = await target.renew(...args);
              if (out) renews.push(sentAt);
              return out;
            };
          },
        }) },
      });
      const called = performance.now();
      expect(await a.executor.tick(200, NEXT_TICK_MS)).toMatchObject({ role: 'leader', stopReason: 'deadline' });
      const horizon = called + NEXT_TICK_MS;
      await until(() => a!.lease.requireLeader() === null, NEXT_TICK_MS + LEASE_MS + 3_000, 'the bridge steps down');
      const steppedDown = performance.now();
      const bridgeRenews = renews.filter((r) => r > called + 200);
      // Renewed on time up to the next occurrence (a loaded machine is allowed 300 ms of lateness per renew) …
      const gaps = [called + 200, ...bridgeRenews].slice(1).map((r, i, all) => r - (i === 0 ? called + 200 : all[i - 1]!));
      expect(bridgeRenews.length, `renews at ${bridgeRenews.map((r) => Math.round(r - called)).join(', ')} ms`).toBeGreaterThanOrEqual(2);
      for (const g of gaps) expect(g).toBeLessThanOrEqual(RENEW_MS + 300);
      // … and not after it: a leader whose ticks stop steps down a lease after its last renew, before the row expires.
      expect(Math.max(...bridgeRenews)).toBeLessThanOrEqual(horizon + 50);
      expect(steppedDown - Math.max(...bridgeRenews)).toBeLessThan(LEASE_MS + 500);
      expect(steppedDown).toBeGreaterThan(horizon);
    } finally {
      await a?.executor.drain(a.clock.nowMs() + 3_000);
      await a?.lease.release();
      await stores.close();
    }
  }, 45_000);
});
