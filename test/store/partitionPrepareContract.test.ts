// The preparing step of a partition change (issue 26; port: src/store/partitionPorts.ts), run unchanged against every
// dialect: prepareBatch moves, a key range at a time with no lease, the settled intents (succeeded, cancelled) modified
// before the horizon with no attempt started only, to the partition the rule gives (computed in SQL: the same as
// src/intents/partition.ts for keys of every UTF-8 width), its cursor never going back, and the range that reaches the
// last id ends the step; a failed intent is open (a redrive reopens it); a call cancelled in flight is left to the
// scan, which finds it by the pass's bump, however its attempt closes; a preparing change is left alone by
// switchCount; and the scopes of the reassignment read.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectStores } from '../support/dialectFixture.js';
import { changeArrangement, keyOf, leaseOf, movesTo, ok } from '../support/partitionChanges.js';
import { acquireToken } from '../support/instances.js';
import type { Stores } from '../../src/store/stores.js';
import type { IntentStatus } from '../../src/store/intentPorts.js';
import type { ReassignScope } from '../../src/store/partitionPorts.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { partitionOf } from '../../src/intents/partition.js';
import { PARTITION_KEY_MAX_LENGTH } from '../../src/store/partitionPorts.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
/** A full-precision database time text ('YYYY-MM-DD hh:mm:ss.ffffff…', UTC) truncated to the millisecond. */
const msOf = (text: string) => new Date(`${text.slice(0, 23).replace(' ', 'T')}Z`);
/** Keys whose partition differs under 2 and 4 partitions: each of them moves. */
const MOVING = Array.from({ length: 100 }, (_, i) => `key-${i}`).filter((k) => partitionOf(k, 2) !== partitionOf(k, 4));

