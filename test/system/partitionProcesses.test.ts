// Partitioned execution (issue 25) with separate OS processes: three `node dist/src/local/main.js` processes with
// EXECUTOR_PARTITIONS=4 (INSTANCES=1 each, own holder id; without AzureWebJobsStorage each process runs every
// partition's timer, so all three contend for every partition) on a fresh database of each server, a recording
// provider, real HTTP, real signals. The spec's tests per partition: exactly one executor per partition at any
// time, and a killed holder's partitions — only those — fail over.
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startRecordingProvider, type RecordingProvider } from '../support/recordingProvider.js';
import { staleWrites } from '../support/fenceChecker.js';
import { ensureBuilt, FAST_ENV, killAll, postIntent, startHost, waitFor, type HostProcess, type PgTestDatabase } from '../support/localHostProcess.js';
import { serverDatabases } from '../support/dialects.js';
import { describePickup, MAX_READS_BEFORE_START, readsBetween, refreshReadsInLog } from '../support/pickup.js';

const P = 4;
const LEASE_MS = 3_000;
const TICK_MS = 1_000;

interface LeaseView { leaseName: string; holderId: string; epoch: number; expiresAt: Date }

describe.each(serverDatabases)('partitions with separate OS processes, P = 4 ($name server)', (server) => {
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

  const startProcesses = async (extra: Record<string, string> = {}, ids = [1, 2, 3]) => {
    const env = { ...FAST_ENV, DATABASE_URL: db.url, INSTANCES: '1', PROVIDER_URL: provider.url, EXECUTOR_PARTITIONS: String(P),
      INSTANCE_HEARTBEAT_MS: '300', INSTANCE_LIVE_WINDOW_MS: '2000', ...extra };
    const procs = await Promise.all(ids.map((i) => startHost({ ...env, HOLDER_ID: `proc${i}` })));
    hosts.push(...procs);
    return procs;
  };
  /** Partitions each process leads now (live rows), by holder id. */
  const shares = async (procs: HostProcess[]) => {
    const rows = await leases();
    const { now } = (await db.sql<{ now: Date }>(`SELECT ${server.dbTimeSql()} AS now`))[0]!;
    return procs.map((h) => rows.filter((r) => r.holderId === h.holderIds[0] && r.expiresAt > new Date(now)).length);
  };
  /** Every partition led and the shares within one of each other, `stableMs` long (no partition moving meanwhile). */
  const converged = (procs: HostProcess[], stableMs: number) => waitFor('a fair share', async () => {
    const a = await shares(procs);
    if (a.reduce((x, y) => x + y, 0) !== P || Math.max(...a) - Math.min(...a) > 1) return null;
    const before = (await acquiredEvents()).length;
    await new Promise((r) => setTimeout(r, stableMs));
    const b = await shares(procs);
    return (await acquiredEvents()).length === before && b.join() === a.join() ? a : null;
  }, 40_000, 200);
  const leases = async (): Promise<LeaseView[]> =>
    (await db.sql<{ lease_name: string; holder_id: string; lease_epoch: string; expires_at: Date }>(
      'SELECT lease_name, holder_id, lease_epoch, expires_at FROM submission_manager_leases ORDER BY lease_name'))
      .map((r) => ({ leaseName: r.lease_name, holderId: r.holder_id, epoch: Number(r.lease_epoch), expiresAt: new Date(r.expires_at) }));
  /** Every partition led: P lease rows, each unexpired (by the test's clock, with a margin: a live row is renewed). */
  const allLed = () => waitFor('every partition led', async () => {
    const rows = await leases();
    return rows.length === P && rows.every((r) => r.expiresAt.getTime() > Date.now() - 500) ? rows : null;
  }, 20_000);
  const acquiredEvents = async () =>
    (await db.sql<{ lease_name: string; lease_epoch: string; holder_id: string; event: string; at: Date }>(
      'SELECT lease_name, lease_epoch, holder_id, event, at FROM submission_manager_lease_events ORDER BY seq'))
      .filter((e) => e.event === 'acquired').map((e) => ({ leaseName: e.lease_name, epoch: Number(e.lease_epoch), holderId: e.holder_id, at: new Date(e.at) }));
  /** Partition of each intent, as stored. */
  const partitionOf = async () => new Map((await db.sql<{ intent_id: string; partition_no: number | string }>(
    'SELECT intent_id, partition_no FROM submission_intents')).map((r) => [r.intent_id, Number(r.partition_no)]));
  const attempts = () => db.sql<{ intent_id: string; holder_id: string; lease_epoch: string; started_at: Date }>(
    'SELECT intent_id, holder_id, lease_epoch, started_at FROM submission_attempts');
  const succeeded = (n: number) => async () =>
    Number((await db.sql<{ n: number | string }>(`SELECT COUNT(*) AS n FROM submission_intents WHERE status = 'succeeded'`))[0]!.n) === n;
  /** The fencing invariant per partition: audit rows and acquire events of one lease name, commit-ordered. */
  const noStaleWrites = async () => {
    const audit = await db.sql<{ seq: string; lease_name: string; lease_epoch: string; action: string }>(
      'SELECT seq, lease_name, lease_epoch, action FROM submission_execution_audit ORDER BY seq');
    const events = await db.sql<{ seq: string; lease_name: string; lease_epoch: string; event: string }>(
      'SELECT seq, lease_name, lease_epoch, event FROM submission_manager_lease_events ORDER BY seq');
    for (const name of new Set(events.map((e) => e.lease_name))) {
      expect(staleWrites(
        audit.filter((a) => a.lease_name === name).map((a) => ({ seq: Number(a.seq), leaseEpoch: Number(a.lease_epoch), action: a.action })),
        events.filter((e) => e.lease_name === name).map((e) => ({ seq: Number(e.seq), leaseEpoch: Number(e.lease_epoch), event: e.event })),
      ), name).toEqual([]);
    }
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

  it('exactly one executor per partition: one epoch per lease row, each partition\'s attempts by its holder only', async () => {
    const procs = await startProcesses();
    const led = await allLed();
    await new Promise((r) => setTimeout(r, 2 * TICK_MS)); // several contended ticks on every process
    const ids = await submitAcross(procs, 40, 'partitions');
    await waitFor('all succeeded', succeeded(40), 30_000);
    const names = led.map((r) => r.leaseName);
    expect(names).toEqual(['submission-manager-executor', 'submission-manager-executor#1', 'submission-manager-executor#2', 'submission-manager-executor#3']);
    // One acquire per partition, epoch 1: no partition ever had two executors (nor a second epoch).
    expect((await acquiredEvents()).map((e) => [e.leaseName, e.epoch]).sort()).toEqual(names.map((n) => [n, 1]).sort());
    const holderOf = new Map(led.map((r, k) => [k, r.holderId]));
    const parts = await partitionOf();
    expect(new Set(ids.map((id) => parts.get(id))).size, 'the 40 intents span every partition').toBe(P);
    for (const a of await attempts()) {
      expect(a.holder_id, `attempt of ${a.intent_id} (partition ${parts.get(a.intent_id)})`).toBe(holderOf.get(parts.get(a.intent_id)!));
    }
    expect(new Set(provider.calls.map((c) => c.leaseEpoch))).toEqual(new Set([1]));
    expect(new Set(provider.calls.map((c) => c.intentId)).size).toBe(provider.calls.length); // none sent twice
    await noStaleWrites();
  });

  it('every-instance mode converges to a fair share without thrash; a join moves one partition, a leave only its own', async () => {
    const two = await startProcesses({ TIMER_MODE: 'every-instance' }, [1, 2]);
    expect(await converged(two, 2 * TICK_MS)).toEqual([2, 2]);
    const moves0 = (await acquiredEvents()).length;
    const [third] = await startProcesses({ TIMER_MODE: 'every-instance' }, [3]);
    const all = [...two, third!];
    expect((await converged(all, 3 * TICK_MS)).sort()).toEqual([1, 1, 2]);
    const joinMoves = (await acquiredEvents()).slice(moves0);
    expect(joinMoves.length, `a join moves exactly one partition: ${JSON.stringify(joinMoves)}`).toBe(1);
    // A graceful leave: its partition (released) is taken by one of the others; nothing else moves.
    const now = await shares(all);
    const leaver = all[now.indexOf(Math.max(...now))]!;
    const leaving = Math.max(...now);
    const moves1 = (await acquiredEvents()).length;
    leaver.signal('SIGTERM');
    await leaver.exited;
    const rest = all.filter((h) => h !== leaver);
    expect(await converged(rest, 2 * TICK_MS)).toEqual([2, 2]);
    expect((await acquiredEvents()).length - moves1, 'a leave moves only the leaver\'s partitions').toBe(leaving);
    await noStaleWrites();
  }, 120_000);

  it('kill the holder of two partitions (every-instance, fair share): only those two fail over; the others keep their epoch and keep executing meanwhile', async () => {
    const procs = await startProcesses({ TIMER_MODE: 'every-instance', LOG_LEVEL: 'debug' }); // debug: the refresh reads
    await converged(procs, TICK_MS);
    const led = await allLed();
    const holding = (h: HostProcess) => led.filter((r) => r.holderId === h.holderIds[0] && r.expiresAt.getTime() > Date.now() - 500).map((r) => r.leaseName);
    const victim = procs.find((h) => holding(h).length === 2)!;
    expect(victim, 'a process leads two partitions (fair share of 4 over 3)').toBeDefined();
    const victims = new Set(holding(victim));
    const survivors = procs.filter((h) => h !== victim);
    const eventsAtKill = (await acquiredEvents()).length;
    victim.signal('SIGKILL');
    await victim.exited;
    /** Per intent: a database time after the intake replied, so after its commit. */
    const committedBy = new Map<string, Date>();
    for (let k = 0; k < 24; k++) {
      const r = await postIntent(survivors[k % 2]!.api, { tag: 'after-kill', k });
      expect(r.status).toBe(201);
      committedBy.set(r.intentId, new Date((await db.sql<{ now: Date }>(`SELECT ${server.dbTimeSql()} AS now`))[0]!.now));
    }
    const ids = [...committedBy.keys()];
    const parts = await partitionOf();
    const untouched = ids.filter((id) => !victims.has(led[parts.get(id)!]!.leaseName));
    expect(untouched.length, 'some intents hash to the surviving holders\' partitions').toBeGreaterThan(0);
    await waitFor('all succeeded', succeeded(24), LEASE_MS + 3 * TICK_MS + 30_000); // a liveness guard
    // Partitions whose holder lives execute without waiting for the failover: each such intent is started by the
    // first refresh of its partition's leader that read after its commit (or the next: test/support/pickup.ts),
    // judged by that leader's own record (its refresh reads, the attempt's start), not by a loaded runner's speed.
    const started = new Map((await attempts()).map((a) => [a.intent_id, new Date(a.started_at)]));
    const failedOverAt = (await acquiredEvents()).slice(eventsAtKill).map((e) => e.at.getTime());
    for (const id of untouched) {
      const k = parts.get(id)!;
      const holder = survivors.find((h) => h.holderIds[0] === led[k]!.holderId)!;
      const startedAt = started.get(id)!;
      const between = readsBetween(refreshReadsInLog(holder.logFile, k), committedBy.get(id)!, startedAt);
      expect(between.length, describePickup(id, committedBy.get(id)!, startedAt, between)).toBeLessThanOrEqual(MAX_READS_BEFORE_START);
    }
    const meanwhile = untouched.filter((id) => started.get(id)!.getTime() < Math.min(...failedOverAt)).length;
    console.log(`[partition processes] ${meanwhile} of ${untouched.length} untouched intents started before the failover's first acquire`);
    const after = await leases();
    for (const r of after) {
      const before = led.find((x) => x.leaseName === r.leaseName)!;
      if (victims.has(r.leaseName)) {
        expect(r.epoch, `${r.leaseName} failed over`).toBe(before.epoch + 1);
        expect(survivors.map((h) => h.holderIds[0])).toContain(r.holderId);
      } else {
        expect([r.holderId, r.epoch], `${r.leaseName} kept its holder and epoch`).toEqual([before.holderId, before.epoch]);
      }
    }
    // No partition but the victim's was acquired after the kill.
    expect((await acquiredEvents()).slice(eventsAtKill).filter((e) => !victims.has(e.leaseName))).toEqual([]);
    await noStaleWrites();
  }, 90_000);
});
