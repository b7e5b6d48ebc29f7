// A partition change that does not progress, and its cancel, with the changer (src/lease/partitionChanger.ts) on each
// dialect against real stores: steps that fail on a real fault (a row lock another connection holds, past the
// statement timeout) are counted in the change row and, from PARTITION_CHANGE_STUCK_STEPS on, reported stuck (an
// error log naming the reason); a step that does not fail resets the count. A cancel while the changer waits for a
// lease, or between its claim and its fenced switch, leaves it holding nothing and writing nothing (count, generation
// and in-flight work as they were).
import { describe, expect, it } from 'vitest';
import { PartitionChanger, type ChangerSettings } from '../../src/lease/partitionChanger.js';
import { assignPartition } from '../../src/intents/partition.js';
import { partitionLeaseName } from '../../src/limits.js';
import { systemClock } from '../../src/lease/clock.js';
import { preparingHorizon } from '../../src/lease/changeReassignment.js';
import { createLogger, silentLogger } from '../../src/observability/logger.js';
import type { PartitionStore } from '../../src/store/partitionPorts.js';
import type { Stores } from '../../src/store/stores.js';
import { StoreError } from '../../src/store/ports.js';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import { changeArrangement } from '../support/partitionChanges.js';

const LEASE = 'changer-test';
const settings = (holderId: string, over: Partial<ChangerSettings> = {}): ChangerSettings => ({
  leaseNameOf: (k) => partitionLeaseName(LEASE, k), partitionOf: assignPartition, holderId, durationMs: 5_000, renewIntervalMs: 1_000,
  safetyMarginMs: 300, commitGraceMs: 100, refreshIntervalMs: 50, batchSize: 7, prepareBatchSize: 100, pollMs: 50, stuckSteps: 3, ...over });
