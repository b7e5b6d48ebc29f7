// The local host's default timer semantics, as the Functions host's: one instance at a time invokes
// executorTimer, the holder of its listener lock. In one process (INSTANCES=3, in-process lock) and across
// three processes on a real Azurite (blob leases, host.json singleton 15 s / 15 s) and each database server
// (PostgreSQL, MySQL/MariaDB, SQL Server: test/support/dialects.ts).
// SIGKILL the lock holder: the lock moves only after its blob lease ran out, at the first survivor recovery poll
// after that, and execution resumes at the new holder's first leading tick, in the next epoch — judged by the
// lock's and the ticks' own records; docs/flex.md gives the budget this makes in time:
//   crash failover ≤ max(listenerLockPeriod + recoveryPoll + tick, sqlLease + tick) + overhead.
// A drain POSTed to a follower process reaches the lock holder through SQL; followers report the cluster from SQL.
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { startAzurite, type Azurite } from '../support/azurite.js';
import {
  ensureBuilt, FAST_ENV, killAll, postIntent, startHost, waitFor, type HostProcess, type PgTestDatabase,
} from '../support/localHostProcess.js';
import { startRecordingProvider, type RecordingProvider } from '../support/recordingProvider.js';
import { lockEvents, lockOps, overlappingInvocations, timerInvocations } from '../support/timerLog.js';
import { serverDatabases } from '../support/dialects.js';

const LOCK_MS = 15_000; // host.json singleton.listenerLockPeriod
const RECOVERY_MS = 15_000; // host.json singleton.listenerLockRecoveryPollingInterval
const TICK_MS = 1_000; // FAST_ENV EXECUTOR_SCHEDULE
const LEASE_MS = 3_000; // FAST_ENV LEASE_DURATION_MS
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const ACQUIRED = /^\[inst-1\] timer executorTimer: listener lock acquired/;

describe('timer singleton in one process (INSTANCES=3, in-process listener lock)', () => {
  const hosts: HostProcess[] = [];
  beforeAll(() => ensureBuilt(), 120_000);
  afterEach(async () => killAll(hosts.splice(0)));

  it('exactly one instance invokes executorTimer; TIMER_MODE=every-instance runs it on all three', async () => {
    for (const mode of ['singleton', 'every-instance'] as const) {
      const h = await startHost({ ...FAST_ENV, DATABASE_URL: 'pglite:', INSTANCES: '3', TIMER_MODE: mode, DEMO_PROVIDER_VERBOSE: 'false' }, 90_000);
      hosts.push(h);
      await waitFor('ticks', async () => timerInvocations([h.logFile]).length >= 9, 30_000, 200);
      const inv = timerInvocations([h.logFile]);
      const holders = new Set(inv.map((i) => i.holderId));
      if (mode === 'singleton') {
        expect(holders.size).toBe(1);
        expect(overlappingInvocations(inv)).toEqual([]);
        expect(h.lines.filter((l) => / timer executorTimer: listener lock acquired/.test(l))).toHaveLength(1);
      } else {
        expect(holders).toEqual(new Set(h.holderIds));
      }
      await killAll(hosts.splice(0));
    }
  }, 240_000);
});

