// Changes of the partition count (issue 26; port: src/store/partitionPorts.ts), run unchanged against every dialect:
// the layout read, requests (one active change at most, also when requested concurrently), the changer's steps with
// real leases (prepare, claim, switch with in-flight recovery, move batches, complete releasing every lease), every
// fenced write refused when any one lease of the fence is no longer the changer's, each step retried harmlessly, the
// insert taking the recorded count's partition, and the reassignment's reads (the preparing step and the read's
// scopes in detail: partitionPrepareContract.test.ts).
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { acquireToken } from '../support/instances.js';
import { CHANGER, useChangeArrangement, keyOf, leaseOf, movesTo, ok } from '../support/partitionChanges.js';
import type { Stores } from '../../src/store/stores.js';
import type { IntentContract } from '../../src/store/intentPorts.js';
import type { LeaseToken } from '../../src/store/ports.js';
import type { PartitionChange } from '../../src/store/partitionPorts.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { partitionOf } from '../../src/intents/partition.js';

const contract: IntentContract = { provider: { url: null }, payload: { a: 1 }, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 20 } };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** How one lease of the fence stops being the changer's, and how the changer gets it back (its new token). */
interface Spoiler {
  name: string;
  spoil(s: Stores, ctx: DialectContext, t: LeaseToken): Promise<void>;
  restore(s: Stores, ctx: DialectContext, t: LeaseToken): Promise<LeaseToken>;
}
const currentToken = async (s: Stores, t: LeaseToken): Promise<LeaseToken> => ({ ...t, leaseEpoch: (await s.lease.get(t.leaseName))!.leaseEpoch });
const spoilers: Spoiler[] = [
  { name: 'expired', spoil: async (s, _ctx, t) => { await s.lease.renew(t, 1); await sleep(20); },
    restore: async (s, _ctx, t) => acquireToken(s, CHANGER, 60_000, t.leaseName) },
  { name: 'held by another holder', spoil: (_s, ctx, t) => ctx.stealLease(t.leaseName, 'host-b'),
    restore: async (s, ctx, t) => { await ctx.stealLease(t.leaseName, CHANGER); return currentToken(s, t); } },
  { name: 'of another epoch', spoil: (_s, ctx, t) => ctx.stealLease(t.leaseName, CHANGER),
    restore: (s, _ctx, t) => currentToken(s, t) },
];