const soon = (ms = 3_000) => systemClock.nowMs() + ms;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(dialects)('partition change that does not progress: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    s = await ctx.openStores({ poolMax: 4, statementTimeoutMs: 400 });
    await s.partitions.recordPartitionCount(2, 'test');
  });
  const { put, inFlight, request, takeLeases } = changeArrangement(() => s);

  it('failed steps on a row lock held past the statement timeout: counted in SQL, stuck from the bound on (error log), reset by a step that does not fail', async (t) => {
    if (!ctx.lockIntentRow || ctx.name === 'pglite') return t.skip('one session: no lock can be held while the changer waits');
    // Finished intents settled before the change (its horizon): one the preparing pass must move is locked.
    const done = [];
    for (let i = 0; i < 8; i++) done.push(await put());
    for (const d of done) expect((await s.intents.cancel(d.intentId)).kind).toBe('ok');
    await sleep(300);
    const change = await request(5);
    const target = (await ctx.intentRows()).find((r) => r.status === 'cancelled' && assignPartition({ intentId: r.intentId, partitionKey: null }, 5) !== r.partition);
    expect(target).toBeDefined();
    const unlock = await ctx.lockIntentRow(target!.intentId);
    const logs: Record<string, unknown>[] = [];
    const log = createLogger('info', { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
    const counted: boolean[] = [];
    const changer = new PartitionChanger(s.lease, s.partitions, settings('changer-a'), systemClock, log,
      { partitionChangeStepFailed: (stuck) => void counted.push(stuck) });
    try {
      const outs = [];
      for (let i = 0; i < 4; i++) outs.push(await changer.step(await s.partitions.readLayout(), soon(5_000)));
      expect(outs.map((o) => [o.kind, (o as { failedSteps?: number }).failedSteps, (o as { stuck?: boolean }).stuck]))
        .toEqual([['failed', 1, false], ['failed', 2, false], ['failed', 3, true], ['failed', 4, true]]);
      expect(counted).toEqual([false, false, true, true]);
      const active = (await s.partitions.readLayout()).active!;
      expect(active).toMatchObject({ changeId: change.changeId, state: 'preparing', failedSteps: 4, lastStepError: expect.stringMatching(/^StoreError \w+/) });
      const stuck = logs.filter((l) => l.event === 'partition_change_stuck');
      expect(stuck.map((l) => [l.level, l.failed_steps, l.reason])).toEqual([['error', 3, active.lastStepError], ['error', 4, active.lastStepError]]);
      expect(String(stuck[0]!.msg)).toContain(`POST /api/ops/partitions/${change.changeId}/cancel`);
      expect(JSON.stringify(logs)).not.toContain('"payload"');
    } finally {
      await unlock();
    }
    // The lock gone: the next step does not fail, and the count restarts (the reason stays, as history).
    const next = await changer.step(await s.partitions.readLayout(), soon(5_000));
    expect(['preparing', 'waiting', 'completed']).toContain(next.kind);
    expect(await s.partitions.getChange(change.changeId)).toMatchObject({ failedSteps: 0, lastStepError: expect.stringMatching(/^StoreError/) });
  });

  it('cancelled while the changer waits for a lease: it lets every lease go and writes nothing', async () => {
    for (let i = 0; i < 5; i++) await put();
    const change = await request(3);
    const x = await s.lease.tryAcquire(partitionLeaseName(LEASE, 1), 'leader-x', 60_000); // a leader still draining
    expect(x.acquired).toBe(true);
    const changer = new PartitionChanger(s.lease, s.partitions, settings('changer-b'), systemClock, silentLogger);
    const step = changer.step(await s.partitions.readLayout(), soon(20_000));
    for (let i = 0; i < 100 && (await s.lease.get(partitionLeaseName(LEASE, 0)))?.holderId !== 'changer-b'; i++) await sleep(20);
    expect(await s.partitions.cancelChange(change.changeId, 'ops')).toMatchObject({ kind: 'cancelled' });
    expect(await step).toMatchObject({ kind: 'cancelled', change: { changeId: change.changeId, state: 'cancelled' } });
    expect(changer.heldCount()).toBe(0);
    const l0 = (await s.lease.get(partitionLeaseName(LEASE, 0)))!;
    expect(l0.expiresAt.getTime()).toBeLessThanOrEqual(l0.dbNow.getTime()); // released, not left to expire
    expect(await s.partitions.readLayout()).toMatchObject({ count: 2, generation: 0, active: null });
  });

  it('cancelled while moving rows back, then switched by a changer that knows no cancel (an older release): rolled forward to its end, never left drained', async () => {
    // Keys whose partition under 4 is each of 0..3 (2 and 3 are partitions of the abandoned layout), twice: rows that
    // settled long before the change (the preparing pass's: last modified before its horizon) and rows that settled
    // after it was requested (the scan's: modified since the horizon), whatever the machine's speed.
    const keys = (tag: string) => [0, 1, 2, 3].map((p) => {
      for (let i = 0; ; i++) if (assignPartition({ intentId: '', partitionKey: `${tag}-${i}` }, 4) === p) return `${tag}-${i}`;
    });
    const old = [];
    for (const key of keys('old')) old.push(await put({ key }));
    for (const d of old) {
      expect((await s.intents.cancel(d.intentId)).kind).toBe('ok');
      await ctx.setIntentStatus(d.intentId, 'cancelled', 600_000);
    }
    const recentKeys = keys('recent');
    const recent = [];
    for (const key of recentKeys) recent.push(await put({ key }));
    const change = await request(4);
    for (const d of recent) expect((await s.intents.cancel(d.intentId)).kind).toBe('ok');
    // This release's pass moved every row to its partition under 4 (a horizon after all of them), then was cancelled.
    const p = await s.partitions.prepareBatch(change.changeId, { limit: 1_000_000, horizon: new Date(Date.now() + 86_400_000) });
    expect(p).toMatchObject({ state: 'pending', rowsMoved: 4 });
    expect(await s.partitions.cancelChange(change.changeId, 'ops')).toMatchObject({ kind: 'cancelled', change: { state: 'preparing', toCount: 2 } });
    // An older release's changer: its pass (the same batches, to_count := from_count, the changer's horizon) moves back
    // the rows settled before the horizon and, knowing no cancel, its last batch ends the change pending (this
    // release's would end it cancelled); it claims and switches the change, then stops.
    const horizon = preparingHorizon(change, settings('changer-old'));
    expect(await s.partitions.prepareBatch(change.changeId, { limit: 1_000_000, horizon })).toMatchObject({ state: 'cancelled', rowsMoved: 6 });
    await ctx.sql(`UPDATE submission_manager_partition_changes SET state = 'pending', completed_at = NULL WHERE change_id = '${change.changeId}'`);
    const stranded = async () => (await ctx.intentRows()).filter((r) => r.partition !== assignPartition(r, 2)).map((r) => r.partitionKey).sort();
    expect(await stranded()).toEqual([recentKeys[2], recentKeys[3]].sort()); // the scan's: modified since the horizon
    const fence = await takeLeases(2);
    expect((await s.partitions.claimChange([fence[0]!], change.changeId)).kind).toBe('ok');
    expect((await s.partitions.switchCount(fence, change.changeId)).kind).toBe('ok');
    for (const l of fence) await s.lease.release(l);
    const changer = new PartitionChanger(s.lease, s.partitions, settings('changer-e'), systemClock, silentLogger);
    let out;
    for (let i = 0; i < 20 && out?.kind !== 'completed'; i++) out = await changer.step(await s.partitions.readLayout(), soon(3_000));
    expect(out).toMatchObject({ kind: 'completed', change: { changeId: change.changeId, state: 'cancelled', toCount: 2 } });
    expect(await s.partitions.readLayout()).toMatchObject({ count: 2, active: null });
    expect(await stranded()).toEqual([]);
    expect(await ctx.countIntents('cancelled')).toBe(8);
    expect(changer.heldCount()).toBe(0);
  });

  it('cancelled between its claim and its fenced switch: the switch writes nothing, the changer lets go (count, generation, in-flight work kept)', async () => {
    const busy = await inFlight(1);
    await put();
    const change = await request(4);
    // The operator's cancel commits while the changer is mid-step, just before its switch (a real cancel, real SQL).
    const racing: PartitionStore = new Proxy(s.partitions, { get(tgt, p, r) {
      if (p === 'switchCount') {
        return async (...a: Parameters<PartitionStore['switchCount']>) => {
          await tgt.cancelChange(change.changeId, 'ops');
          return tgt.switchCount(...a);
        };
      }
      const v = Reflect.get(tgt, p, r) as unknown;
      return typeof v === 'function' ? (v as (...x: unknown[]) => unknown).bind(tgt) : v;
    } });
    const changer = new PartitionChanger(s.lease, racing, settings('changer-c'), systemClock, silentLogger);
    let out;
    for (let i = 0; i < 20 && out?.kind !== 'cancelled'; i++) out = await changer.step(await s.partitions.readLayout(), soon(3_000));
    expect(out).toMatchObject({ kind: 'cancelled' });
    expect(changer.heldCount()).toBe(0);
    for (let k = 0; k < 4; k++) {
      const row = await s.lease.get(partitionLeaseName(LEASE, k));
      if (row) expect(row.expiresAt.getTime(), `lease ${k}`).toBeLessThanOrEqual(row.dbNow.getTime());
    }
    expect(await s.partitions.readLayout()).toMatchObject({ count: 2, generation: 0, active: null });
    expect((await ctx.intentRows()).find((r) => r.intentId === busy.intentId)).toMatchObject({ status: 'in_flight', partition: 1 });
    expect(await s.partitions.getChange(change.changeId)).toMatchObject({ state: 'cancelled', switchedAt: null, rowsMoved: 0 });
  });

  // The failed-step report's writes may commit with their reply lost, as every write: the report neither double-counts
  // nor stops, and a reset whose reply was lost is made by the next step that moves (or was made: the row says).
  it.each(['recordStepFailure', 'clearStepFailures'] as const)('a lost reply of %s (committed, then an error): each failed step counted once, stuck at the bound, the count reset once the change moves', async (method) => {
    for (let i = 0; i < 5; i++) await put();
    const change = await request(3);
    let failPrepare = 3;
    let lost = 0;
    const partitions = new Proxy(s.partitions, {
      get(t, prop, recv) {
        const v = Reflect.get(t, prop, recv) as unknown;
        if (typeof v !== 'function') return v;
        const call = (a: unknown[]) => (v as (...x: unknown[]) => Promise<unknown>).apply(t, a);
        if (prop === 'prepareBatch') {
          return async (...a: unknown[]) => {
            if (failPrepare-- > 0) throw new StoreError('transient', 'simulated: failed before commit', 'ECONNRESET');
            return call(a);
          };
        }
        if (prop !== method) return (v as (...x: unknown[]) => unknown).bind(t);
        return async (...a: unknown[]) => {
          await call(a);
          lost++;
          throw new StoreError('transient', `simulated: ${method} committed, its reply lost`, 'CLIENT_DEADLINE');
        };
      },
    });
    const changer = new PartitionChanger(s.lease, partitions, settings('changer-r'), systemClock, silentLogger);
    const outs = [];
    for (let i = 0; i < 3; i++) outs.push(await changer.step(await s.partitions.readLayout(), soon()));
    expect(outs.map((o) => [o.kind, (o as { failedSteps?: number }).failedSteps, (o as { stuck?: boolean }).stuck]))
      .toEqual([['failed', 1, false], ['failed', 2, false], ['failed', 3, true]]);
    expect((await s.partitions.getChange(change.changeId))!.failedSteps).toBe(3);
    const next = await changer.step(await s.partitions.readLayout(), soon());
    expect(next.kind).not.toBe('failed');
    expect(lost).toBeGreaterThan(0);
    expect((await s.partitions.getChange(change.changeId))!.failedSteps).toBe(0);
  });

  it('a cancelled change whose move-back steps keep failing: stuck, and the error log says it moves rows back (no cancel offered)', async () => {
    const done = [];
    for (let i = 0; i < 12; i++) done.push(await put());
    for (const d of done) expect((await s.intents.cancel(d.intentId)).kind).toBe('ok');
    const change = await request(4);
    expect((await s.partitions.prepareBatch(change.changeId, { limit: 1_000_000, horizon: new Date(Date.now() + 60_000) }))!.rowsMoved).toBeGreaterThan(0);
    expect(await s.partitions.cancelChange(change.changeId, 'ops')).toMatchObject({ kind: 'cancelled', change: { state: 'preparing', toCount: 2 } });
    const failing = new Proxy(s.partitions, { get(t, prop, recv) {
      const v = Reflect.get(t, prop, recv) as unknown;
      if (prop === 'prepareBatch') return async () => { throw new StoreError('transient', 'simulated: failed before commit', 'ECONNRESET'); };
      return typeof v === 'function' ? (v as (...x: unknown[]) => unknown).bind(t) : v;
    } });
    const logs: Record<string, unknown>[] = [];
    const log = createLogger('info', { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
    const changer = new PartitionChanger(s.lease, failing, settings('changer-m'), systemClock, log);
    for (let i = 0; i < 3; i++) await changer.step(await s.partitions.readLayout(), soon());
    const stuck = logs.filter((l) => l.event === 'partition_change_stuck');
    expect(stuck).toHaveLength(1);
    expect(String(stuck[0]!.msg)).toContain('it was cancelled and moves rows back before it ends: remove the cause and it resumes');
    expect(String(stuck[0]!.msg)).not.toContain('/cancel');
  });
});