describe.each(serverDatabases)('timer singleton across processes (Azurite blob leases, $name server)', (server) => {
  const skip = server.unavailable();
  let db: PgTestDatabase;
  let provider: RecordingProvider;
  let azurite: Azurite;
  const hosts: HostProcess[] = [];

  beforeAll(() => ensureBuilt(), 120_000);
  beforeEach(async (t) => {
    if (skip) return t.skip(skip);
    [db, provider, azurite] = await Promise.all([server.create(), startRecordingProvider(), startAzurite()]);
  }, 60_000);
  afterEach(async () => {
    await killAll(hosts.splice(0));
    await provider?.close();
    await azurite?.stop();
    await db?.drop();
  });

  /** Three single-instance processes sharing the Azurite listener locks; resolves once the lock holder leads. */
  const startLockCluster = async (prefix: string) => {
    const env = {
      ...FAST_ENV, DATABASE_URL: db.url, INSTANCES: '1', PROVIDER_URL: provider.url, LOG_LEVEL: 'debug', // debug: the lock's operations
      AzureWebJobsStorage: azurite.connectionString, AzureFunctionsWebHost__hostid: `${prefix}${Date.now() % 1e9}`,
    };
    const procs = await Promise.all([1, 2, 3].map((i) => startHost({ ...env, HOLDER_ID: `${prefix}${i}` })));
    hosts.push(...procs);
    const holder = await waitFor('a lock holder', async () => procs.find((p) => p.lines.some((l) => ACQUIRED.test(l))), 20_000);
    await waitFor('the holder leads', async () => timerInvocations([holder.logFile]).some((i) => i.role === 'leader'), 20_000, 200);
    return { procs, holder };
  };

  it('one process at a time runs the timer; SIGKILL it → the lock moves at the first poll after its lease, execution resumes at the next leading tick', async () => {
    const { procs, holder } = await startLockCluster('proc');
    await sleep(3 * TICK_MS);
    const before = timerInvocations(procs.map((p) => p.logFile));
    expect(new Set(before.map((i) => i.holderId))).toEqual(new Set([holder.holderIds[0]]));
    for (const p of procs) expect(p.lines.some((l) => ACQUIRED.test(l))).toBe(p === holder);

    holder.signal('SIGKILL');
    await holder.exited;
    const deadBy = Date.now(); // it sent nothing after this
    const survivors = procs.filter((p) => p !== holder);
    const { intentId } = await postIntent(survivors[0]!.api, { after: 'kill' });
    await provider.waitFor((c) => c.some((x) => x.intentId === intentId), LOCK_MS + RECOVERY_MS + LEASE_MS + 30_000); // a liveness guard

    // Judged by the lock's own record (each acquire attempt and renewal with when it was sent, LOG_LEVEL=debug) and
    // the order of events, not by how fast a loaded machine moved it: the blob lease counts from a request's arrival.
    const files = procs.map((p) => p.logFile);
    const oldId = holder.holderIds[0]!;
    const moved = lockEvents(files).find((e) => e.event === 'listener_lock_acquired' && e.holderId !== oldId)!;
    const ops = lockOps(files);
    const held = ops.filter((o) => o.holderId === oldId && (o.outcome === 'acquired' || o.outcome === 'renewed'));
    const lastSent = Math.max(...held.map((o) => o.sentAtMs));
    const lastDone = Math.max(...held.map((o) => o.atMs));
    // The next renewal is sent half a period after the last one's reply: if that came before the kill, a renewal the
    // log missed may have extended the lease up to the kill.
    const leaseEndsBy = (deadBy >= lastDone + LOCK_MS / 2 ? deadBy : lastDone) + LOCK_MS;
    const take = ops.find((o) => o.holderId === moved.holderId && o.outcome === 'acquired')!;
    const polls = ops.filter((o) => o.holderId !== oldId && o.op === 'acquire' && o.sentAtMs < take.sentAtMs);
    console.log(`[timer singleton] SIGKILL of the lock holder: its last renewal sent ${new Date(lastSent).toISOString()}, the lock taken by a ` +
      `poll sent ${take.sentAtMs - lastSent} ms later (lease ${LOCK_MS}, recovery poll ${RECOVERY_MS}); ${polls.length} polls busy before`);
    // Nobody takes it before the lease of the holder's last renewal ran out (it counts from no earlier than the send) …
    expect(take.sentAtMs).toBeGreaterThanOrEqual(lastSent + LOCK_MS);
    expect(moved.atMs).toBeGreaterThanOrEqual(lastSent + LOCK_MS);
    // … and a survivor poll sent once it surely ran out (the last renewal's reply + the lease) takes it: Azurite
    // counts a lease on its own clock and may answer busy just past that end, so one more busy poll is its slack.
    expect(polls.filter((o) => o.sentAtMs > leaseEndsBy && o.outcome === 'busy').length).toBeLessThanOrEqual(1);
    // Execution resumes at the new holder's first leading tick (its starts count there, or in its bridge's, added to
    // the next one): the next epoch, by the new holder.
    const newLog = procs.find((p) => p.holderIds[0] === moved.holderId)!.logFile;
    const leading = await waitFor('two leading ticks of the new holder', async () => {
      const l = timerInvocations([newLog]).filter((i) => i.role === 'leader');
      return l.length >= 2 ? l : null;
    }, 30_000, 200); // a liveness guard
    expect(leading.slice(0, 2).reduce((n, i) => n + i.started, 0), JSON.stringify(leading.slice(0, 2))).toBeGreaterThanOrEqual(1);
    const epochs = await db.sql<{ holder_id: string; lease_epoch: string }>(`SELECT holder_id, lease_epoch FROM submission_attempts WHERE intent_id = '${intentId}'`);
    expect(epochs.map((a) => [a.holder_id, Number(a.lease_epoch)])).toEqual([[moved.holderId, Math.max(...before.map((i) => i.leaseEpoch ?? 0)) + 1]]);
    // Still one invoker at a time, before and after; the survivors ticked only once they held the lock.
    const all = timerInvocations(files);
    expect(overlappingInvocations(all)).toEqual([]);
    expect(all.filter((i) => i.holderId !== oldId && i.startMs < moved.atMs - 50)).toEqual([]);
    await sleep(2 * TICK_MS);
    expect(new Set(timerInvocations(files).filter((i) => i.startMs > moved.atMs).map((i) => i.holderId))).toEqual(new Set([moved.holderId]));
  }, 150_000);

  it('drain POSTed to a follower process: 202, the lock holder drains and releases, the next epoch executes; followers show the cluster', async () => {
    provider.answer = () => ({ status: 200, delayMs: 100 }); // calls in flight when the drain lands
    const { procs, holder } = await startLockCluster('drain');
    const [follower, other] = procs.filter((p) => p !== holder) as [typeof holder, typeof holder];
    const ids: string[] = [];
    for (let k = 0; k < 30; k++) ids.push((await postIntent((k % 2 ? follower : other).api, { k })).intentId);

    // A follower (never the timer instance) tells who leads and what is queued, from SQL.
    const ready = await (await fetch(`${follower.api}/readyz`, { headers: { accept: 'application/json' } })).json() as {
      mode: string; cluster: { leader: { holderId: string; leaseEpoch: number } | null } };
    expect(ready).toMatchObject({ mode: 'follower', cluster: { leader: { holderId: holder.holderIds[0] } } });
    const oldEpoch = ready.cluster.leader!.leaseEpoch;
    expect(await (await fetch(`${follower.api}/readyz`)).text()).toMatch(new RegExp(`^mode=follower holder_id=${follower.holderIds[0]} cluster_leader=${holder.holderIds[0]} cluster_epoch=${oldEpoch} `));
    const metrics = await (await fetch(`${follower.api}/metrics`)).text();
    expect(metrics).toMatch(new RegExp(`^cluster_leader_info\\{lease_name="[^"]+",holder_id="${holder.holderIds[0]}",lease_epoch="${oldEpoch}"\\} 1$`, 'm'));
    const intents = [...metrics.matchAll(/^cluster_intents\{.*\} (\d+)$/gm)].reduce((n, m) => n + Number(m[1]), 0);
    expect(intents).toBe(30);
    expect(metrics).toMatch(/^cluster_due_backlog\{lease_name="[^"]+"\} \d+$/m);
    expect(metrics).toMatch(/^leadership_lost_total\{holder_id="[^"]+",reason="released"\} 0$/m); // counters start at 0

    await provider.waitFor((c) => c.some((x) => x.leaseEpoch === oldEpoch), 10_000);
    const res = await fetch(`${follower.api}/ops/lease/release`, { method: 'POST' });
    expect(res.status).toBe(202);
    const req = await res.json() as { requestId: string; status: string; requestedEpoch: number };
    expect(req).toMatchObject({ status: 'pending', requestedEpoch: oldEpoch });
    // Intents for the next epoch, posted once the holder has released (posted sooner, the holder may start them all
    // before its next refresh reads the request, and the next epoch would find nothing to execute: CI saw it once).
    await waitFor('the release request completed', async () => {
      const l = await (await fetch(`${other.api}/ops/lease/release`)).json() as { requests: { requestId: string; status: string }[] };
      return l.requests.some((r) => r.requestId === req.requestId && r.status === 'completed');
    }, 10_000, 50);
    for (let k = 0; k < 10; k++) ids.push((await postIntent(other.api, { after: k })).intentId);
    await provider.waitFor((c) => c.some((x) => x.leaseEpoch > oldEpoch), 30_000); // a liveness guard
    expect(provider.calls.find((x) => x.leaseEpoch > oldEpoch)!.leaseEpoch).toBe(oldEpoch + 1); // the very next epoch

    await waitFor('all 40 succeeded', async () =>
      Number((await db.sql<{ n: number | string }>(`SELECT COUNT(*) AS n FROM submission_intents WHERE status = 'succeeded'`))[0]!.n) === 40, 30_000, 200);
    const rows = await db.sql<{ intent_id: string; attempt_no: number; outcome: string }>('SELECT intent_id, attempt_no, outcome FROM submission_attempts ORDER BY intent_id, attempt_no');
    const byIntent = new Map<string, number[]>();
    for (const r of rows) byIntent.set(r.intent_id, [...(byIntent.get(r.intent_id) ?? []), Number(r.attempt_no)]);
    expect([...byIntent.keys()].sort()).toEqual([...ids].sort()); // no accepted intent lost
    for (const [id, nos] of byIntent) expect(nos, id).toEqual(nos.map((_, i) => i + 1)); // contiguous attempt log
    const list = await (await fetch(`${other.api}/ops/lease/release`)).json() as { pending: unknown; requests: { requestId: string; status: string; completedEpoch: number }[] };
    expect(list.pending).toBeNull();
    expect(list.requests[0]).toMatchObject({ requestId: req.requestId, status: 'completed', completedEpoch: oldEpoch });
  }, 150_000);
});
