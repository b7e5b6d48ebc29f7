// The InsightStore contract (the dashboard's reads), run unchanged against every dialect.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import type { Stores } from '../../src/store/stores.js';
import type { IntentSearch } from '../../src/store/insightPorts.js';
import type { IntentContract, IntentStatus } from '../../src/store/intentPorts.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { partitionLeaseNames } from '../../src/limits.js';

const LEASE = 'insight-contract-lease';
const contract: IntentContract = { provider: { url: null }, payload: { a: 1 }, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 20 } };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(dialects)('insight store contract: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    s = await ctx.openStores();
  });

  async function intent(key: string | null, status: IntentStatus = 'scheduled'): Promise<string> {
    const intentId = uuidv7();
    await s.intents.insert({ intentId, idempotencyKey: key, requestHash: 'a'.repeat(64), contract, maxAttempts: 3, notBefore: null });
    if (status !== 'scheduled') await ctx.setIntentStatus(intentId, status);
    return intentId;
  }

  it('lease events newest first and bounded; attempts per minute with errors; recent failures newest first', async () => {
    for (let i = 0; i < 3; i++) await ctx.stealLease(LEASE, `h${i}`).catch(async () => { await s.lease.tryAcquire(LEASE, `h${i}`, 60_000); });
    const events = await s.insights.recentLeaseEvents(LEASE, 2);
    expect(events.map((e) => e.leaseEpoch)).toEqual([3, 2]);
    expect(events[0]).toMatchObject({ event: 'acquired', holderId: 'h2', leaseName: LEASE });
    expect(await s.insights.recentLeaseEvents('other', 5)).toEqual([]);

    expect((await s.insights.attemptsPerMinute(3_600_000)).minutes).toEqual([]);
    const a = await intent(null, 'failed');
    const b = await intent(null, 'in_flight');
    await ctx.insertAttempts([
      { intentId: a, attemptNo: 1, leaseEpoch: 1, holderId: 'x', outcome: 'retryable_error' },
      { intentId: a, attemptNo: 2, leaseEpoch: 1, holderId: 'x', outcome: 'permanent_error' },
      { intentId: b, attemptNo: 1, leaseEpoch: 1, holderId: 'x', outcome: 'succeeded' },
      { intentId: b, attemptNo: 2, leaseEpoch: 1, holderId: 'x', outcome: 'started' },
    ]);
    const pm = await s.insights.attemptsPerMinute(3_600_000);
    expect(pm.minutes).toHaveLength(1); // one statement: one started_at, one minute
    expect(pm.minutes[0]).toMatchObject({ started: 4, errors: 2, succeeded: 1 });
    expect(pm.minutes[0]!.minute.getUTCSeconds()).toBe(0);
    expect(pm.dbNow.getTime() - pm.minutes[0]!.minute.getTime()).toBeLessThan(120_000);

    await sleep(10);
    const c = await intent(null, 'failed');
    expect((await s.insights.recentFailures(10)).map((r) => r.intentId)).toEqual([c, a]);
    expect((await s.insights.recentFailures(1)).map((r) => r.intentId)).toEqual([c]);
  });

  it('partitionStates: every partition asked for, in order, from one statement: lease row, backlog (due by database now), last start', async () => {
    const names = partitionLeaseNames(LEASE, 4);
    const refs = names.map((leaseName, partition) => ({ partition, leaseName }));
    const at = async (partition: number, notBefore: Date | null, status: IntentStatus = 'scheduled') => {
      const intentId = uuidv7();
      await s.intents.insert({ intentId, idempotencyKey: null, requestHash: 'a'.repeat(64), contract, maxAttempts: 3, notBefore, partition });
      if (status !== 'scheduled') await ctx.setIntentStatus(intentId, status);
      return intentId;
    };
    const empty = await s.insights.partitionStates(refs);
    expect(empty.partitions).toEqual(refs.map((r) => ({ ...r, lease: null, scheduled: 0, due: 0, lastAttemptAt: null })));

    // Partition 1 held; partition 3 acquired briefly, then expired (the row stays); 0 and 2 never acquired.
    const held = await s.lease.tryAcquire(names[1]!, 'holder-1', 60_000);
    const brief = await s.lease.tryAcquire(names[3]!, 'holder-3', 50);
    expect([held.acquired, brief.acquired]).toEqual([true, true]);
    const future = new Date(Date.now() + 3_600_000);
    await at(1, null);
    await at(1, null);
    await at(1, future);
    await at(2, future);
    const ran = await at(2, null, 'in_flight');
    await at(3, null, 'failed'); // not scheduled: no backlog
    await at(3, future, 'cancelled');
    await ctx.insertAttempts([{ intentId: ran, attemptNo: 1, leaseEpoch: 1, holderId: 'x', outcome: 'started' }]);
    await sleep(120);

    const got = await s.insights.partitionStates(refs);
    expect(got.partitions.map((p) => [p.partition, p.leaseName, p.scheduled, p.due])).toEqual([
      [0, LEASE, 0, 0], [1, `${LEASE}#1`, 3, 2], [2, `${LEASE}#2`, 1, 0], [3, `${LEASE}#3`, 0, 0],
    ]);
    const [p0, p1, p2, p3] = got.partitions;
    expect(p0!.lease).toBeNull();
    expect(p2!.lease).toBeNull();
    expect(p1!.lease).toMatchObject({ holderId: 'holder-1', leaseEpoch: 1 });
    expect(p1!.lease!.expiresAt.getTime()).toBeGreaterThan(got.dbNow.getTime());
    expect(p3!.lease).toMatchObject({ holderId: 'holder-3', leaseEpoch: 1 });
    expect(p3!.lease!.expiresAt.getTime()).toBeLessThanOrEqual(got.dbNow.getTime()); // by database time
    expect(p1!.lease!.acquiredAt.getTime()).toBeLessThanOrEqual(p1!.lease!.renewedAt.getTime());
    // The last start is the partition's own: partition 2 ran one attempt, the others none.
    expect(got.partitions.map((p) => p.lastAttemptAt === null)).toEqual([true, true, false, true]);
    expect(got.dbNow.getTime() - p2!.lastAttemptAt!.getTime()).toBeGreaterThanOrEqual(0);
    expect(got.dbNow.getTime() - p2!.lastAttemptAt!.getTime()).toBeLessThan(60_000);

    // A subset, in the order asked (GET /api/leases/{partition} reads one).
    const one = await s.insights.partitionStates([refs[2]!, refs[1]!]);
    expect(one.partitions.map((p) => [p.partition, p.scheduled, p.due])).toEqual([[2, 1, 0], [1, 3, 2]]);
  });

  it('partitionControls: every partition asked for, in order, from one statement: the pause row and the pending drain', async () => {
    const names = partitionLeaseNames(LEASE, 4);
    const refs = names.map((leaseName, partition) => ({ partition, leaseName }));
    const running = { paused: false, changedAt: null, changedBy: null, reason: null, pendingHandover: null, failingMaintenance: null };
    expect(await s.insights.partitionControls(refs)).toEqual(refs.map((r) => ({ ...r, ...running })));

    // Partition 2 paused with a reason; partition 3 paused then resumed (a row, not paused); drains asked of 1 and 3.
    await s.ops.setPaused(names[2]!, true, 'admin@a', 'deploy');
    await s.ops.setPaused(names[3]!, true, 'admin@a', null);
    await s.ops.setPaused(names[3]!, false, 'admin@b', null);
    const d1 = (await s.ops.requestHandover(names[1]!, uuidv7(), 'admin@c', null)).request;
    const d3 = (await s.ops.requestHandover(names[3]!, uuidv7(), 'admin@d', 'move')).request;
    await s.ops.requestHandover(names[3]!, uuidv7(), 'admin@e', null); // already pending: no second request
    await s.ops.requestHandover('another-cluster', uuidv7(), 'admin@f', null);
    // Maintenance as leaders record it: partition 0 failed and recovered (failures 0), partition 2 fails in two tasks.
    await s.ops.recordMaintenance(names[0]!, 'retention', 'leader-0', 2, 'disk full');
    await s.ops.recordMaintenance(names[0]!, 'retention', 'leader-0', 0, null);
    await s.ops.recordMaintenance(names[2]!, 'retention', 'leader-2', 3, 'permission denied');
    await s.ops.recordMaintenance(names[2]!, 'other', 'leader-2', 1, 'x');

    const got = await s.insights.partitionControls(refs);
    expect(got.map((c) => [c.partition, c.leaseName, c.paused, c.changedBy, c.reason, c.pendingHandover?.requestId ?? null])).toEqual([
      [0, LEASE, false, null, null, null], [1, `${LEASE}#1`, false, null, null, d1.requestId],
      [2, `${LEASE}#2`, true, 'admin@a', 'deploy', null], [3, `${LEASE}#3`, false, 'admin@b', null, d3.requestId],
    ]);
    expect(got[3]!.pendingHandover).toEqual({ requestId: d3.requestId, requestedAt: d3.requestedAt, requestedBy: 'admin@d' });
    expect(got[2]!.changedAt).toBeInstanceOf(Date);
    expect(got.map((c) => c.failingMaintenance?.task ?? null)).toEqual([null, null, 'retention', null]);
    expect(got[2]!.failingMaintenance).toMatchObject({ failures: 3, lastError: 'permission denied', holderId: 'leader-2' });
    expect(got[2]!.failingMaintenance!.changedAt).toBeInstanceOf(Date);
    // A subset, in the order asked.
    expect((await s.insights.partitionControls([refs[2]!, refs[0]!])).map((c) => [c.partition, c.paused])).toEqual([[2, true], [0, false]]);
  });

  it('search: by id, idempotency key, status, created range; newest first; paged with `before`', async () => {
    const first = await intent('k-1', 'failed');
    await sleep(20);
    const mid = new Date((await ctx.intentRows()).find((r) => r.intentId === first)!.createdAt.getTime() + 10);
    const second = await intent('k-2');
    const third = await intent(null, 'succeeded');
    const q: IntentSearch = { intentId: null, idempotencyKey: null, status: null, createdFrom: null, createdTo: null, before: null, limit: 10 };
    const ids = async (x: Partial<typeof q>) => (await s.insights.searchIntents({ ...q, ...x })).map((r) => r.intentId);
    expect(await ids({})).toEqual([third, second, first]);
    expect(await ids({ intentId: second })).toEqual([second]);
    expect(await ids({ idempotencyKey: 'k-1' })).toEqual([first]);
    expect(await ids({ idempotencyKey: 'nope' })).toEqual([]);
    expect(await ids({ status: 'succeeded' })).toEqual([third]);
    expect(await ids({ createdFrom: mid })).toEqual([third, second]);
    expect(await ids({ createdTo: mid })).toEqual([first]);
    expect(await ids({ limit: 2 })).toEqual([third, second]);
    expect(await ids({ limit: 2, before: second })).toEqual([first]);
  });

  it('redrivesOf: the redrives that moved an intent, oldest first', async () => {
    const id = await intent(null, 'failed');
    expect(await s.insights.redrivesOf(id)).toEqual([]);
    const base = { requestedBy: 'ops@x', ids: [id], failedFrom: null, failedTo: null, errorContains: null, limit: 10 };
    await s.redrive.redrive({ ...base, redriveId: uuidv7(), reason: 'one' });
    await ctx.setIntentStatus(id, 'failed');
    await s.redrive.redrive({ ...base, redriveId: uuidv7(), reason: null });
    const r = await s.insights.redrivesOf(id);
    expect(r.map((x) => [x.reason, x.requestedBy, x.attemptsBefore])).toEqual([['one', 'ops@x', 0], [null, 'ops@x', 0]]);
  });
});
