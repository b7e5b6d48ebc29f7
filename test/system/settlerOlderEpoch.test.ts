// Review of 2a08e64 (#24, executor part): the settler writes under the newest token this process led under, while
// the next tick may already lead a newer epoch. A write under the older token that was on the wire when the newer
// epoch began comes back refused: that refusal must not step down the newer epoch (LeaderFaults.fenceRefusedSettling:
// a step-down only while that token still leads), and the tick's CARRY writes the result under the new
// fence. Fails if the settler's refusal drops unconditionally (the tick ends 'lease_lost').
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { submit } from '../support/instances.js';
import { buildExecutor, intentRow, type Built } from '../support/executorHarness.js';
import { until } from '../support/replyFaults.js';
import { StoreError } from '../../src/store/ports.js';
import type { ExecutionStore } from '../../src/store/intentPorts.js';

const LEASE_MS = 2_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(dialects)('the settler under an older epoch: $name', (dialect) => {
  const t = {} as { ctx: DialectContext; provider: RecordingProvider };
  useDialectWithProvider(dialect, (ctx, provider) => {
    t.ctx = ctx;
    t.provider = provider;
  });

  it('a settler write under epoch 1 refused after epoch 2 began leaves epoch 2 leading; the carry writes it', async () => {
    const f = { mode: 'fail' as 'fail' | 'hold' | 'pass', heldStarted: false, release: () => {} };
    const gate = new Promise<void>((r) => (f.release = r));
    const wrap = (s: ExecutionStore): ExecutionStore => {
      const real = s.fencedCompleteAttempts.bind(s);
      return {
        rebuildStart: s.rebuildStart.bind(s), loadScheduled: s.loadScheduled.bind(s), refreshPage: s.refreshPage.bind(s),
        fencedRecoverOrphans: s.fencedRecoverOrphans.bind(s), fencedStartAttempts: s.fencedStartAttempts.bind(s),
        fencedCompleteAttempts: async (token, batch) => {
          if (token.leaseEpoch === 1 && f.mode === 'fail') throw new StoreError('transient', 'simulated reset (test)', 'ECONNRESET');
          if (token.leaseEpoch === 1 && f.mode === 'hold') {
            f.heldStarted = true;
            await gate; // on the wire until epoch 2 has begun
          }
          return real(token, batch);
        },
      };
    };
    let a: Built | null = null;
    try {
      a = await buildExecutor(t.ctx, { providerUrl: t.provider.url, leaseMs: LEASE_MS, holderId: 'A', wrapStore: wrap });
      const id = (await submit(a.stores, { p: 1 })).intentId;
      await a.executor.tick(500);
      await until(() => t.provider.calls.length === 1 && a!.executor.completions.size === 1 && a!.lease.requireLeader() === null,
        10_000, 'a 2xx unwritten, stepped down (SQL error)');
      await sleep(LEASE_MS + 300); // the row (kept: a result is unwritten) expires
      f.mode = 'hold';
      await until(() => f.heldStarted, 5_000, 'the settler\'s write under epoch 1 on the wire');
      const ticking = a.executor.tick(1_000);
      await until(() => a!.lease.requireLeader()?.leaseEpoch === 2, 5_000, 'A leads epoch 2');
      f.mode = 'pass';
      f.release(); // epoch 1's write reaches the database now: the fence refuses it
      const sum = await ticking;
      expect(sum).toMatchObject({ role: 'leader', leaseEpoch: 2 });
      expect(sum.stopReason).not.toBe('lease_lost');
      expect(a.lease.requireLeader()?.leaseEpoch).toBe(2);
      expect(a.executor.completions.size).toBe(0);
      expect((await intentRow(t.ctx, id)).status).toBe('succeeded');
      expect(t.provider.calls.map((x) => `${x.attemptNo}@${x.leaseEpoch}`)).toEqual(['1@1']);
    } finally {
      f.release();
      await a?.executor.drain(a.clock.nowMs() + 2_000);
      await a?.lease.release();
      await a?.stores.close();
    }
  }, 30_000);
});
