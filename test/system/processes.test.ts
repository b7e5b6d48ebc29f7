// The spec's five acceptance tests with separate OS processes: three `node dist/src/local/main.js`
// processes (INSTANCES=1 each, own holder id) on a fresh database of each server (PostgreSQL, MariaDB, SQL Server), a recording provider
// (PROVIDER_URL), real HTTP, real signals. Required under CI=true like the other database-server suites.
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startRecordingProvider, type RecordingProvider } from '../support/recordingProvider.js';
import { staleWrites } from '../support/fenceChecker.js';
import {
  ensureBuilt, FAST_ENV, findLeader, killAll, postIntent, readyz, startHost, waitFor,
  type HostProcess, type PgTestDatabase,
} from '../support/localHostProcess.js';
import { serverDatabases } from '../support/dialects.js';
import { describePickup, MAX_READS_BEFORE_START, readsBetween, refreshReadsInLog } from '../support/pickup.js';

const LEASE_MS = 3_000;
const TICK_MS = 1_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(serverDatabases)('spec tests with separate OS processes ($name server)', (server) => {
  const skip = server.unavailable();
  let db: PgTestDatabase;
  let provider: RecordingProvider;
  const hosts: HostProcess[] = [];

  beforeAll(() => ensureBuilt(), 120_000);
  beforeEach(async (t) => {
    if (skip) return t.skip(skip);
    db = await server.create();
    provider = await startRecordingProvider();
  });
  afterEach(async () => {
    await killAll(hosts.splice(0));
    await provider?.close();
    await db?.drop();
  });

  /** Three processes started at once, each one instance with its own holder id. */
  const startProcesses = async (extra: Record<string, string> = {}) => {
    const env = { ...FAST_ENV, DATABASE_URL: db.url, INSTANCES: '1', PROVIDER_URL: provider.url, ...extra };
    const procs = await Promise.all([1, 2, 3].map((i) => startHost({ ...env, HOLDER_ID: `proc${i}` })));
    hosts.push(...procs);
    return procs;
  };
  const holder = (h: HostProcess) => h.holderIds[0]!;
  const acquired = async () =>
    (await db.sql<{ seq: string; lease_epoch: string; holder_id: string; event: string; at: Date }>(
      'SELECT seq, lease_epoch, holder_id, event, at FROM submission_manager_lease_events ORDER BY seq'))
      .filter((e) => e.event === 'acquired').map((e) => ({ seq: Number(e.seq), epoch: Number(e.lease_epoch), holderId: e.holder_id, at: e.at }));
  const attempts = () =>
    db.sql<{ intent_id: string; holder_id: string; lease_epoch: string; started_at: Date; outcome: string }>(
      'SELECT intent_id, holder_id, lease_epoch, started_at, outcome FROM submission_attempts');
  const allSucceeded = (n: number) => async () => {
    const r = await db.sql<{ n: number | string }>(`SELECT COUNT(*) AS n FROM submission_intents WHERE status = 'succeeded'`);
    return Number(r[0]!.n) === n;
  };
  const noStaleWrites = async () => {
    const audit = await db.sql<{ seq: string; lease_epoch: string; action: string }>('SELECT seq, lease_epoch, action FROM submission_execution_audit ORDER BY seq');
    const events = await db.sql<{ seq: string; lease_epoch: string; event: string }>('SELECT seq, lease_epoch, event FROM submission_manager_lease_events ORDER BY seq');
    expect(staleWrites(
      audit.map((a) => ({ seq: Number(a.seq), leaseEpoch: Number(a.lease_epoch), action: a.action })),
      events.map((e) => ({ seq: Number(e.seq), leaseEpoch: Number(e.lease_epoch), event: e.event })),
    )).toEqual([]);
  };
  const submitAcross = async (targets: HostProcess[], n: number, tag: string) => {
    const ids: string[] = [];
    for (let k = 0; k < n; k++) {
      const r = await postIntent(targets[k % targets.length]!.api, { tag, k });
      expect(r.status).toBe(201);
      ids.push(r.intentId);
    }
    return ids;
  };

  it('1. single leader on concurrent start: one epoch, only its holder calls the provider', async () => {
    const procs = await startProcesses();
    const leader = await findLeader(procs);
    await sleep(2 * TICK_MS); // several contended ticks on every process
    await submitAcross(procs, 12, 'concurrent-start');
    await waitFor('all succeeded', allSucceeded(12), 20_000);
    const acq = await acquired();
    expect(acq.map((e) => [e.epoch, e.holderId])).toEqual([[1, holder(leader.host)]]);
    expect(new Set((await attempts()).map((a) => a.holder_id))).toEqual(new Set([holder(leader.host)]));
    expect(new Set(provider.calls.map((c) => c.leaseEpoch))).toEqual(new Set([1]));
    for (const p of procs) {
      expect(p.lines.some((l) => l.startsWith('[inst-1] leader'))).toBe(p === leader.host);
    }
    await noStaleWrites();
  });

  it('2. failover after expiry: SIGKILL the leader; a survivor acquires after the old lease expires and executes', async () => {
    const procs = await startProcesses();
    const old = await findLeader(procs);
    old.host.signal('SIGKILL');
    await old.host.exited;
    const [row] = await db.sql<{ expires_at: Date; lease_epoch: string }>('SELECT expires_at, lease_epoch FROM submission_manager_leases');
    const survivors = procs.filter((p) => p !== old.host);
    const [id] = await submitAcross(survivors, 1, 'after-crash');
    // When: by the database's times (acquired at or after expiry); the wait is only a liveness guard.
    await provider.waitFor((c) => c.some((x) => x.intentId === id), 30_000);
    const call = provider.calls.find((x) => x.intentId === id)!;
    const next = (await acquired()).find((e) => e.epoch === Number(row!.lease_epoch) + 1)!;
    expect(survivors.map(holder)).toContain(next.holderId);
    expect(next.at.getTime()).toBeGreaterThanOrEqual(row!.expires_at.getTime()); // never before expiry (DB time)
    expect(call.leaseEpoch).toBe(next.epoch);
    await waitFor('succeeded', allSucceeded(1), 10_000);
    await noStaleWrites();
  });

  it('3. no execution without leadership: followers never start attempts, write, or call the provider', async () => {
    const procs = await startProcesses();
    const leader = await findLeader(procs);
    const followers = procs.filter((p) => p !== leader.host);
    await submitAcross(followers, 20, 'via-followers');
    await waitFor('all succeeded', allSucceeded(20), 20_000);
    const rows = await attempts();
    expect(rows.length).toBeGreaterThanOrEqual(20);
    for (const f of followers) expect(rows.some((a) => a.holder_id === holder(f))).toBe(false);
    const writers = await db.sql<{ holder_id: string }>('SELECT DISTINCT holder_id FROM submission_execution_audit');
    expect(writers.map((w) => w.holder_id)).toEqual([holder(leader.host)]);
    expect(new Set(provider.calls.map((c) => c.leaseEpoch))).toEqual(new Set([leader.view.leaseEpoch]));
    for (const f of followers) {
      const v = (await readyz(f.api)) as unknown as { mode: string; scheduleSize: number };
      expect(v).toMatchObject({ mode: 'follower', scheduleSize: 0 });
    }
  });

  it('4. the leader stops on lease loss: SIGSTOP past its lease, SIGCONT → no new attempt, no stale-epoch write', async () => {
    provider.answer = () => ({ status: 200, delayMs: 300 });
    const procs = await startProcesses();
    const old = await findLeader(procs);
    const oldEpoch = old.view.leaseEpoch!;
    const others = procs.filter((p) => p !== old.host);
    await submitAcross(others, 40, 'pause');
    await provider.waitFor((c) => c.filter((x) => x.leaseEpoch === oldEpoch).length >= 3, 10_000);
    old.host.signal('SIGSTOP'); // mid-batch: provider calls in flight, completions pending
    const next = await findLeader(others, LEASE_MS + 3 * TICK_MS + 3_000);
    expect(next.view.leaseEpoch).toBeGreaterThan(oldEpoch);
    await sleep(TICK_MS);
    const from = old.host.lines.length;
    old.host.signal('SIGCONT');
    const resumedAt = Date.now();
    await old.host.waitForLine(/^\[inst-1\] follower \(reason /, 30_000, from); // a liveness guard (a loaded runner resumes it late)
    await waitFor('all succeeded', allSucceeded(40), 30_000);
    await sleep(2 * TICK_MS); // the resumed process ticks again as a follower
    // It must survive the pause (its database sessions were ended by the server meanwhile).
    expect(old.host.child.exitCode, `resumed process exited: ${old.host.stderr().slice(0, 800)}`).toBeNull();
    expect((await readyz(old.host.api)).mode).toBe('follower');
    expect(old.host.lines.slice(from).some((l) => l.startsWith('[inst-1] leader'))).toBe(false);

    // After resume: no provider call and no attempt start with the old epoch.
    expect(provider.calls.filter((c) => c.leaseEpoch === oldEpoch && c.arrivedAt > resumedAt)).toEqual([]);
    const newAcquire = (await acquired()).find((e) => e.epoch > oldEpoch)!;
    const late = (await attempts()).filter((a) => Number(a.lease_epoch) === oldEpoch && a.started_at >= newAcquire.at);
    expect(late).toEqual([]);
    await noStaleWrites();
  });

  // DUE_NOTICES=off: no NOTIFY wakes the leader (SQL Server's situation), so only the interval refresh can find the
  // intent. The bound (executed within one refresh interval) is judged by the leader's own record (test/support/
  // pickup.ts), not by wall time: a loaded machine makes the refreshes late, not this order.
  it('5. a follower-submitted intent is started by the first refresh that began after its commit (DUE_NOTICES=off)', async () => {
    const procs = await startProcesses({ DUE_NOTICES: 'off', LOG_LEVEL: 'debug' });
    const leader = await findLeader(procs);
    const followers = procs.filter((p) => p !== leader.host);
    /** Per intent: a database time after the intake replied, so after its commit. */
    const committedBy = new Map<string, Date>();
    // One at a time (the guarantee is per intent with room to start it: a batch of them would wait for start slots).
    for (let k = 0; k < 16; k++) {
      const { intentId } = await postIntent(followers[k % 2]!.api, { via: 'follower', k });
      committedBy.set(intentId, (await db.sql<{ now: Date }>(`SELECT ${server.dbTimeSql()} AS now`))[0]!.now);
      await provider.waitFor((c) => c.some((x) => x.intentId === intentId), 30_000);
      await sleep((137 * k) % TICK_MS); // land at different points of the tick cycle, the gap between ticks too
    }
    const reads = refreshReadsInLog(leader.host.logFile);
    expect(reads.length).toBeGreaterThan(1); // the leader refreshed meanwhile
    const started = new Map((await attempts()).map((a) => [a.intent_id, a.started_at]));
    for (const [id, commit] of committedBy) {
      const startedAt = started.get(id)!;
      const between = readsBetween(reads, commit, startedAt);
      expect(between.length, describePickup(id, commit, startedAt, between)).toBeLessThanOrEqual(MAX_READS_BEFORE_START);
    }
    expect(new Set(provider.calls.map((c) => c.leaseEpoch))).toEqual(new Set([leader.view.leaseEpoch]));
  }, 90_000);
});
