// Partitioned execution (issue 25), run unchanged against every dialect: each partition's ExecutionStore
// (Stores.executionFor) reads and writes only its own partition's intents, fenced by its own lease. Two partitions'
// leases are held by one holder ('A', as one process may lead every partition), so only the partition filter —
// not the holder or epoch checks — keeps one partition's writes off the other's intents.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import { acquireToken, LEASE_NAME } from '../support/instances.js';
import type { Stores } from '../../src/store/stores.js';
import type { AttemptCompletion, IntentContract, IntentStatus } from '../../src/store/intentPorts.js';
import type { LeaseToken } from '../../src/store/ports.js';
import { partitionLeaseName } from '../../src/limits.js';
import { uuidv7 } from '../../src/intents/ids.js';

const contract: IntentContract = { provider: { url: null }, payload: { a: 1 }, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 20 } };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const LEASE_1 = partitionLeaseName(LEASE_NAME, 1);

describe.each(dialects)('partitioned execution contract: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    s = await ctx.openStores();
  });

  /** A due, scheduled intent of `partition` (uuidv7: ids ascend in insert order). */
  const put = async (partition: number): Promise<string> => {
    const intentId = uuidv7();
    await s.intents.insert({ intentId, idempotencyKey: null, requestHash: '0'.repeat(64), contract, maxAttempts: 3, notBefore: null, partition });
    return intentId;
  };
  const start = async (partition: number, token: LeaseToken, intentId: string) => {
    const out = await s.executionFor(partition).fencedStartAttempts(token, [{ intentId, expectedAttemptCount: 0 }]);
    if (out.kind !== 'ok') throw new Error('lease lost');
    return out.value.map((x) => x.intentId);
  };
  const success = (intentId: string): AttemptCompletion =>
    ({ intentId, attemptNo: 1, outcome: 'succeeded', httpStatus: 200, error: null, durationMs: 5, next: { status: 'succeeded' } });
  const status = async (intentId: string) => (await s.intents.get(intentId))?.status;
  const outcomes = async (intentId: string) => (await s.intents.listAttempts(intentId)).map((a) => [a.outcome, a.leaseEpoch]);

  it('stores.execution is partition 0\'s store; each partition\'s store is one object', () => {
    expect(s.executionFor(0)).toBe(s.execution);
    expect(s.executionFor(1)).toBe(s.executionFor(1));
    expect(s.executionFor(1)).not.toBe(s.execution);
    expect(() => s.executionFor(-1)).toThrow(RangeError);
  });

  it('loadScheduled and refreshPage of a partition see only its intents; the refresh cursor is per partition', async () => {
    const { cursor } = await s.execution.rebuildStart(60_000);
    const p0 = [await put(0), await put(0)];
    const p1 = [await put(1), await put(1), await put(1)];
    const ids = (rows: { intentId: string }[]) => rows.map((r) => r.intentId).sort();
    expect(ids(await s.executionFor(0).loadScheduled(null, 100))).toEqual([...p0].sort());
    expect(ids(await s.executionFor(1).loadScheduled(null, 100))).toEqual([...p1].sort());
    expect(await s.executionFor(2).loadScheduled(null, 100)).toEqual([]);
    expect(ids((await s.executionFor(0).refreshPage(cursor, 100, 0)).rows)).toEqual([...p0].sort());
    // Partition 1 paged two rows at a time: the second page continues from its own rows only.
    const first = (await s.executionFor(1).refreshPage(cursor, 2, 0)).rows;
    expect(first).toHaveLength(2);
    const last = first[first.length - 1]!;
    const next = (await s.executionFor(1).refreshPage({ modifiedAt: last.version, intentId: last.intentId }, 2, 0)).rows;
    expect(ids([...first, ...next])).toEqual([...p1].sort());
  });

  it('a start of another partition\'s intent is not started (as a failed predicate); its own partition starts it', async () => {
    const t0 = await acquireToken(s, 'A', 60_000, LEASE_NAME);
    const t1 = await acquireToken(s, 'A', 60_000, LEASE_1);
    const i1 = await put(1);
    expect(await start(0, t0, i1)).toEqual([]);
    expect(await s.intents.get(i1)).toMatchObject({ status: 'scheduled', attemptCount: 0 });
    expect(await s.intents.listAttempts(i1)).toEqual([]);
    expect(await start(1, t1, i1)).toEqual([i1]);
    expect(await s.intents.get(i1)).toMatchObject({ status: 'in_flight', attemptCount: 1, partition: 1 });
  });

  it('orphan recovery of partition 1 at epoch 5 leaves partition 0\'s in-flight intent (epoch 1, its own lease) alone', async () => {
    const t0 = await acquireToken(s, 'A', 60_000, LEASE_NAME);
    expect(t0.leaseEpoch).toBe(1);
    const a = await put(0);
    const c = await put(0);
    expect(await start(0, t0, a)).toEqual([a]);
    expect(await start(0, t0, c)).toEqual([c]);
    await ctx.setIntentStatus(c, 'cancelled' as IntentStatus); // cancelled while its call is out: its attempt stays 'started'
    // Partition 1: epoch 4 starts b, then its lease moves on to epoch 5 (b's leader died).
    await acquireToken(s, 'A', 60_000, LEASE_1);
    for (let i = 0; i < 3; i++) await ctx.stealLease(LEASE_1, 'B');
    const t1at4: LeaseToken = { leaseName: LEASE_1, holderId: 'B', leaseEpoch: 4 };
    const b = await put(1);
    expect(await start(1, t1at4, b)).toEqual([b]);
    await ctx.stealLease(LEASE_1, 'C');
    const t1at5: LeaseToken = { leaseName: LEASE_1, holderId: 'C', leaseEpoch: 5 };
    expect(await s.executionFor(1).fencedRecoverOrphans(t1at5)).toEqual({ kind: 'ok', value: { recovered: 1 } });
    expect(await status(b)).toBe('scheduled');
    expect(await outcomes(b)).toEqual([['abandoned', 4]]);
    // Partition 0's attempts (epoch 1 < 5, but of another lease) are untouched: in flight, and the cancelled one still open.
    expect(await s.intents.get(a)).toMatchObject({ status: 'in_flight', attemptCount: 1 });
    expect(await outcomes(a)).toEqual([['started', 1]]);
    expect(await outcomes(c)).toEqual([['started', 1]]);
    // Partition 0's leader still completes its own attempt.
    const done = await s.execution.fencedCompleteAttempts(t0, [success(a)]);
    expect(done.kind === 'ok' && done.value.map((x) => x.applied)).toEqual([true]);
  });

  it('completions are fenced by their own partition\'s lease and touch only their partition\'s attempts', async () => {
    const t0 = await acquireToken(s, 'A', 60_000, LEASE_NAME);
    const t1 = await acquireToken(s, 'A', 60_000, LEASE_1);
    expect(t1.leaseEpoch).toBe(t0.leaseEpoch); // the same holder and epoch number: only the partition tells them apart
    const [a0, b0, a1] = [await put(0), await put(0), await put(1)];
    expect(await start(0, t0, a0)).toEqual([a0]);
    expect(await start(0, t0, b0)).toEqual([b0]);
    expect(await start(1, t1, a1)).toEqual([a1]);
    // Partition 0's store with its token completes nothing of partition 1 (same holder, same epoch number).
    const cross = await s.execution.fencedCompleteAttempts(t0, [success(a1)]);
    expect(cross).toEqual({ kind: 'ok', value: [{ intentId: a1, applied: false, row: null }] });
    expect(await outcomes(a1)).toEqual([['started', t1.leaseEpoch]]);
    expect(await status(a1)).toBe('in_flight');
    // Partition 1's lease is lost: its completions are refused, partition 0's writes go on.
    await ctx.stealLease(LEASE_1, 'B');
    expect(await s.executionFor(1).fencedCompleteAttempts(t1, [success(a1)])).toEqual({ kind: 'leaseLost' });
    expect(await s.executionFor(1).fencedStartAttempts(t1, [])).toEqual({ kind: 'leaseLost' });
    const ok = await s.execution.fencedCompleteAttempts(t0, [success(a0), success(b0)]);
    expect(ok.kind === 'ok' && ok.value.map((x) => [x.intentId, x.applied])).toEqual([[a0, true], [b0, true]]);
    expect(await status(a1)).toBe('in_flight');
    expect([await status(a0), await status(b0)]).toEqual(['succeeded', 'succeeded']);
  });

  it('retention purges only its partition\'s terminal intents, fenced by that partition\'s lease', async () => {
    const t0 = await acquireToken(s, 'A', 60_000, LEASE_NAME);
    const t1 = await acquireToken(s, 'A', 60_000, LEASE_1);
    const p0 = [await put(0), await put(0)];
    const p1 = [await put(1), await put(1)];
    for (const id of [...p0, ...p1]) await ctx.setIntentStatus(id, 'succeeded');
    await sleep(50);
    expect(await s.ops.fencedPurgeTerminal(t1, 1, 10, 100)).toEqual({ kind: 'ok', value: { intents: 2, attempts: 0 } });
    expect((await ctx.intentRows()).map((r) => r.intentId).sort()).toEqual([...p0].sort());
    // Partition 1's lease is lost: its purge is refused; partition 0's, under its own lease, goes on.
    await ctx.stealLease(LEASE_1, 'B');
    expect(await s.ops.fencedPurgeTerminal(t1, 1, 10, 100)).toEqual({ kind: 'leaseLost' });
    expect(await s.ops.fencedPurgeTerminal(t0, 0, 10, 100)).toEqual({ kind: 'ok', value: { intents: 2, attempts: 0 } });
    expect(await ctx.countIntents()).toBe(0);
  });

  // The cluster-wide readers read each partition's range of a partition-first index and merge (migration 010 / 005):
  // they must still see every partition, in the same order as one range would give.
  it('cluster-wide readers see every partition: overview due figures, recent failures, redrive oldest first', async () => {
    const due = [await put(0), await put(2), await put(2)]; // partition 1 has none: an empty partition in between
    const failed = [await put(2), await put(0), await put(1), await put(2)]; // failed in this order (oldest first)
    for (const id of failed) {
      await ctx.setIntentStatus(id, 'failed');
    }
    // setIntentStatus leaves last_modified_at as inserted, so the failures are ordered by insert (uuidv7) order.
    const o = await s.ops.getClusterOverview(LEASE_NAME);
    expect(o.intentsByStatus).toMatchObject({ scheduled: due.length, failed: failed.length });
    expect(o.dueNow).toBe(due.length);
    const first = await s.intents.get(due[0]!);
    expect(o.oldestDueAt?.getTime()).toBe(first!.nextAttemptAt.getTime());
    expect((await s.insights.recentFailures(3)).map((r) => r.intentId)).toEqual([...failed].reverse().slice(0, 3));
    const r = await s.redrive.redrive({ ids: null, failedFrom: null, failedTo: null, errorContains: null, limit: 3,
      redriveId: uuidv7(), requestedBy: 'test', reason: null });
    expect(r.redriven.map((x) => x.intentId).sort()).toEqual(failed.slice(0, 3).sort());
    expect(await status(failed[3]!)).toBe('failed');
  });
});