describe.each(dialects)('partition change preparing step: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  useDialectStores(dialect, (fresh, stores) => {
    ctx = fresh;
    s = stores;
  });
  const { put, inFlight, request, takeLeases } = changeArrangement(() => s);
  const listed = async (scope: ReassignScope, modifiedSince: Date | null) =>
    (await s.partitions.listForReassign({ scope, after: null, limit: 100, modifiedSince })).map((r) => r.intentId);

  /** One intent per status (in id order), each with a key that moves from 2 to 4 partitions. */
  const arrange = async (statuses: IntentStatus[]) => {
    const made = [];
    for (const [i, status] of statuses.entries()) {
      const intent = await put({ key: MOVING[i]! });
      if (status !== 'scheduled') await ctx.setIntentStatus(intent.intentId, status);
      made.push(intent);
    }
    return made.map((i) => i.intentId);
  };

  it('prepareBatch moves, a key range at a time and with no lease, the settled intents modified before the horizon with no attempt started; the cursor never goes back; the range reaching the last id ends the step', async () => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    const ids = await arrange(['succeeded', 'scheduled', 'failed', 'in_flight', 'cancelled', 'succeeded']);
    await sleep(5);
    const change = await request(4);
    const horizon = (await s.partitions.readLayout()).dbNow;
    await sleep(5);
    expect((await s.intents.cancel(ids[1]!)).kind).toBe('ok'); // settled after the horizon: the scan's
    const modified = await Promise.all(ids.map((id) => ctx.modifiedAtText(id)));
    await expect(s.partitions.prepareBatch(change.changeId, { limit: 0, horizon })).rejects.toThrow(RangeError);

    const first = await s.partitions.prepareBatch(change.changeId, { limit: 3, horizon }); // ids 0..2
    expect(first).toEqual({ ...change, rowsMoved: 1, prepareCursor: ids[2] });
    const moved = new Set([ids[0]]);
    for (const r of await ctx.intentRows()) expect(r.partition).toBe(partitionOf(r.partitionKey!, moved.has(r.intentId) ? 4 : 2));
    expect(await Promise.all(ids.map((id) => ctx.modifiedAtText(id)))).toEqual(modified);
    expect(await ctx.auditLog()).toEqual([]); // no fence

    const second = await s.partitions.prepareBatch(change.changeId, { limit: 3, horizon }); // ids 3..5
    expect(second).toEqual({ ...first, rowsMoved: 3, prepareCursor: ids[5] });
    for (const id of [ids[4], ids[5]]) moved.add(id);
    for (const r of await ctx.intentRows()) expect(r.partition).toBe(partitionOf(r.partitionKey!, moved.has(r.intentId) ? 4 : 2));

    const done = (await s.partitions.prepareBatch(change.changeId, { limit: 3, horizon }))!; // nothing after ids[5]
    expect(done).toEqual({ ...second, state: 'pending', preparedAt: expect.any(Date) });
    expect(done.preparedAt!.getTime()).toBeGreaterThanOrEqual(change.requestedAt.getTime());
    expect(await s.partitions.readLayout()).toMatchObject({ count: 2, active: done });
    // Past preparing: returned unchanged, nothing written (even a settled intent's move).
    await ctx.setIntentStatus(ids[3]!, 'succeeded', 60_000);
    expect(await s.partitions.prepareBatch(change.changeId, { limit: 3, horizon })).toEqual(done);
    expect((await s.intents.get(ids[3]!))!.partition).toBe(partitionOf(MOVING[3]!, 2));
    expect(await s.partitions.prepareBatch(uuidv7(), { limit: 3, horizon })).toBeNull();
  });

  it('the partition prepareBatch computes in SQL is the rule of src/intents/partition.ts: keys of 1- to 4-byte UTF-8 characters, the longest keys, and ids', async () => {
    const keys = ['a', 'Key-Ü', 'ß€', '日本語のキー', '🙂🚀', 'x'.repeat(PARTITION_KEY_MAX_LENGTH), 'é'.repeat(PARTITION_KEY_MAX_LENGTH),
      '🙂'.repeat(PARTITION_KEY_MAX_LENGTH), ' leading and trailing ', ...Array.from({ length: 24 }, (_, i) => `tenant-${i}`)];
    for (const key of [...keys, ...keys.map(() => undefined)]) await ctx.setIntentStatus((await put({ key })).intentId, 'succeeded', 60_000);
    const change = await request(7);
    const horizon = (await s.partitions.readLayout()).dbNow;
    let prep = change;
    while (prep.state === 'preparing') prep = (await s.partitions.prepareBatch(change.changeId, { limit: 10, horizon }))!;
    const rows = await ctx.intentRows();
    expect(rows.map((r) => [r.partitionKey, r.partition])).toEqual(rows.map((r) => [r.partitionKey, partitionOf(keyOf(r), 7)]));
    expect(prep.rowsMoved).toBe(rows.filter((r) => partitionOf(keyOf(r), 7) !== 0).length); // all were partition 0 (count 1)
  });

  it('switchCount leaves a preparing change as it is: the count, the in-flight intent and its attempt unchanged', async () => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    const busy = await inFlight(1);
    const intents = await ctx.intentRows();
    const change = await request(3);
    const fence = await takeLeases(3);
    const claimed = ok(await s.partitions.claimChange([fence[0]!], change.changeId));
    expect(ok(await s.partitions.switchCount(fence, change.changeId))).toEqual(claimed);
    expect(claimed).toMatchObject({ state: 'preparing', switchedAt: null });
    expect((await s.partitions.readLayout()).count).toBe(2);
    expect(await ctx.intentRows()).toEqual(intents);
    expect((await s.intents.listAttempts(busy.intentId)).map((a) => a.outcome)).toEqual(['started']);
  });

  it('listForReassign scopes: open, failed too (or modified since); all (modified since); by intent_id after an exclusive cursor', async () => {
    const ids = await arrange(['scheduled', 'in_flight', 'succeeded', 'failed', 'cancelled', 'scheduled']);
    await sleep(5);
    const since = (await s.partitions.readLayout()).dbNow;
    await sleep(5);
    expect((await s.intents.cancel(ids[5]!)).kind).toBe('ok'); // finished after `since`
    const read = async (scope: ReassignScope, after: number | null, limit: number, modifiedSince: Date | null = null) =>
      (await s.partitions.listForReassign({ scope, after: after === null ? null : ids[after]!, limit, modifiedSince }))
        .map((r) => ids.indexOf(r.intentId));
    const cases: [ReassignScope, number | null, number, Date | null, number[]][] = [
      ['open', null, 10, null, [0, 1, 3]],
      ['open', null, 10, since, [0, 1, 3, 5]],
      ['open', 0, 10, null, [1, 3]],
      ['open', 1, 10, since, [3, 5]],
      ['open', null, 2, since, [0, 1]],
      ['all', null, 10, null, [0, 1, 2, 3, 4, 5]],
      ['all', null, 10, since, [5]],
      ['all', 2, 2, null, [3, 4]],
    ];
    for (const [scope, after, limit, modifiedSince, expected] of cases) {
      expect([scope, after, limit, modifiedSince, await read(scope, after, limit, modifiedSince)]).toEqual([scope, after, limit, modifiedSince, expected]);
    }
    const [row] = await s.partitions.listForReassign({ scope: 'all', after: ids[1]!, limit: 1, modifiedSince: null });
    expect(row).toEqual({ intentId: ids[2], partitionKey: MOVING[2], partition: 0 });
  });

  // Its call may close either way before the scan: the switch abandons it, or its completion comes first (during the
  // drain; a completion leaves a cancelled intent's row as it is, so only the pass's bump tells the scan).
  it.each(['abandoned by the switch', 'completed before the switch'] as const)(
    'a cancelled intent whose call is still out: prepareBatch leaves it and bumps it, so the scan moves it (its attempt %s)', async (closing) => {
      await s.partitions.recordPartitionCount(2, 'host-a');
      const [key] = MOVING;
      const [other, done] = MOVING.filter((k) => k !== key && partitionOf(k, 2) === partitionOf(key!, 2));
      const exec = await acquireToken(s, 'host-x', 60_000, leaseOf(partitionOf(key!, 2)));
      const busy = await put({ key: key! });
      const running = await put({ key: other! }); // in flight, not cancelled: neither moved nor bumped
      ok(await s.executionFor(busy.partition).fencedStartAttempts(exec, [busy, running].map((i) => ({ intentId: i.intentId, expectedAttemptCount: 0 }))));
      expect((await s.intents.cancel(busy.intentId)).kind).toBe('ok');
      const finished = await put({ key: done! });
      await ctx.setIntentStatus(finished.intentId, 'succeeded'); // moved by the pass, not bumped
      await sleep(5);
      const change = await request(4);
      const horizon = (await s.partitions.readLayout()).dbNow;
      const before = await Promise.all([busy, running, finished].map((i) => ctx.modifiedAtText(i.intentId)));
      await sleep(5);
      // One range over every id (the in-flight intent in it too): the store decides row by row.
      const prepared = await s.partitions.prepareBatch(change.changeId, { limit: 3, horizon });
      expect(prepared).toMatchObject({ state: 'preparing', rowsMoved: 1, prepareCursor: finished.intentId }); // `finished`
      expect(await s.intents.get(busy.intentId)).toMatchObject({ status: 'cancelled', partition: partitionOf(key!, 2) });
      expect(await s.intents.get(running.intentId)).toMatchObject({ status: 'in_flight', partition: partitionOf(other!, 2) });
      expect(await s.intents.get(finished.intentId)).toMatchObject({ status: 'succeeded', partition: partitionOf(done!, 4) });
      const after = await Promise.all([busy, running, finished].map((i) => ctx.modifiedAtText(i.intentId)));
      expect([after[0]! > before[0]!, after[1], after[2]]).toEqual([true, before[1], before[2]]);
      expect(await listed('open', horizon)).toEqual([busy.intentId, running.intentId].sort()); // the scan's read
      // The next batch (also what a retry after a lost reply runs): an empty range ends the pass; nothing moves twice.
      expect(await s.partitions.prepareBatch(change.changeId, { limit: 3, horizon })).toMatchObject({ state: 'pending', rowsMoved: 1 });
      expect(await listed('open', horizon)).toEqual([busy.intentId, running.intentId].sort());
      expect(await s.intents.get(busy.intentId)).toMatchObject({ status: 'cancelled', partition: partitionOf(key!, 2) });

      if (closing === 'completed before the switch') {
        const done = await s.executionFor(busy.partition).fencedCompleteAttempts(exec, [{ intentId: busy.intentId, attemptNo: 1,
          outcome: 'succeeded', httpStatus: 200, error: null, durationMs: 5, next: { status: 'succeeded' } }]);
        expect(done.kind).toBe('ok');
        expect(await s.intents.get(busy.intentId)).toMatchObject({ status: 'cancelled', partition: partitionOf(key!, 2) });
      }
      await s.lease.release(exec);
      const fence = await takeLeases(4);
      ok(await s.partitions.claimChange([fence[0]!], change.changeId));
      ok(await s.partitions.switchCount(fence, change.changeId));
      expect((await s.intents.listAttempts(busy.intentId)).map((a) => a.outcome))
        .toEqual([closing === 'completed before the switch' ? 'succeeded' : 'abandoned']);
      const scan = await s.partitions.listForReassign({ scope: 'open', after: null, limit: 10, modifiedSince: horizon });
      expect(scan.map((r) => r.intentId)).toEqual([busy.intentId, running.intentId].sort());
      ok(await s.partitions.moveIntents(fence, change.changeId, movesTo(4, scan), { scanCursor: scan.at(-1)!.intentId, scanDone: true }));
      expect(await s.intents.get(busy.intentId)).toMatchObject({ status: 'cancelled', partition: partitionOf(key!, 4) });
      expect(await s.intents.get(running.intentId)).toMatchObject({ status: 'scheduled', partition: partitionOf(other!, 4) });
    });

  it('a range with a call out (an in-flight intent) moves its settled rows as a range without one does, bumping none', async () => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    const settled = (k: number) => put({ key: MOVING[k]! }).then(async (i) => (await ctx.setIntentStatus(i.intentId, k % 2 ? 'cancelled' : 'succeeded'), i));
    const first = [await settled(0), await settled(1)];
    const exec = await acquireToken(s, 'host-x', 60_000, leaseOf(partitionOf(MOVING[2]!, 2)));
    const busy = await put({ key: MOVING[2]! });
    ok(await s.executionFor(busy.partition).fencedStartAttempts(exec, [{ intentId: busy.intentId, expectedAttemptCount: 0 }]));
    const second = [await settled(3), await settled(4), await settled(5)];
    await sleep(5);
    const change = await request(4);
    const horizon = (await s.partitions.readLayout()).dbNow;
    const all = [...first, busy, ...second];
    const before = await Promise.all(all.map((i) => ctx.modifiedAtText(i.intentId)));
    // Range 1: two settled rows and the call out; range 2: three settled rows and none.
    expect(await s.partitions.prepareBatch(change.changeId, { limit: 3, horizon })).toMatchObject({ rowsMoved: 2, prepareCursor: busy.intentId });
    expect(await s.partitions.prepareBatch(change.changeId, { limit: 3, horizon })).toMatchObject({ rowsMoved: 5, prepareCursor: second[2]!.intentId });
    expect(await s.partitions.prepareBatch(change.changeId, { limit: 3, horizon })).toMatchObject({ state: 'pending', rowsMoved: 5 });
    expect((await ctx.intentRows()).map((r) => [r.intentId, r.partition]))
      .toEqual(all.map((i, k) => [i.intentId, partitionOf(MOVING[k]!, i === busy ? 2 : 4)]));
    expect(await Promise.all(all.map((i) => ctx.modifiedAtText(i.intentId)))).toEqual(before);
    expect((await s.intents.listAttempts(busy.intentId)).map((a) => a.outcome)).toEqual(['started']);
  });

  it('a failed intent is open, and prepareBatch leaves it (a redrive reopens it)', async () => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    const [failed] = await arrange(['failed']);
    await sleep(5);
    const since = (await s.partitions.readLayout()).dbNow;
    for (const modifiedSince of [null, since]) expect(await listed('open', modifiedSince)).toEqual([failed]);
    const change = await request(4);
    expect(await s.partitions.prepareBatch(change.changeId, { limit: 10, horizon: since })).toMatchObject({ state: 'pending', rowsMoved: 0 });
    expect((await s.intents.get(failed!))!.partition).toBe(partitionOf(MOVING[0]!, 2));
  });

  it('the horizon splits the settled rows exactly: prepareBatch moves one modified before it only; open with modifiedSince reads one modified at or after it', async () => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    const [early, late] = await arrange(['succeeded', 'scheduled']);
    await sleep(5);
    expect((await s.intents.cancel(late!)).kind).toBe('ok');
    // Bounds at the row's own time, to the millisecond: since ≤ its time keeps it for the scan, since > its time for the pass.
    for (const id of [early!, late!]) {
      const at = msOf(await ctx.modifiedAtText(id));
      expect(await listed('open', at)).toContain(id);
      expect(await listed('open', new Date(at.getTime() + 1))).not.toContain(id);
    }
    const between = new Date(msOf(await ctx.modifiedAtText(early!)).getTime() + 1);
    expect(await listed('open', between)).toEqual([late]);
    const change = await request(4);
    expect(await s.partitions.prepareBatch(change.changeId, { limit: 10, horizon: between })).toMatchObject({ state: 'pending', rowsMoved: 1 });
    expect((await ctx.intentRows()).map((r) => r.partition)).toEqual([partitionOf(MOVING[0]!, 4), partitionOf(MOVING[1]!, 2)]);
  });
});