describe.each(dialects)('partition change contract: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  const { more, put, inFlight, takeLeases, request, prepared, switched } = useChangeArrangement(dialect, (fresh, stores) => { ctx = fresh; s = stores; });

  it('layout: count 1 recorded by none without a count row; the recorded count and the active change in one read', async () => {
    const empty = await s.partitions.readLayout();
    expect(empty).toMatchObject({ count: 1, recordedBy: 'none', generation: 0, active: null });
    expect(empty.dbNow).toBeInstanceOf(Date);
    const recorded = await s.partitions.recordPartitionCount(2, 'host-a');
    expect(await s.partitions.readLayout()).toMatchObject({ count: 2, recordedBy: 'host-a', recordedAt: recorded.recordedAt, generation: 0, active: null });
    const change = await request(4);
    const layout = await s.partitions.readLayout();
    expect(layout).toMatchObject({ count: 2, active: change });
    expect(layout.dbNow.getTime()).toBeGreaterThanOrEqual(change.requestedAt.getTime());
  });

  it('requestChange: created from the recorded count; the same count again (or a retry) is that change; another count conflicts', async () => {
    expect(await s.partitions.requestChange(1, 'ops', uuidv7())).toMatchObject({ kind: 'unchanged', count: { count: 1 } });
    await s.partitions.recordPartitionCount(1, 'host-a');
    const id = uuidv7();
    const made = await s.partitions.requestChange(4, 'ops-1', id);
    expect(made).toMatchObject({ kind: 'created', change: { changeId: id, fromCount: 1, toCount: 4, state: 'preparing', requestedBy: 'ops-1',
      prepareCursor: null, preparedAt: null, changer: null, claimedAt: null, switchedAt: null, scanCursor: null, scanDoneAt: null, rowsMoved: 0, completedAt: null } });
    const change = (made as { change: PartitionChange }).change;
    expect(await s.partitions.requestChange(4, 'ops-2', uuidv7())).toEqual({ kind: 'existing', change });
    expect(await s.partitions.requestChange(4, 'ops-1', id)).toEqual({ kind: 'existing', change });
    const other = uuidv7();
    expect(await s.partitions.requestChange(3, 'ops-3', other)).toEqual({ kind: 'conflict', active: change });
    expect(await s.partitions.requestChange(1, 'ops-3', other)).toEqual({ kind: 'conflict', active: change });
    expect(await s.partitions.getChange(other)).toBeNull();
    expect(await s.partitions.getChange(id)).toEqual(change);
    expect(await s.partitions.listChanges(10)).toEqual([change]);
    expect((await s.partitions.readLayout()).count).toBe(1);
  });

  it('concurrent requests to several counts: exactly one change is created and active, every caller names it', async () => {
    await s.partitions.recordPartitionCount(1, 'host-a');
    const callers = await Promise.all([2, 3, 4, 2, 3, 4].map(() => more()));
    const outs = await Promise.all(callers.map((x, i) => x.partitions.requestChange([2, 3, 4][i % 3]!, `ops-${i}`, uuidv7())));
    const created = outs.flatMap((o) => (o.kind === 'created' ? [o.change] : []));
    expect(created).toHaveLength(1);
    const id = created[0]!.changeId;
    for (const o of outs) {
      if (o.kind === 'conflict') expect(o.active.changeId).toBe(id);
      else expect(o).toMatchObject({ change: { changeId: id } });
    }
    expect((await s.partitions.listChanges(10)).map((c) => c.changeId)).toEqual([id]);
    expect((await s.partitions.readLayout()).active?.changeId).toBe(id);
  });

  it('prepare, claim, switch, move and complete with every lease held by the changer; each step retried changes nothing', async () => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    const keys = ['a', 'b', 'c', 'd', 'e', 'f', 'g', 'h'];
    for (const key of keys) await put({ key });
    for (let i = 0; i < 4; i++) await put();
    const all = await ctx.intentRows();
    for (const r of all.filter((_, i) => i % 3 === 0)) expect((await s.intents.cancel(r.intentId)).kind).toBe('ok');
    expect(all.every((r) => r.partition === partitionOf(keyOf(r), 2))).toBe(true);
    const change = await request(4);

    // The preparing pass, no lease: the finished rows (settled before the horizon) move, a key range of 3 ids at a time:
    // 12 ids, so 4 full ranges and an empty one that ends the pass. A batch retried after its reply was lost is the
    // next batch (the range follows the recorded cursor); a row already moved is neither written nor counted.
    await sleep(5);
    const horizon = (await s.partitions.readLayout()).dbNow;
    const settled = (await ctx.intentRows()).filter((r) => r.status === 'cancelled');
    const prepMoved = settled.filter((r) => partitionOf(keyOf(r), 4) !== r.partition).length;
    let prep: PartitionChange = change;
    const cursors: (string | null)[] = [];
    while (prep.state === 'preparing') {
      prep = (await s.partitions.prepareBatch(change.changeId, { limit: 3, horizon }))!;
      cursors.push(prep.prepareCursor);
    }
    expect(prepMoved).toBeGreaterThan(0);
    const ids = all.map((r) => r.intentId);
    expect(cursors).toEqual([ids[2], ids[5], ids[8], ids[11], ids[11]]);
    expect(prep).toMatchObject({ state: 'pending', rowsMoved: prepMoved, prepareCursor: ids[11], preparedAt: expect.any(Date) });
    expect(await s.partitions.prepareBatch(change.changeId, { limit: 3, horizon })).toEqual(prep); // done: unchanged
    for (const r of await ctx.intentRows()) expect(r.partition).toBe(partitionOf(keyOf(r), r.status === 'cancelled' ? 4 : 2));

    const fence = await takeLeases(4);
    const claimed = ok(await s.partitions.claimChange([fence[0]!], change.changeId));
    expect(claimed).toMatchObject({ state: 'pending', changer: CHANGER, claimedAt: expect.any(Date) });
    const sw = ok(await s.partitions.switchCount(fence, change.changeId));
    expect(sw).toMatchObject({ state: 'reassigning', changer: CHANGER, switchedAt: expect.any(Date) });
    // The switch raised the layout generation by one, once: a retried switch finds it reassigning and raises nothing.
    expect(ok(await s.partitions.switchCount(fence, change.changeId))).toEqual(sw);
    expect(await s.partitions.readLayout()).toMatchObject({ count: 4, recordedBy: CHANGER, generation: 1, active: sw });

    // The scan under every lease: the open rows.
    let after: string | null = null;
    let moved = prepMoved;
    let last: PartitionChange = sw;
    for (;;) {
      const rows = await s.partitions.listForReassign({ after, limit: 5, modifiedSince: null, scope: 'open' });
      if (rows.length === 0) break;
      const moves = movesTo(4, rows);
      moved += moves.length;
      after = rows.at(-1)!.intentId;
      const progress = { scanCursor: after, scanDone: rows.length < 5 };
      last = ok(await s.partitions.moveIntents(fence, change.changeId, moves, progress));
      expect(ok(await s.partitions.moveIntents(fence, change.changeId, moves, progress))).toEqual(last); // a retried batch
    }
    expect(moved).toBeGreaterThan(prepMoved);
    expect(last).toMatchObject({ state: 'reassigning', rowsMoved: moved, scanCursor: after });
    expect((await ctx.intentRows()).map((r) => r.partition)).toEqual((await ctx.intentRows()).map((r) => partitionOf(keyOf(r), 4)));
    if (last.scanDoneAt === null) last = ok(await s.partitions.moveIntents(fence, change.changeId, [], { scanCursor: null, scanDone: true }));
    expect(last).toMatchObject({ scanCursor: after, scanDoneAt: expect.any(Date) });

    const done = ok(await s.partitions.completeChange(fence, change.changeId));
    expect(done).toMatchObject({ state: 'completed', rowsMoved: moved, completedAt: expect.any(Date) });
    expect(ok(await s.partitions.completeChange(fence, change.changeId))).toEqual(done); // its leases are released: still ok
    expect(await s.partitions.readLayout()).toMatchObject({ count: 4, active: null });
    for (const t of fence) {
      const lease = (await s.lease.get(t.leaseName))!;
      expect(lease.expiresAt.getTime()).toBeLessThanOrEqual(lease.dbNow.getTime());
      expect((await s.lease.listEvents(t.leaseName)).map((e) => [e.event, e.leaseEpoch, e.holderId]))
        .toEqual([['acquired', t.leaseEpoch, CHANGER], ['released', t.leaseEpoch, CHANGER]]);
    }
    // Writes of a completed change: nothing (with the leases taken again).
    const again = await takeLeases(4);
    expect(ok(await s.partitions.moveIntents(again, change.changeId, [], { scanCursor: uuidv7(), scanDone: false }))).toEqual(done);
    expect(ok(await s.partitions.switchCount(again, change.changeId))).toEqual(done);
  });

  it.each(spoilers)('every fenced write is refused, nothing written, when one lease of the fence is $name', async (spoiler) => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    const busy = await inFlight(1);
    const intents = await ctx.intentRows();
    const change = await prepared(3);
    const fence = await takeLeases(3);
    const audit = (await ctx.auditLog()).length;
    const refused = async (expected: PartitionChange) => {
      expect(await s.partitions.getChange(change.changeId)).toEqual(expected);
      expect((await s.partitions.readLayout()).count).toBe(expected.state === 'pending' ? 2 : 3);
      expect(await ctx.auditLog()).toHaveLength(audit);
    };

    await spoiler.spoil(s, ctx, fence[2]!);
    expect(await s.partitions.claimChange(fence, change.changeId)).toEqual({ kind: 'leaseLost' });
    expect(await s.partitions.switchCount(fence, change.changeId)).toEqual({ kind: 'leaseLost' });
    await refused(change);
    expect(await ctx.intentRows()).toEqual(intents);
    expect((await s.intents.listAttempts(busy.intentId)).map((a) => a.outcome)).toEqual(['started']);

    fence[2] = await spoiler.restore(s, ctx, fence[2]!);
    ok(await s.partitions.claimChange(fence, change.changeId));
    const sw = ok(await s.partitions.switchCount(fence, change.changeId));
    const [first] = await s.partitions.listForReassign({ after: null, limit: 1, modifiedSince: null, scope: 'all' });
    await spoiler.spoil(s, ctx, fence[0]!);
    const before = (await ctx.auditLog()).length;
    expect(await s.partitions.moveIntents(fence, change.changeId, [{ intentId: first!.intentId, partition: 2 }],
      { scanCursor: first!.intentId, scanDone: true })).toEqual({ kind: 'leaseLost' });
    expect(await s.partitions.completeChange(fence, change.changeId)).toEqual({ kind: 'leaseLost' });
    expect(await s.partitions.getChange(change.changeId)).toEqual(sw);
    expect(await ctx.auditLog()).toHaveLength(before);
    expect((await s.intents.get(first!.intentId))!.partition).toBe(first!.partition);
    for (const t of fence.slice(1)) {
      expect((await s.lease.listEvents(t.leaseName)).filter((e) => e.holderId === CHANGER).map((e) => e.event)).not.toContain('released');
    }
  });

  it('switchCount recovers every in-flight intent (attempt abandoned; scheduled due now, failed when its budget is spent), bumps every intent whose attempt it abandons; a retry changes nothing', async () => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    const execs = [await acquireToken(s, 'host-x', 60_000, leaseOf(0)), await acquireToken(s, 'host-x', 60_000, leaseOf(1))];
    const retried = await put({ partition: 0 });
    const spent = await put({ partition: 1, maxAttempts: 1 });
    const cancelled = await put({ partition: 1 });
    const idle = await put({ partition: 1 });
    ok(await s.executionFor(0).fencedStartAttempts(execs[0]!, [{ intentId: retried.intentId, expectedAttemptCount: 0 }]));
    ok(await s.executionFor(1).fencedStartAttempts(execs[1]!, [spent, cancelled].map((i) => ({ intentId: i.intentId, expectedAttemptCount: 0 }))));
    expect((await s.intents.cancel(cancelled.intentId)).kind).toBe('ok');
    for (const t of execs) await s.lease.release(t);
    const idleBefore = await ctx.modifiedAtText(idle.intentId);
    const cancelledBefore = await ctx.modifiedAtText(cancelled.intentId);
    await sleep(5);
    const horizon = (await s.partitions.readLayout()).dbNow;
    const { change, fence } = await switched(4, 4);
    const now = (await s.partitions.readLayout()).dbNow;

    const got = await s.intents.get(retried.intentId);
    expect(got).toMatchObject({ status: 'scheduled', attemptCount: 1 });
    expect(got!.nextAttemptAt.getTime()).toBeLessThanOrEqual(now.getTime());
    expect(await s.intents.get(spent.intentId)).toMatchObject({ status: 'failed', attemptCount: 1 });
    expect(await s.intents.get(cancelled.intentId)).toMatchObject({ status: 'cancelled' });
    for (const i of [retried, spent, cancelled]) {
      const [a] = await s.intents.listAttempts(i.intentId);
      expect(a).toMatchObject({ outcome: 'abandoned', finishedAt: expect.any(Date) });
    }
    expect(await ctx.modifiedAtText(idle.intentId)).toBe(idleBefore);
    expect((await ctx.modifiedAtText(cancelled.intentId)) > cancelledBefore).toBe(true); // the scan reads it (modified since)
    const open = await s.partitions.listForReassign({ after: null, limit: 10, modifiedSince: horizon, scope: 'open' });
    expect(open.map((r) => r.intentId).sort()).toEqual([retried, spent, cancelled, idle].map((i) => i.intentId).sort());
    const rows = await ctx.intentRows();
    expect(ok(await s.partitions.switchCount(fence, change.changeId))).toEqual(change);
    expect(await ctx.intentRows()).toEqual(rows);
  });

  it.each(['preparing', 'pending'] as const)('moveIntents and completeChange write only while reassigning: a %s change is returned unchanged', async (state) => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    const intent = await put({ partition: 1 });
    const change = state === 'preparing' ? await request(3) : await prepared(3);
    const fence = await takeLeases(3);
    const claimed = ok(await s.partitions.claimChange([fence[0]!], change.changeId));
    expect(claimed).toMatchObject({ state, changer: CHANGER });
    expect(ok(await s.partitions.moveIntents(fence, change.changeId, [{ intentId: intent.intentId, partition: 2 }],
      { scanCursor: intent.intentId, scanDone: true }))).toEqual(claimed);
    expect(ok(await s.partitions.completeChange(fence, change.changeId))).toEqual(claimed);
    expect((await s.intents.get(intent.intentId))!.partition).toBe(1);
    for (const t of fence) expect((await s.lease.get(t.leaseName))!.holderId).toBe(CHANGER); // not released
    expect((await s.lease.listEvents(leaseOf(0))).map((e) => e.event)).toEqual(['acquired']);
  });

  it('a drain asked while the change runs is met by its completion: its pending handovers completed by the changer; a later one stays pending', async () => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    for (const k of [0, 1]) expect((await s.ops.requestHandover(leaseOf(k), uuidv7(), 'operator', 'drain during a change')).created).toBe(true);
    const { change, fence } = await switched(3, 3);
    const done = ok(await s.partitions.completeChange(fence, change.changeId));
    expect(done.state).toBe('completed');
    for (const k of [0, 1]) {
      expect((await s.ops.listHandovers(leaseOf(k), 5)).map((h) => [h.status, h.completedEpoch, h.completedBy]))
        .toEqual([['completed', fence[k]!.leaseEpoch, CHANGER]]);
    }
    // Asked after the completion: for the next leaders (a retried completion leaves it pending).
    const later = await s.ops.requestHandover(leaseOf(2), uuidv7(), 'operator', 'drain after the change');
    expect(ok(await s.partitions.completeChange(fence, change.changeId))).toEqual(done);
    expect((await s.ops.listHandovers(leaseOf(2), 5)).map((h) => [h.requestId, h.status])).toEqual([[later.request.requestId, 'pending']]);
  });

  it('a moved intent keeps its last_modified_at', async () => {
    await s.partitions.recordPartitionCount(1, 'host-a');
    const intent = await put({ partition: 0 });
    const before = await ctx.modifiedAtText(intent.intentId);
    const { change, fence } = await switched(3, 3);
    const moved = ok(await s.partitions.moveIntents(fence, change.changeId, [{ intentId: intent.intentId, partition: 2 }],
      { scanCursor: intent.intentId, scanDone: false }));
    expect(moved).toMatchObject({ rowsMoved: 1, scanCursor: intent.intentId, scanDoneAt: null });
    expect((await s.intents.get(intent.intentId))!.partition).toBe(2);
    expect(await ctx.modifiedAtText(intent.intentId)).toBe(before);
  });

  it('an insert takes its hash mod the recorded count (1 without one; an explicit partition wins), after switchCount the new count', async () => {
    const key = Array.from({ length: 200 }, (_, i) => `k${i}`).find((k) => partitionOf(k, 3) !== 0 && ![0, partitionOf(k, 3)].includes(partitionOf(k, 5)))!;
    expect(await put({ key })).toMatchObject({ partition: 0, partitionKey: key });
    await s.partitions.recordPartitionCount(3, 'host-a');
    const three = await put({ key });
    expect(three.partition).toBe(partitionOf(key, 3));
    expect((await s.intents.get(three.intentId))!.partition).toBe(partitionOf(key, 3));
    expect(await put({ key, partition: 7 })).toMatchObject({ partition: 7 });
    const none = await s.intents.insert({ intentId: uuidv7(), idempotencyKey: null, requestHash: '0'.repeat(64), contract, maxAttempts: 3, notBefore: null });
    expect(none.intent.partition).toBe(0);
    await switched(5, 5);
    const five = await put({ key });
    expect(five.partition).toBe(partitionOf(key, 5));
    expect((await s.intents.get(five.intentId))!.partition).toBe(partitionOf(key, 5));
  });

  it('listForReassign scope all: by intent_id from after a cursor, paged; modifiedSince keeps rows modified at or after it', async () => {
    const made = [await put({ key: 'x' }), await put(), await put({ key: 'y' }), await put(), await put()];
    const ids = made.map((i) => i.intentId);
    const page1 = await s.partitions.listForReassign({ after: null, limit: 3, modifiedSince: null, scope: 'all' });
    expect(page1).toEqual(made.slice(0, 3).map((i) => ({ intentId: i.intentId, partitionKey: i.partitionKey, partition: 0 })));
    expect((await s.partitions.listForReassign({ after: ids[2]!, limit: 3, modifiedSince: null, scope: 'all' })).map((r) => r.intentId)).toEqual(ids.slice(3));
    expect(await s.partitions.listForReassign({ after: ids[4]!, limit: 3, modifiedSince: null, scope: 'all' })).toEqual([]);
    await sleep(5);
    const since = (await s.partitions.readLayout()).dbNow;
    await sleep(5);
    for (const i of [3, 1]) expect((await s.intents.reschedule(ids[i]!, new Date(Date.now() + 60_000))).kind).toBe('ok');
    expect((await s.partitions.listForReassign({ after: null, limit: 10, modifiedSince: since, scope: 'all' })).map((r) => r.intentId)).toEqual([ids[1], ids[3]]);
    expect((await s.partitions.listForReassign({ after: ids[1]!, limit: 10, modifiedSince: since, scope: 'all' })).map((r) => r.intentId)).toEqual([ids[3]]);
  });
});
