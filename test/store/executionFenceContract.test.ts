// The executor's batched writes are fenced on every dialect: a stale token writes nothing (no attempt
// rows, no intent change, no audit row) and reports leaseLost; the current token writes and audits.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import { staleWrites } from '../support/fenceChecker.js';
import { LEASE_NAME, submit } from '../support/instances.js';
import type { Stores } from '../../src/store/stores.js';

describe.each(dialects)('execution fence contract: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    s = await ctx.openStores();
  });

  it('start and complete write only under the current epoch', async () => {
    const a = await s.lease.tryAcquire(LEASE_NAME, 'A', 60_000);
    if (!a.acquired) throw new Error('not acquired');
    const tokenA = { leaseName: LEASE_NAME, holderId: 'A', leaseEpoch: a.lease.leaseEpoch };
    const i1 = await submit(s);
    const i2 = await submit(s);
    const started = await s.execution.fencedStartAttempts(tokenA, [{ intentId: i1.intentId, expectedAttemptCount: 0 }]);
    expect(started.kind === 'ok' && started.value.map((x) => [x.intentId, x.attemptNo, x.abortedBefore])).toEqual([[i1.intentId, 1, 0]]);
    // The lease moves on (A paused past expiry, B acquired): A's token is stale now.
    await ctx.stealLease(LEASE_NAME, 'B');
    const lateStart = await s.execution.fencedStartAttempts(tokenA, [{ intentId: i2.intentId, expectedAttemptCount: 0 }]);
    expect(lateStart).toEqual({ kind: 'leaseLost' });
    const lateComplete = await s.execution.fencedCompleteAttempts(tokenA, [{
      intentId: i1.intentId, attemptNo: 1, outcome: 'succeeded', httpStatus: 200, error: null, durationMs: 5, next: { status: 'succeeded' } }]);
    expect(lateComplete).toEqual({ kind: 'leaseLost' });
    expect((await s.intents.get(i2.intentId))?.attemptCount).toBe(0);
    expect((await s.intents.get(i1.intentId))?.status).toBe('in_flight');
    expect((await s.intents.listAttempts(i1.intentId)).map((x) => x.outcome)).toEqual(['started']);
    const audit = await ctx.auditLog();
    expect(audit.map((x) => [x.leaseEpoch, x.action])).toEqual([[tokenA.leaseEpoch, 'start_attempts']]);
    expect(staleWrites(audit, await s.lease.listEvents(LEASE_NAME))).toEqual([]);
  });

  it('orphan recovery: attempts of an older epoch on intents that moved on are closed and audited too (issue 20 item 9)', async () => {
    const a = await s.lease.tryAcquire(LEASE_NAME, 'A', 60_000);
    if (!a.acquired) throw new Error('not acquired');
    const tokenA = { leaseName: LEASE_NAME, holderId: 'A', leaseEpoch: a.lease.leaseEpoch };
    const i1 = await submit(s);
    expect((await s.execution.fencedStartAttempts(tokenA, [{ intentId: i1.intentId, expectedAttemptCount: 0 }])).kind).toBe('ok');
    await ctx.setIntentStatus(i1.intentId, 'cancelled'); // cancelled while its call was out; then A died
    await ctx.stealLease(LEASE_NAME, 'B');
    const tokenB = { leaseName: LEASE_NAME, holderId: 'B', leaseEpoch: tokenA.leaseEpoch + 1 };
    expect(await s.execution.fencedRecoverOrphans(tokenB)).toEqual({ kind: 'ok', value: { recovered: 0 } }); // no intent moved
    expect((await s.intents.listAttempts(i1.intentId)).map((x) => x.outcome)).toEqual(['abandoned']);
    expect((await s.intents.get(i1.intentId))?.status).toBe('cancelled');
    // The closed attempt is a write of epoch B like any other: it leaves an audit row (before: none, 0 intents moved).
    const audit = await ctx.auditLog();
    expect(audit.map((x) => [x.leaseEpoch, x.action])).toEqual([[tokenA.leaseEpoch, 'start_attempts'], [tokenB.leaseEpoch, 'recover_orphans']]);
  });

  it('an aborted record of a lost START moves nothing when another epoch started that attempt number', async () => {
    // A's START of attempt 1 failed with its outcome unknown (it did not commit): A records attempt 1 as aborted.
    // Meanwhile B (epoch 2) started attempt 1 and lost its lease; A leads again (epoch 3) and writes its record.
    const i1 = await submit(s, { n: 1 }, { maxAttempts: 1 });
    const a = await s.lease.tryAcquire(LEASE_NAME, 'A', 60_000);
    if (!a.acquired) throw new Error('not acquired');
    const epochA = a.lease.leaseEpoch;
    await ctx.stealLease(LEASE_NAME, 'B');
    const tokenB = { leaseName: LEASE_NAME, holderId: 'B', leaseEpoch: epochA + 1 };
    expect((await s.execution.fencedStartAttempts(tokenB, [{ intentId: i1.intentId, expectedAttemptCount: 0 }])).kind).toBe('ok');
    await ctx.stealLease(LEASE_NAME, 'A');
    const tokenA = { leaseName: LEASE_NAME, holderId: 'A', leaseEpoch: epochA + 2 };
    const out = await s.execution.fencedCompleteAttempts(tokenA, [{ intentId: i1.intentId, attemptNo: 1, outcome: 'aborted', httpStatus: null,
      error: 'aborted before the provider call: the start\'s reply was lost', durationMs: 0, next: { status: 'scheduled', retryDelayMs: 0 },
      attemptEpoch: epochA }]);
    expect(out).toEqual({ kind: 'ok', value: [{ intentId: i1.intentId, applied: false, row: null }] });
    expect(await s.intents.get(i1.intentId)).toMatchObject({ status: 'in_flight', attemptCount: 1 });
    expect((await s.intents.listAttempts(i1.intentId)).map((x) => [x.outcome, x.leaseEpoch])).toEqual([['started', epochA + 1]]);
    // Orphan recovery then counts it (it may have been sent) and says so.
    const rec = await s.execution.fencedRecoverOrphans(tokenA);
    expect(rec).toEqual({ kind: 'ok', value: { recovered: 1 } });
    const row = await s.intents.get(i1.intentId);
    expect(row).toMatchObject({ status: 'failed' });
    expect(row!.lastError).toContain('it may have been sent');
    expect((await s.intents.listAttempts(i1.intentId))[0]!.error).toContain('it may have been sent');
  });

  it('an empty batch is a no-op, not a lease loss', async () => {
    const a = await s.lease.tryAcquire(LEASE_NAME, 'A', 60_000);
    if (!a.acquired) throw new Error('not acquired');
    const token = { leaseName: LEASE_NAME, holderId: 'A', leaseEpoch: a.lease.leaseEpoch };
    expect(await s.execution.fencedStartAttempts(token, [])).toEqual({ kind: 'ok', value: [] });
    expect(await s.execution.fencedCompleteAttempts(token, [])).toEqual({ kind: 'ok', value: [] });
  });
});
