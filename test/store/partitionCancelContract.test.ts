// Cancelling a partition change and its failed-step report (port: src/store/partitionPorts.ts cancelChange,
// recordStepFailure, clearStepFailures), run unchanged against every dialect: a change is cancelled before its switch
// (preparing or pending) and never after it; a retried cancel is harmless; every changer step after a cancel — the
// preparing batch, the claim, the switch, a move, the completion — finds it ended and writes nothing (the count, the
// generation, the intents and their attempts stay as they were), also when the cancel races the switch; the failed
// steps count up, and reset.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useChangeArrangement, keyOf, ok } from '../support/partitionChanges.js';
import type { Stores } from '../../src/store/stores.js';
import type { PartitionChange } from '../../src/store/partitionPorts.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { partitionOf } from '../../src/intents/partition.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(dialects)('partition change cancel: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  const { more, put, inFlight, takeLeases, request, prepared, switched } = useChangeArrangement(dialect, (fresh, stores) => { ctx = fresh; s = stores; });

  it('preparing, nothing moved yet: cancelled at once (the count stays); a retry is harmless; the pass writes nothing more', async () => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    for (let i = 0; i < 4; i++) await put();
    const change = await request(4);
    const out = await s.partitions.cancelChange(change.changeId, 'ops-x');
    expect(out).toMatchObject({ kind: 'cancelled', change: { changeId: change.changeId, state: 'cancelled', cancelledBy: 'ops-x', fromCount: 2, toCount: 4 } });
    const cancelled = (out as { change: PartitionChange }).change;
    expect(cancelled.cancelledAt).toBeInstanceOf(Date);
    expect(cancelled.completedAt).toEqual(cancelled.cancelledAt);
    expect(await s.partitions.cancelChange(change.changeId, 'ops-y')).toEqual({ kind: 'alreadyCancelled', change: cancelled });
    expect(await s.partitions.readLayout()).toMatchObject({ count: 2, generation: 0, active: null });
    expect(await s.partitions.listChanges(5)).toEqual([cancelled]);
    const before = await ctx.intentRows();
    expect(await s.partitions.prepareBatch(change.changeId, { limit: 100, horizon: (await s.partitions.readLayout()).dbNow })).toEqual(cancelled);
    expect(await ctx.intentRows()).toEqual(before);
  });

  it('preparing, finished rows moved: they go back under the count in force (the pass again), then it ends cancelled; nothing stranded', async () => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    for (let i = 0; i < 12; i++) await put(i % 2 === 0 ? { key: `k${i}` } : {});
    const all = await ctx.intentRows();
    for (const r of all.filter((_, i) => i % 2 === 0)) expect((await s.intents.cancel(r.intentId)).kind).toBe('ok');
    const change = await request(4);
    await sleep(5);
    const horizon = (await s.partitions.readLayout()).dbNow;
    let half = change;
    while (half.rowsMoved === 0 && half.state === 'preparing') half = (await s.partitions.prepareBatch(change.changeId, { limit: 3, horizon }))!;
    expect(half).toMatchObject({ state: 'preparing', rowsMoved: expect.any(Number) });
    expect(half.rowsMoved).toBeGreaterThan(0);
    const moved = (await ctx.intentRows()).filter((r) => r.partition !== partitionOf(keyOf(r), 2));
    expect(moved.length).toBe(half.rowsMoved);
    expect(moved.every((r) => r.status === 'cancelled')).toBe(true); // finished rows only

    const out = await s.partitions.cancelChange(change.changeId, 'ops-x');
    expect(out).toMatchObject({ kind: 'cancelled', change: { state: 'preparing', fromCount: 2, toCount: 2, prepareCursor: null, preparedAt: null,
      cancelledBy: 'ops-x', cancelledAt: expect.any(Date), completedAt: null } });
    const back = (out as { change: PartitionChange }).change;
    expect(await s.partitions.cancelChange(change.changeId, 'ops-y')).toEqual({ kind: 'alreadyCancelled', change: back });
    // Still the active change (preparing: no leader drains), the count in force unchanged.
    expect(await s.partitions.readLayout()).toMatchObject({ count: 2, generation: 0, active: back });
    let p = back;
    while (p.state === 'preparing') p = (await s.partitions.prepareBatch(change.changeId, { limit: 5, horizon }))!;
    expect(p).toMatchObject({ state: 'cancelled', rowsMoved: 2 * half.rowsMoved, completedAt: expect.any(Date), cancelledAt: back.cancelledAt });
    expect(await s.partitions.readLayout()).toMatchObject({ count: 2, generation: 0, active: null });
    for (const r of await ctx.intentRows()) expect(r.partition, r.intentId).toBe(partitionOf(keyOf(r), 2));
    // A new change may be requested.
    expect((await s.partitions.requestChange(4, 'ops', uuidv7())).kind).toBe('created');
  });

  it('pending, claimed, leases held: cancelled; then claim, switch, move and complete write nothing (count, generation, in-flight work kept)', async () => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    const busy = await inFlight(1);
    for (let i = 0; i < 4; i++) await put();
    const change = await prepared(4);
    const fence = await takeLeases(4);
    ok(await s.partitions.claimChange([fence[0]!], change.changeId));
    const before = await ctx.intentRows();
    const out = await s.partitions.cancelChange(change.changeId, 'ops');
    expect(out).toMatchObject({ kind: 'cancelled', change: { state: 'cancelled', changer: fence[0]!.holderId } });
    const cancelled = (out as { change: PartitionChange }).change;

    expect(ok(await s.partitions.claimChange([fence[0]!], change.changeId))).toEqual(cancelled);
    expect(ok(await s.partitions.switchCount(fence, change.changeId))).toEqual(cancelled);
    expect(ok(await s.partitions.moveIntents(fence, change.changeId, [{ intentId: busy.intentId, partition: 3 }],
      { scanCursor: busy.intentId, scanDone: true }))).toEqual(cancelled);
    expect(ok(await s.partitions.completeChange(fence, change.changeId))).toEqual(cancelled);
    expect(await s.partitions.readLayout()).toMatchObject({ count: 2, generation: 0, active: null });
    expect(await ctx.intentRows()).toEqual(before);
    expect(before.find((r) => r.intentId === busy.intentId)).toMatchObject({ status: 'in_flight', partition: 1 });
    // The leases are not the store's to release: still the changer's (the HTTP cancel releases them).
    for (const t of fence) expect((await s.lease.get(t.leaseName))?.holderId).toBe(t.holderId);
  });

  it('switched (reassigning) or completed: refused, nothing written; an unknown id: notFound', async () => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    for (let i = 0; i < 3; i++) await put();
    const { change, fence } = await switched(3, 3);
    expect(await s.partitions.cancelChange(change.changeId, 'ops')).toEqual({ kind: 'switched', change });
    expect((await s.partitions.readLayout()).active).toEqual(change);
    const done = ok(await s.partitions.completeChange(fence, change.changeId));
    expect(await s.partitions.cancelChange(change.changeId, 'ops')).toEqual({ kind: 'switched', change: done });
    expect(done.state).toBe('completed');
    expect(await s.partitions.cancelChange(uuidv7(), 'ops')).toEqual({ kind: 'notFound' });
  });

  it('a cancel racing the switch: exactly one wins, and the other writes nothing', async () => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    for (let i = 0; i < 3; i++) await put();
    const change = await prepared(3);
    const fence = await takeLeases(3);
    ok(await s.partitions.claimChange([fence[0]!], change.changeId));
    const other = await more();
    const [cancel, sw] = await Promise.all([other.partitions.cancelChange(change.changeId, 'ops'), s.partitions.switchCount(fence, change.changeId)]);
    const layout = await s.partitions.readLayout();
    if (cancel.kind === 'cancelled') {
      expect(ok(sw).state).toBe('cancelled');
      expect(layout).toMatchObject({ count: 2, generation: 0, active: null });
    } else {
      expect(cancel.kind).toBe('switched');
      expect(ok(sw).state).toBe('reassigning');
      expect(layout).toMatchObject({ count: 3, generation: 1, active: { state: 'reassigning' } });
    }
  });

  it('failed steps: counted with the reason and time, reset by clearStepFailures (the reason kept), not counted once ended', async () => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    const change = await request(3);
    expect(change).toMatchObject({ failedSteps: 0, lastStepError: null, lastFailedAt: null, cancelledAt: null, cancelledBy: null });
    const one = await s.partitions.recordStepFailure(change.changeId, 'StoreError transient 57014');
    expect(one).toMatchObject({ failedSteps: 1, lastStepError: 'StoreError transient 57014', lastFailedAt: expect.any(Date) });
    const two = await s.partitions.recordStepFailure(change.changeId, 'x'.repeat(400));
    expect(two).toMatchObject({ failedSteps: 2, lastStepError: 'x'.repeat(300) });
    expect(two!.lastFailedAt!.getTime()).toBeGreaterThanOrEqual(one!.lastFailedAt!.getTime());
    expect((await s.partitions.readLayout()).active).toMatchObject({ failedSteps: 2 });
    await s.partitions.clearStepFailures(change.changeId);
    expect(await s.partitions.getChange(change.changeId)).toMatchObject({ failedSteps: 0, lastStepError: 'x'.repeat(300) });
    await s.partitions.cancelChange(change.changeId, 'ops');
    expect(await s.partitions.recordStepFailure(change.changeId, 'late')).toBeNull();
    expect(await s.partitions.getChange(change.changeId)).toMatchObject({ state: 'cancelled', failedSteps: 0 });
  });
});
