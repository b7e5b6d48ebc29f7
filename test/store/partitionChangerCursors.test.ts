// The partition changer's cursors and batch sizes across its steps (src/lease/partitionChanger.ts), on each dialect: a
// step cut short by its deadline leaves every pass (preparing, scan, catch-up) to resume from the cursor it recorded,
// so no pass reads a row twice however many steps it takes, and none restarts from its first row; a batch that fails
// at its size (a statement timeout) is made smaller at the next step (src/lease/adaptiveLimit.ts), so it cannot fail
// a step forever. Judged by the reads the changer made (their cursors and sizes, in order) and the change row.
import { describe, expect, it } from 'vitest';
import { PartitionChanger, type ChangerSettings } from '../../src/lease/partitionChanger.js';
import { assignPartition, partitionHash } from '../../src/intents/partition.js';
import { partitionLeaseName } from '../../src/limits.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { systemClock } from '../../src/lease/clock.js';
import { silentLogger } from '../../src/observability/logger.js';
import type { Stores } from '../../src/store/stores.js';
import type { PartitionStore, ReassignScope } from '../../src/store/partitionPorts.js';
import { StoreError } from '../../src/store/ports.js';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectStores } from '../support/dialectFixture.js';

const LEASE = 'cursor-test';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(dialects)('partition changer cursors: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  const more = useDialectStores(dialect, (fresh) => {
    ctx = fresh;
  });
  /** `n` intents due now, ids in insert order. */
  const insert = async (n: number) => {
    const ids: string[] = [];
    for (let i = 0; i < n; i++) {
      const intentId = uuidv7();
      await s.intents.insert({ intentId, idempotencyKey: null, requestHash: 'h', maxAttempts: 3, notBefore: null, partitionKey: null,
        partitionHash: partitionHash(intentId), contract: { provider: { url: null }, payload: {}, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 10 } } });
      ids.push(intentId);
    }
    return ids;
  };

  it('every pass resumes from its recorded cursor at the next step: no read of the table twice, none from the first row again', async () => {
    s = await more(4);
    await s.partitions.recordPartitionCount(2, 'test');
    const ids = await insert(30);
    for (const id of ids.slice(0, 20)) await ctx.setIntentStatus(id, 'succeeded', 120_000); // settled long ago: the preparing pass's
    const out = await s.partitions.requestChange(3, 'test', uuidv7());
    if (out.kind !== 'created') throw new Error(out.kind);

    // Each read and preparing batch takes 60 ms longer than it would, and each step has 100 ms: a pass spans steps.
    const reads: { scope: ReassignScope | 'prepare'; after: string | null; step: number }[] = [];
    let step = 0;
    const slow = new Proxy(s.partitions, {
      get(t, prop, recv) {
        const v = Reflect.get(t, prop, recv) as unknown;
        if (typeof v !== 'function') return v;
        if (prop === 'listForReassign') {
          return async (q: Parameters<PartitionStore['listForReassign']>[0]) => {
            reads.push({ scope: q.scope, after: q.after, step });
            await sleep(60);
            return t.listForReassign(q);
          };
        }
        if (prop === 'prepareBatch') {
          return async (changeId: string, batch: Parameters<PartitionStore['prepareBatch']>[1]) => {
            reads.push({ scope: 'prepare', after: (await t.getChange(changeId))!.prepareCursor, step });
            await sleep(60);
            return t.prepareBatch(changeId, batch);
          };
        }
        return (v as (...a: unknown[]) => unknown).bind(t);
      },
    });
    // COMMIT_GRACE_MS one minute: every row is in the catch-up's window (rows modified since the switch less it).
    const settings: ChangerSettings = { leaseNameOf: (k) => partitionLeaseName(LEASE, k), partitionOf: assignPartition, holderId: 'changer-c',
      durationMs: 10_000, renewIntervalMs: 2_000, safetyMarginMs: 1_000, commitGraceMs: 60_000, refreshIntervalMs: 100, batchSize: 4,
      prepareBatchSize: 4, pollMs: 50, stuckSteps: 5 };
    const changer = new PartitionChanger(s.lease, slow, settings, systemClock, silentLogger);
    let last;
    for (; step < 200 && last?.kind !== 'completed'; step++) last = await changer.step(await s.partitions.readLayout(), systemClock.nowMs() + 100);
    expect(last?.kind).toBe('completed');

    // Per pass, the cursors it read from only ever move forward, across steps, starting from the first row once.
    for (const scope of ['prepare', 'open', 'all'] as const) {
      const afters = reads.filter((r) => r.scope === scope).map((r) => r.after);
      expect(afters[0], scope).toBeNull();
      for (let k = 1; k < afters.length; k++) expect(afters[k]! > (afters[k - 1] ?? ''), `${scope} read ${k}`).toBe(true);
      expect(new Set(reads.filter((r) => r.scope === scope).map((r) => r.step)).size, `${scope}: steps`).toBeGreaterThan(1);
    }
    const change = (await s.partitions.getChange(out.change.changeId))!;
    // Ranges of 4 ids: the seventh ends at ids[27]; the eighth finds fewer than 4 after it and ends the pass there.
    expect(change).toMatchObject({ state: 'completed', prepareCursor: ids[27], catchUpCursor: expect.any(String) });
    const rows = await ctx.intentRows();
    expect(rows.map((r) => r.partition)).toEqual(rows.map((r) => assignPartition(r, 3)));
  });

  it('a batch that fails at its size (a statement timeout) is made smaller at the next step, and the change completes: no timeout fails a step forever', async () => {
    s = await more(4);
    await s.partitions.recordPartitionCount(2, 'test');
    const ids = await insert(24);
    for (const id of ids.slice(0, 12)) await ctx.setIntentStatus(id, 'succeeded', 120_000);
    const out = await s.partitions.requestChange(3, 'test', uuidv7());
    if (out.kind !== 'created') throw new Error(out.kind);
    // Any batch of more than 3 ids or rows times out (as on a server too slow for it), whatever the step.
    const asked: { call: string; limit: number; ok: boolean }[] = [];
    const timingOut = new Proxy(s.partitions, {
      get(t, prop, recv) {
        const v = Reflect.get(t, prop, recv) as unknown;
        if (typeof v !== 'function') return v;
        if (prop !== 'listForReassign' && prop !== 'prepareBatch') return (v as (...a: unknown[]) => unknown).bind(t);
        return async (...args: unknown[]) => {
          const limit = (args.at(-1) as { limit: number }).limit;
          asked.push({ call: prop, limit, ok: limit <= 3 });
          if (limit > 3) throw new StoreError('transient', 'canceling statement due to statement timeout', undefined);
          return (v as (...a: unknown[]) => Promise<unknown>).apply(t, args);
        };
      },
    });
    const settings: ChangerSettings = { leaseNameOf: (k) => partitionLeaseName(LEASE, k), partitionOf: assignPartition, holderId: 'changer-t',
      durationMs: 10_000, renewIntervalMs: 2_000, safetyMarginMs: 1_000, commitGraceMs: 200, refreshIntervalMs: 100, batchSize: 16,
      prepareBatchSize: 16, pollMs: 50, stuckSteps: 5 };
    const changer = new PartitionChanger(s.lease, timingOut, settings, systemClock, silentLogger);
    let last;
    for (let i = 0; i < 100 && last?.kind !== 'completed'; i++) last = await changer.step(await s.partitions.readLayout(), systemClock.nowMs() + 2_000);
    expect(last?.kind).toBe('completed');
    for (const call of ['prepareBatch', 'listForReassign']) {
      // 16, 8, 4 fail, one step each; from then on 2 (and never above 3 again: it grows back only after 8 successes).
      expect(asked.filter((a) => a.call === call).slice(0, 4).map((a) => [a.limit, a.ok]), call).toEqual([[16, false], [8, false], [4, false], [2, true]]);
    }
    const rows = await ctx.intentRows();
    expect(rows.map((r) => r.partition)).toEqual(rows.map((r) => assignPartition(r, 3)));
  });
});
