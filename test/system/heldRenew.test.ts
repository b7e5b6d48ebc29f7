// A renew that commits but whose reply is held until the client gives up (the campaign's lost_renew: seed 200022
// of the every-instance layout). The leader's loop waited for that renew, so a 2xx that came back meanwhile was
// not written while the fence would still accept it; when the renew finally failed, a whole lease later, the row
// had expired, the fence refused, and the next leader recovered the attempt as an orphan and sent it again.
// The renew's wait now writes the completions that arrive meanwhile.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { LEASE_NAME, submit } from '../support/instances.js';
import { buildExecutor, intentRow, stalePairs, type Built } from '../support/executorHarness.js';
import { until } from '../support/replyFaults.js';
import { StoreError } from '../../src/store/ports.js';
import { createLogger } from '../../src/observability/logger.js';
import { withReplyFaults } from '../support/replyFaults.js';

const LEASE_MS = 2_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(dialects)('a renew whose reply is held past the lease: $name', (dialect) => {
  const t = {} as { ctx: DialectContext; provider: RecordingProvider };
  useDialectWithProvider(dialect, (ctx, provider) => {
    t.ctx = ctx;
    t.provider = provider;
  });

  it('a 2xx that comes back while the renew is on the wire is written under the fence: no re-send', async () => {
    const stores = await t.ctx.openStores({ poolMax: 4 });
    // The first renew after the call went out commits; its reply is held a whole lease and more, then lost.
    let committed: () => void = () => {};
    const renewCommitted = new Promise<void>((r) => (committed = r));
    const hold = { armed: false, held: false };
    const realRenew = stores.lease.renew.bind(stores.lease);
    stores.lease.renew = async (...args) => {
      const row = await realRenew(...args);
      if (!hold.armed || hold.held) return row;
      hold.held = true;
      committed();
      await sleep(LEASE_MS + 300);
      throw new StoreError('transient', 'no answer within the client-side deadline (reply held, test)', 'CLIENT_DEADLINE');
    };
    // The provider answers 200 only once that renew has committed: the result arrives while the loop awaits it.
    t.provider.answer = async () => {
      hold.armed = true;
      await renewCommitted;
      return { status: 200 };
    };
    let a: Built | null = null;
    let b: Built | null = null;
    try {
      a = await buildExecutor(t.ctx, { providerUrl: t.provider.url, stores, leaseMs: LEASE_MS, holderId: 'A' });
      b = await buildExecutor(t.ctx, { providerUrl: t.provider.url, leaseMs: LEASE_MS, holderId: 'B' });
      const id = (await submit(stores, { p: 1 })).intentId;
      const sum = await a.executor.tick(5_000); // runs until the held renew fails
      expect(hold.held).toBe(true);
      expect(sum).toMatchObject({ leaseEpoch: 1, stopReason: 'lease_lost' });
      await until(async () => (await b!.executor.tick(300)).role === 'leader', 10_000, 'B leads');
      for (let i = 0; i < 3; i++) await b.executor.tick(300);
      const calls = t.provider.calls.filter((x) => x.intentId === id).map((x) => `${x.attemptNo}@${x.leaseEpoch}`);
      const events = (await stores.lease.listEvents(LEASE_NAME)).map((e) => `${e.event} ${e.holderId}#${e.leaseEpoch}`);
      // Before: the completion waited behind the renew, the fence refused it, B abandoned attempt 1 and sent attempt 2.
      expect(calls, events.join(', ')).toEqual(['1@1']);
      expect((await intentRow(t.ctx, id)).status).toBe('succeeded');
      expect((await t.ctx.attemptRows()).map((r) => [r.attemptNo, r.outcome, r.leaseEpoch])).toEqual([[1, 'succeeded', 1]]);
      expect(await stalePairs(t.ctx, a)).toEqual([]);
    } finally {
      await b?.executor.drain();
      await a?.executor.drain(a.clock.nowMs() + 2_000);
      await b?.lease.release();
      await b?.stores.close();
      await stores.close();
    }
  }, 30_000);

  it('a result the fence refuses (its epoch expired meanwhile) is logged with that epoch and kept', async () => {
    // The evidence a campaign checker (or an operator) reads: a re-send after a 2xx is excused only by this refusal.
    const logs: Array<Record<string, unknown>> = [];
    const logger = createLogger('info', { write: (s: string) => void logs.push(JSON.parse(s) as Record<string, unknown>) });
    let failComplete = true;
    let a: Built | null = null;
    let b: Built | null = null;
    try {
      a = await buildExecutor(t.ctx, { providerUrl: t.provider.url, leaseMs: LEASE_MS, holderId: 'A', logger,
        wrapStore: (s) => withReplyFaults(s, { fencedCompleteAttempts: () => (failComplete ? 'fail' : null) }) });
      b = await buildExecutor(t.ctx, { providerUrl: t.provider.url, leaseMs: LEASE_MS, holderId: 'B', stores: a.stores });
      await submit(a.stores, { p: 1 });
      await a.executor.tick(500);
      await until(() => t.provider.calls.length === 1 && a!.executor.completions.size === 1, 10_000, 'a 2xx left unwritten');
      await sleep(LEASE_MS + 300); // A's row expires (kept, not released: a result is unwritten)
      await until(async () => (await b!.executor.tick(300)).role === 'leader', 10_000, 'B leads');
      failComplete = false; // A's settler reaches the database again: the fence refuses epoch 1
      await until(() => logs.some((l) => l.event === 'completions_fence_refused'), 10_000, 'the refusal logged');
      expect(logs.find((l) => l.event === 'completions_fence_refused')).toMatchObject({ holder_id: 'A', lease_epoch: 1, kept: 1 });
      expect(a.executor.completions.size).toBe(1); // kept for A's next epoch
    } finally {
      await b?.executor.drain(b.clock.nowMs() + 2_000);
      await a?.executor.drain(a.clock.nowMs() + 2_000);
      await b?.lease.release();
      await a?.stores.close();
    }
  }, 45_000);
});
