// The START statement judges the leader's own hold rules as it runs, on every dialect: a pause of the partition or of
// the cluster ('paused') or a pending handover request for the partition's lease ('draining') makes a whole START
// start nothing (no attempt row, no intent change, no audit row), whatever flags the leader last read; once the pause
// ends or the request is completed the same START starts. Holds of other partitions hold nothing here.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import { acquireToken, LEASE_NAME } from '../support/instances.js';
import type { Stores } from '../../src/store/stores.js';
import type { IntentContract, StartHold } from '../../src/store/intentPorts.js';
import type { LeaseToken } from '../../src/store/ports.js';
import { clusterControlName, partitionLeaseName } from '../../src/limits.js';
import { uuidv7 } from '../../src/intents/ids.js';

const contract: IntentContract = { provider: { url: null }, payload: { a: 1 }, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 20 } };
const CLUSTER = clusterControlName(LEASE_NAME);

/** A hold set through the operator's own store calls (as any instance records it), and its end. */
interface HoldCase {
  name: string;
  /** The partition whose START is tried. */
  partition: number;
  /** Sets the hold; returns how to end it (`token`: the partition's lease, for a handover's fenced completion). */
  set(s: Stores): Promise<(token: LeaseToken) => Promise<void>>;
  /** What the START answers while the hold is set (null: it starts, the hold is not this partition's). */
  by: StartHold | null;
}

const pause = (name: string) => async (s: Stores) => {
  await s.ops.setPaused(name, true, 'test', 'hold');
  return async () => void (await s.ops.setPaused(name, false, 'test', null));
};
const drain = (leaseName: string) => async (s: Stores) => {
  const { request } = await s.ops.requestHandover(leaseName, uuidv7(), 'test', 'drain');
  return async (token: LeaseToken) => {
    const done = await s.ops.fencedCompleteHandover(token, request.requestId);
    expect(done.kind).toBe('ok');
  };
};

const cases: HoldCase[] = [
  { name: 'its partition paused', partition: 0, set: pause(LEASE_NAME), by: 'paused' },
  { name: 'the cluster paused', partition: 0, set: pause(CLUSTER), by: 'paused' },
  { name: 'a drain of its lease pending', partition: 0, set: drain(LEASE_NAME), by: 'draining' },
  { name: 'partition 2: the cluster paused', partition: 2, set: pause(CLUSTER), by: 'paused' },
  { name: 'partition 2: its partition paused', partition: 2, set: pause(partitionLeaseName(LEASE_NAME, 2)), by: 'paused' },
  { name: 'partition 2: a drain of its lease pending', partition: 2, set: drain(partitionLeaseName(LEASE_NAME, 2)), by: 'draining' },
  { name: 'partition 2: partition 1 paused (not its hold)', partition: 2, set: pause(partitionLeaseName(LEASE_NAME, 1)), by: null },
  { name: 'partition 2: a drain of partition 0 pending (not its hold)', partition: 2, set: drain(LEASE_NAME), by: null },
];

describe.each(dialects)('start hold contract: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    s = await ctx.openStores();
  });

  const put = async (partition: number): Promise<string> => {
    const intentId = uuidv7();
    await s.intents.insert({ intentId, idempotencyKey: null, requestHash: '0'.repeat(64), contract, maxAttempts: 3, notBefore: null, partition });
    return intentId;
  };

  it.each(cases)('$name', async (c) => {
    const leaseName = partitionLeaseName(LEASE_NAME, c.partition);
    const token = await acquireToken(s, 'A', 60_000, leaseName);
    const store = s.executionFor(c.partition);
    const id = await put(c.partition);
    const end = await c.set(s);
    const out = await store.fencedStartAttempts(token, [{ intentId: id, expectedAttemptCount: 0 }]);
    if (c.by === null) {
      expect(out.kind === 'ok' && out.value.map((a) => a.intentId)).toEqual([id]);
      return;
    }
    expect(out).toEqual({ kind: 'held', by: c.by });
    expect(await s.intents.get(id)).toMatchObject({ status: 'scheduled', attemptCount: 0 });
    expect(await s.intents.listAttempts(id)).toEqual([]);
    expect((await ctx.auditLog()).filter((a) => a.action === 'start_attempts')).toEqual([]);
    await end(token);
    const again = await store.fencedStartAttempts(token, [{ intentId: id, expectedAttemptCount: 0 }]);
    expect(again.kind === 'ok' && again.value.map((a) => [a.intentId, a.attemptNo])).toEqual([[id, 1]]);
    expect((await ctx.auditLog()).filter((a) => a.action === 'start_attempts').map((a) => a.leaseEpoch)).toEqual([token.leaseEpoch]);
  });

  it('a drain held beside a pause says draining; a stale token is refused before any hold (leaseLost)', async () => {
    const token = await acquireToken(s, 'A', 60_000, LEASE_NAME);
    const id = await put(0);
    await pause(LEASE_NAME)(s);
    await drain(LEASE_NAME)(s);
    expect(await s.execution.fencedStartAttempts(token, [{ intentId: id, expectedAttemptCount: 0 }])).toEqual({ kind: 'held', by: 'draining' });
    await ctx.stealLease(LEASE_NAME, 'B');
    expect(await s.execution.fencedStartAttempts(token, [{ intentId: id, expectedAttemptCount: 0 }])).toEqual({ kind: 'leaseLost' });
  });
});
