// The OpsStore contract (execution control row, fenced retention purge), run unchanged against every dialect.
// Retention is exercised with a small `olderThanMs` and real waiting, so no dialect-specific SQL ages rows.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext, itWhere } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import type { Stores } from '../../src/store/stores.js';
import type { IntentContract, IntentStatus } from '../../src/store/intentPorts.js';
import type { LeaseToken } from '../../src/store/ports.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { LEASE_NAME_MAX_BASE_LENGTH, LEASE_NAME_MAX_LENGTH, clusterControlName, leaseNameRoomProblem, partitionLeaseName } from '../../src/limits.js';

const LEASE = 'ops-contract-lease';
const contract: IntentContract = { provider: { url: null }, payload: { a: 1 }, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 20 } };
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(dialects)('ops store contract: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    s = await ctx.openStores();
  });

  it('provider breaker state: none until recorded, then the last recorded state with database time and holder, per lease name', async () => {
    expect((await s.ops.getExecutionControl(LEASE)).providerBreaker).toBeNull();
    await s.ops.recordProviderBreaker(LEASE, 'open', 'leader-a');
    const first = (await s.ops.getExecutionControl(LEASE)).providerBreaker!;
    expect(first).toMatchObject({ state: 'open', holderId: 'leader-a' });
    await sleep(5);
    await s.ops.recordProviderBreaker(LEASE, 'closed', 'leader-b');
    const c = await s.ops.getExecutionControl(LEASE);
    expect(c.providerBreaker).toMatchObject({ state: 'closed', holderId: 'leader-b' });
    expect(c.providerBreaker!.changedAt.getTime()).toBeGreaterThanOrEqual(first.changedAt.getTime());
    expect(c.providerBreaker!.changedAt.getTime()).toBeLessThanOrEqual(c.dbNow.getTime());
    expect(c.paused).toBe(false); // the pause flag is untouched (no control row was created)
    expect(c.changedAt).toBeNull();
    expect((await s.ops.getExecutionControl('another-lease')).providerBreaker).toBeNull();
    await expect(s.ops.recordProviderBreaker(LEASE, 'bogus', 'x')).rejects.toThrow(); // CHECK constraint
  });

  it('provider holds (issue 25): an open breaker until its cool-down ends, a pause only ever extended, by database time', async () => {
    expect(await s.ops.getProviderHold(LEASE)).toBeNull();
    // Lengths of a minute, judged with 10 s to spare: however slow the statements between, the figures stay apart.
    await s.ops.recordProviderPause(LEASE, 60_000, 'leader-a'); // no row yet: created, breaker closed
    let h = (await s.ops.getProviderHold(LEASE))!;
    expect(h).toMatchObject({ breaker: 'closed', holderId: 'leader-a', openForMs: 0 });
    expect(h.pausedForMs).toBeGreaterThan(50_000);
    expect(h.pausedForMs).toBeLessThanOrEqual(60_000);
    await s.ops.recordProviderPause(LEASE, 100, 'leader-b'); // ends earlier: the longer pause stays
    expect((await s.ops.getProviderHold(LEASE))!.pausedForMs).toBeGreaterThan(50_000);
    await s.ops.recordProviderBreaker(LEASE, 'open', 'leader-b', 90_000);
    h = (await s.ops.getProviderHold(LEASE))!;
    expect(h).toMatchObject({ breaker: 'open', holderId: 'leader-b' });
    expect(h.openForMs).toBeGreaterThan(80_000);
    expect(h.openForMs).toBeLessThanOrEqual(90_000);
    expect(h.pausedForMs).toBeGreaterThan(50_000); // the pause is a column of its own
    expect(h.pausedForMs).toBeLessThanOrEqual(60_000);
    await s.ops.recordProviderBreaker(LEASE, 'half_open', 'leader-b', 90_000); // only `open` has an end
    expect((await s.ops.getProviderHold(LEASE))!.openForMs).toBe(0);
    await s.ops.recordProviderBreaker(LEASE, 'open', 'leader-c', 1);
    await sleep(20);
    expect((await s.ops.getProviderHold(LEASE))!).toMatchObject({ breaker: 'open', holderId: 'leader-c', openForMs: 0 }); // over
    expect(await s.ops.getProviderHold('another-lease')).toBeNull();
  });

  async function leader(holderId = 'ops-leader'): Promise<LeaseToken> {
    const out = await s.lease.tryAcquire(LEASE, holderId, 60_000);
    if (!out.acquired) throw new Error('lease not acquired');
    return { leaseName: LEASE, holderId, leaseEpoch: out.lease.leaseEpoch };
  }

  /** An intent in `status`, with `attempts` closed attempt rows (a started one when in_flight). */
  async function intent(status: IntentStatus, attempts = 1): Promise<string> {
    const intentId = uuidv7();
    await s.intents.insert({ intentId, idempotencyKey: null, requestHash: 'a'.repeat(64), contract, maxAttempts: 3, notBefore: null });
    if (status !== 'scheduled') await ctx.setIntentStatus(intentId, status);
    const outcome = status === 'in_flight' ? 'started' : status === 'succeeded' ? 'succeeded' : 'permanent_error';
    const n = status === 'scheduled' ? 0 : attempts;
    if (n > 0) {
      await ctx.insertAttempts(Array.from({ length: n }, (_, i) => ({
        intentId, attemptNo: i + 1, leaseEpoch: 1, holderId: 'old', outcome: i + 1 === n ? outcome : 'retryable_error' as const,
      })));
    }
    return intentId;
  }

  it('execution control: no row = running; pause/resume upsert; repeating a change keeps its first changedAt', async () => {
    const none = await s.ops.getExecutionControl(LEASE);
    expect(none).toMatchObject({ leaseName: LEASE, paused: false, changedAt: null, changedBy: null, reason: null });
    expect(none.dbNow).toBeInstanceOf(Date);
    const paused = await s.ops.setPaused(LEASE, true, 'ops@inst-1', 'maintenance window');
    expect(paused).toMatchObject({ paused: true, changedBy: 'ops@inst-1', reason: 'maintenance window' });
    expect(paused.changedAt!.getTime()).toBeLessThanOrEqual(paused.dbNow.getTime());
    const again = await s.ops.setPaused(LEASE, true, 'someone-else', null);
    expect(again).toMatchObject({ paused: true, changedBy: 'ops@inst-1', reason: 'maintenance window' });
    expect(again.changedAt!.getTime()).toBe(paused.changedAt!.getTime());
    expect((await s.ops.getExecutionControl(LEASE)).paused).toBe(true);
    expect((await s.ops.getExecutionControl('another-cluster')).paused).toBe(false); // scoped by lease name
    const resumed = await s.ops.setPaused(LEASE, false, 'ops@inst-2', null);
    expect(resumed).toMatchObject({ paused: false, changedBy: 'ops@inst-2', reason: null });
    // Concurrent first writes of the row do not fail (upsert under a key lock).
    const [a, b] = await Promise.all([s.ops.setPaused('fresh', true, 'a', null), s.ops.setPaused('fresh', true, 'b', null)]);
    expect([a.paused, b.paused]).toEqual([true, true]);
  });

  it('cluster-scope pause: its own row, read beside a partition\'s in one statement; the two flags are independent', async () => {
    const cluster = clusterControlName(LEASE);
    const p2 = partitionLeaseName(LEASE, 2);
    expect((await s.ops.getExecutionControl(p2, cluster)).cluster).toEqual({ paused: false, changedAt: null, changedBy: null, reason: null });
    expect((await s.ops.getExecutionControl(p2)).cluster).toBeNull(); // not asked for
    const set = await s.ops.setPaused(cluster, true, 'ops@http-only', 'deploy');
    expect(set).toMatchObject({ leaseName: cluster, paused: true, changedBy: 'ops@http-only', reason: 'deploy', cluster: null });
    // Every partition's read sees it, whatever partition (or count) it is; the partition's own flag stays clear.
    for (const name of [LEASE, p2, partitionLeaseName(LEASE, 63)]) {
      const c = await s.ops.getExecutionControl(name, cluster);
      expect(c).toMatchObject({ leaseName: name, paused: false, cluster: { paused: true, changedBy: 'ops@http-only', reason: 'deploy' } });
      expect(c.cluster!.changedAt!.getTime()).toBe(set.changedAt!.getTime());
    }
    expect((await s.ops.getExecutionControl(p2, clusterControlName('another-cluster'))).cluster!.paused).toBe(false);
    await s.ops.setPaused(p2, true, 'ops@a', 'partition 2');
    await s.ops.setPaused(cluster, false, 'ops@b', null); // resuming the cluster leaves a partition's pause set
    expect(await s.ops.getExecutionControl(p2, cluster)).toMatchObject({ paused: true, reason: 'partition 2', cluster: { paused: false, changedBy: 'ops@b' } });
    // The key fits lease_name (64 characters) uncut for the longest LEASE_NAME config takes, and never names a partition of any LEASE_NAME.
    const longest = clusterControlName('x'.repeat(LEASE_NAME_MAX_BASE_LENGTH));
    expect(longest).toHaveLength(LEASE_NAME_MAX_LENGTH);
    expect((await s.ops.setPaused(longest, true, 'a', null)).paused).toBe(true);
    expect(leaseNameRoomProblem(cluster, 1, 'EXECUTOR_PARTITIONS (1)')).toMatch(/may not end with "#\*"/);
  });

  it('cluster overview: empty cluster, then the lease row, counts per status, due backlog, oldest due age, newest attempt', async () => {
    const empty = await s.ops.getClusterOverview(LEASE);
    expect(empty).toMatchObject({
      leaseName: LEASE, lease: null, dueNow: 0, oldestDueAt: null, oldestDueAgeMs: 0, lastAttemptAt: null,
      intentsByStatus: { scheduled: 0, in_flight: 0, succeeded: 0, failed: 0, cancelled: 0 },
    });
    expect(empty.dbNow).toBeInstanceOf(Date);

    const token = await leader('overview-leader');
    const due = [await intent('scheduled'), await intent('scheduled'), await intent('scheduled')];
    const later = uuidv7();
    await s.intents.insert({
      intentId: later, idempotencyKey: null, requestHash: 'b'.repeat(64), contract, maxAttempts: 3,
      notBefore: new Date(empty.dbNow.getTime() + 3_600_000),
    });
    await intent('in_flight', 2);
    await intent('succeeded', 1);
    await intent('failed', 3);
    await intent('failed', 1);
    await intent('cancelled', 0);
    await sleep(20);

    const o = await s.ops.getClusterOverview(LEASE);
    const lease = (await s.lease.get(LEASE))!;
    expect(o.lease).toEqual({
      holderId: 'overview-leader', leaseEpoch: token.leaseEpoch, acquiredAt: lease.acquiredAt, renewedAt: lease.renewedAt, expiresAt: lease.expiresAt,
    });
    expect(o.intentsByStatus).toEqual({ scheduled: 4, in_flight: 1, succeeded: 1, failed: 2, cancelled: 1 });
    expect(o.intentsCapped).toEqual([]);
    expect(o.dueNow).toBe(3);
    const rows = (await ctx.intentRows()).filter((r) => due.includes(r.intentId));
    const oldest = Math.min(...rows.map((r) => r.nextAttemptAt.getTime()));
    expect(o.oldestDueAt!.getTime()).toBe(oldest);
    expect(o.oldestDueAgeMs).toBe(o.dbNow.getTime() - oldest);
    expect(o.oldestDueAgeMs).toBeGreaterThanOrEqual(20);
    const newest = Math.max(...(await ctx.attemptRows()).map((a) => a.startedAt.getTime()));
    expect(o.lastAttemptAt!.getTime()).toBe(newest);
    expect(o.dbNow.getTime()).toBeGreaterThanOrEqual(o.lastAttemptAt!.getTime());
    // Scoped by lease name: another cluster's lease row is absent, the intent figures are the table's.
    expect((await s.ops.getClusterOverview('another-cluster')).lease).toBeNull();
    // Once the future intent is due it joins the backlog; a renewal shows up as renewedAt.
    await sleep(2); // the renewal then falls in a later millisecond than the read above, whatever the machine's speed
    await s.lease.renew(token, 60_000);
    const renewed = await s.ops.getClusterOverview(LEASE);
    expect(renewed.lease!.renewedAt.getTime()).toBeGreaterThan(lease.renewedAt.getTime());
    expect(renewed.lease!.expiresAt.getTime()).toBeGreaterThan(renewed.dbNow.getTime());
  });

  it('retention: deletes only terminal intents older than the cutoff, with their attempts, in bounded batches; never an active one', async () => {
    const token = await leader();
    const old = { succeeded: [] as string[], failed: [] as string[], cancelled: [] as string[] };
    const t0 = Date.now();
    for (let i = 0; i < 9; i++) old.succeeded.push(await intent('succeeded', 2));
    for (let i = 0; i < 8; i++) old.failed.push(await intent('failed', 1));
    for (let i = 0; i < 8; i++) old.cancelled.push(await intent('cancelled', 0));
    // The horizon from the measured cost of writing one intent (its round trips), not a wall-clock guess: the young
    // intents below (2 writes) and the 4 purge statements after them take far less than 20 such costs, so they stay
    // younger than the horizon on a slow or remote server too.
    const horizonMs = Math.max(500, Math.ceil(20 * (Date.now() - t0) / 25));
    const activeScheduled = [await intent('scheduled'), await intent('scheduled')];
    const activeInFlight = [await intent('in_flight', 1), await intent('in_flight', 2)];
    await sleep(horizonMs + 200);
    const young = [await intent('succeeded', 1), await intent('cancelled', 0)];
    const oldAttempts = 9 * 2 + 8 * 1;

    const batches: { intents: number; attempts: number }[] = [];
    for (;;) {
      const out = await s.ops.fencedPurgeTerminal(token, 0, horizonMs, 10, 30_000); // capped (the maintenance slice): same result
      if (out.kind !== 'ok') throw new Error('lease lost');
      batches.push(out.value);
      if (out.value.intents < 10) break;
    }
    expect(batches.map((b) => b.intents)).toEqual([10, 10, 5]);
    expect(batches.reduce((n, b) => n + b.attempts, 0)).toBe(oldAttempts);

    const left = (await ctx.intentRows()).map((r) => r.intentId).sort();
    expect(left).toEqual([...activeScheduled, ...activeInFlight, ...young].sort());
    const attemptsLeft = await ctx.attemptRows();
    expect(new Set(attemptsLeft.map((a) => a.intentId))).toEqual(new Set([...activeInFlight, young[0]!]));
    expect(attemptsLeft).toHaveLength(1 + 2 + 1);
    // Fenced and audited like every executor write.
    const audit = (await ctx.auditLog()).filter((a) => a.action === 'purge_retention');
    expect(audit).toHaveLength(3);
    expect(audit.every((a) => a.leaseEpoch === token.leaseEpoch)).toBe(true);
    // Nothing older than the cutoff is left to purge.
    const done = await s.ops.fencedPurgeTerminal(token, 0, horizonMs, 10);
    expect(done).toEqual({ kind: 'ok', value: { intents: 0, attempts: 0 } });
  });

  // SQL Server: the retention purge's READPAST (+ READCOMMITTEDLOCK) must work with READ_COMMITTED_SNAPSHOT on and off;
  // the workflow runs this suite both ways — this pins that each job really runs the setting it names.
  itWhere(dialect.name === 'mssql')('SQL Server: the database runs READ_COMMITTED_SNAPSHOT as the suite asked (MSSQL_TEST_RCSI)', async () => {
    const [row] = await ctx.sql<{ rcsi: boolean }>('SELECT is_read_committed_snapshot_on AS rcsi FROM sys.databases WHERE database_id = DB_ID();');
    expect(Boolean(row!.rcsi)).toBe((process.env.MSSQL_TEST_RCSI ?? 'on').toLowerCase() !== 'off');
    expect(ctx.snapshotReads).toBe(Boolean(row!.rcsi));
  });

  it('maintenance state: none until recorded; a failure then its recovery, per lease name and task, with database time and holder', async () => {
    expect(await s.ops.listMaintenance(LEASE)).toEqual([]);
    const before = (await s.ops.getExecutionControl(LEASE)).dbNow;
    await s.ops.recordMaintenance(LEASE, 'retention', 'leader-1', 1, 'permission denied for table submission_intents');
    await s.ops.recordMaintenance(LEASE, 'retention', 'leader-1', 2, 'e'.repeat(1_500)); // cut to its column
    const [failing, ...rest] = await s.ops.listMaintenance(LEASE);
    expect(rest).toEqual([]);
    expect(failing).toMatchObject({ task: 'retention', failures: 2, lastError: 'e'.repeat(1_000), holderId: 'leader-1' });
    expect(failing!.changedAt.getTime()).toBeGreaterThanOrEqual(before.getTime());
    await s.ops.recordMaintenance(LEASE, 'retention', 'leader-2', 0, null);
    expect(await s.ops.listMaintenance(LEASE)).toEqual([expect.objectContaining({ task: 'retention', failures: 0, lastError: null, holderId: 'leader-2' })]);
    expect(await s.ops.listMaintenance('another-cluster')).toEqual([]);
  });

  it('retention is fenced: a stale token deletes nothing', async () => {
    const token = await leader();
    const ids = [await intent('succeeded'), await intent('failed')];
    await sleep(300);
    await ctx.stealLease(LEASE, 'thief');
    expect(await s.ops.fencedPurgeTerminal(token, 0, 100, 1_000)).toEqual({ kind: 'leaseLost' });
    expect((await ctx.intentRows()).map((r) => r.intentId).sort()).toEqual([...ids].sort());
    expect(await ctx.attemptRows()).toHaveLength(2);
  });

  it('handover requests: one pending per lease name, visible in the control row, completed only by the fenced current leader', async () => {
    expect(await s.ops.listHandovers(LEASE, 10)).toEqual([]);
    const none = await s.ops.requestHandover(LEASE, uuidv7(), 'ops@inst-2', null);
    expect(none).toMatchObject({ created: true, request: { leaseName: LEASE, status: 'pending', requestedEpoch: null, completedAt: null } });
    const old = await leader('old-leader');
    await s.lease.release(old);
    const token = await leader('ops-leader');
    const again = await s.ops.requestHandover(LEASE, uuidv7(), 'someone', 'deploy');
    expect(again).toMatchObject({ created: false, request: { requestId: none.request.requestId, requestedBy: 'ops@inst-2', reason: null } });
    expect((await s.ops.getExecutionControl(LEASE)).pendingHandoverId).toBe(none.request.requestId);
    expect((await s.ops.getExecutionControl('another-cluster')).pendingHandoverId).toBeNull();

    expect(await s.ops.fencedCompleteHandover(old, none.request.requestId)).toEqual({ kind: 'leaseLost' }); // a stale leader
    expect((await s.ops.getExecutionControl(LEASE)).pendingHandoverId).toBe(none.request.requestId);
    const done = await s.ops.fencedCompleteHandover(token, none.request.requestId);
    expect(done).toMatchObject({ kind: 'ok', value: { applied: true, request: { status: 'completed', completedEpoch: token.leaseEpoch, completedBy: 'ops-leader' } } });
    const completed = (done as { value: { request: { completedAt: Date; requestedAt: Date } } }).value.request;
    expect(completed.completedAt.getTime()).toBeGreaterThanOrEqual(completed.requestedAt.getTime());
    expect(await s.ops.fencedCompleteHandover(token, none.request.requestId)).toMatchObject({ kind: 'ok', value: { applied: false } });
    expect((await s.ops.getExecutionControl(LEASE)).pendingHandoverId).toBeNull();

    // The next request is a new one and records the epoch leading then; concurrent requests share one pending row.
    const [a, b] = await Promise.all([s.ops.requestHandover(LEASE, uuidv7(), 'a', null), s.ops.requestHandover(LEASE, uuidv7(), 'b', null)]);
    expect(a.request.requestId).toBe(b.request.requestId);
    expect([a.created, b.created].sort()).toEqual([false, true]);
    expect(a.request.requestedEpoch).toBe(token.leaseEpoch);
    const list = await s.ops.listHandovers(LEASE, 10);
    expect(list.map((r) => [r.requestId, r.status])).toEqual([[a.request.requestId, 'pending'], [none.request.requestId, 'completed']]);
    expect(await s.ops.listHandovers(LEASE, 1)).toHaveLength(1);
  });
});
