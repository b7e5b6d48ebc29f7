// Partitions (issue 25): throughput for EXECUTOR_PARTITIONS P = 1, 2, 4 against a 50 ms provider, and the share of
// work paused when one process is SIGKILLed. Each P: a fresh schema, a provider process (bench/partitionProvider.ts:
// 200 after 50 ms, records each arrival's intent id, partition and time), BENCH_PARTITIONS_PROCESSES (4) local-host
// processes (`node dist/src/local/main.js`, INSTANCES=1, TIMER_MODE=every-instance, so each leads at most ceil(P ÷ 4)
// partitions), each capped at EXECUTOR_CONCURRENCY = PROVIDER_MAX_IN_FLIGHT = BENCH_PARTITIONS_CONCURRENCY (8) calls in
// flight. Once every partition is led and the shares are stable, a backlog is inserted by SQL (partition_no by the
// app's own rule, src/intents/partition.ts) so intake never limits; after BENCH_PARTITIONS_WARMUP_MS (4 s) the
// provider's arrivals over BENCH_PARTITIONS_WINDOW_MS (10 s) give attempts/s. The baseline is P = 1 in the same run;
// latency-bound, the ceiling is leaders × concurrency ÷ 50 ms (160/s per leader at 8).
// Then the holder of partition 0 is SIGKILLed under load (lease 5 s): for each partition, the longest gap between its
// provider arrivals from 1 s before the kill to 10 s after; a partition paused if its gap exceeds 1 s. Printed: the
// fraction of partitions paused, their gap, and the attempts in the lease after the kill ÷ the steady rate.
// Correctness, checked after every run (all processes stopped, SIGTERM): no intent lost (every row still there, none
// failed, every success seen by the provider), none executed twice (per intent: provider arrivals ≤ attempts
// recorded as sent, at most one succeeded attempt; re-sends only after an attempt abandoned by the kill). Any
// violation exits 1 after the tables. BENCH_PARTITIONS_ROUNDS (1) repeats P = 1, 2, 4 in turn; BENCH_PARTITIONS_P
// picks the P values (first = baseline); BENCH_PARTITIONS_PROF=<dir> writes a --cpu-prof profile of each host that
// exits gracefully (<dir>/P<p>/). Also printed: CPU per attempt (hosts, their PostgreSQL backends, provider; /proc)
// and where a call slot's cycle goes (START → provider arrival, the provider, the wait for the next START).
import { randomUUID } from 'node:crypto';
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { partitionOf } from '../src/intents/partition.js';
import type { PgDatabase } from '../src/store/postgres/db.js';
import { backendCpuMs, cpuDeltaMs, fmt, freshSchema, PG_URL, printTable, procCpuMs } from './support.js';
import { schemaUrl, startHost, type HostProcess } from './localHost.js';

const PS = (process.env.BENCH_PARTITIONS_P ?? '1,2,4').split(',').map(Number);
const PROCS = Number(process.env.BENCH_PARTITIONS_PROCESSES ?? 4);
const CONC = Number(process.env.BENCH_PARTITIONS_CONCURRENCY ?? 8);
const LATENCY_MS = 50;
const WARMUP_MS = Number(process.env.BENCH_PARTITIONS_WARMUP_MS ?? 4_000);
const WINDOW_MS = Number(process.env.BENCH_PARTITIONS_WINDOW_MS ?? 10_000);
const PROF = process.env.BENCH_PARTITIONS_PROF;
const ROUNDS = Number(process.env.BENCH_PARTITIONS_ROUNDS ?? 1);
const LEASE_MS = 5_000;
const AFTER_KILL_MS = 10_000;
const PAUSED_MS = 1_000;
const LEASE_NAME = 'submission-manager-executor';
const here = path.dirname(fileURLToPath(import.meta.url));
const median = (xs: number[]) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]! : NaN);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

type Arrival = [intentId: string, partition: number, at: number, epoch: number, attemptNo: number];

async function startProvider() {
  const child = spawn(process.execPath, [path.join(here, 'partitionProvider.js'), String(LATENCY_MS)], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve) => child.stdout!.once('data', (d) => resolve(Number(String(d).trim()))));
  const base = `http://127.0.0.1:${port}`;
  return {
    url: `${base}/submit`, pid: child.pid!,
    calls: async (from = 0) => (await fetch(`${base}/calls?from=${from}`)).json() as Promise<Arrival[]>,
    stop: () => child.kill('SIGKILL'),
  };
}

/** Whole-machine busy fraction between two readings of /proc/stat's first line. */
const cpuTimes = () => {
  const f = readFileSync('/proc/stat', 'utf8').split('\n')[0]!.trim().split(/\s+/).slice(1).map(Number);
  return { idle: f[3]! + f[4]!, total: f.reduce((a, b) => a + b, 0) };
};

/** `n` due intents, each in the partition the app would give it (by its id), inserted by SQL in chunks. */
async function seedPartitioned(db: PgDatabase, n: number, p: number): Promise<void> {
  const contract = JSON.stringify({ provider: { url: null }, payload: { bench: true }, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 50 } });
  for (let i = 0; i < n; i += 5_000) {
    const ids = Array.from({ length: Math.min(5_000, n - i) }, () => randomUUID());
    await db.query(`INSERT INTO submission_intents (intent_id, request_hash, contract, status, attempt_count, max_attempts,
        next_attempt_at, created_at, last_modified_at, partition_no)
      SELECT x.id, repeat('0', 64), $3::jsonb, 'scheduled', 0, 3, clock_timestamp() - interval '1 s', now(), clock_timestamp(), x.p
        FROM unnest($1::uuid[], $2::int[]) AS x(id, p)`, [ids, ids.map((id) => partitionOf(id, p)), contract]);
  }
}

interface LeaseRow { partition: number; holder: string; epoch: number; live: boolean }

async function leases(db: PgDatabase): Promise<LeaseRow[]> {
  const r = await db.query<{ lease_name: string; holder_id: string; lease_epoch: string; live: boolean }>(
    `SELECT lease_name, holder_id, lease_epoch, expires_at > clock_timestamp() AS live FROM submission_manager_leases ORDER BY lease_name`);
  return r.rows.map((x) => ({ partition: x.lease_name === LEASE_NAME ? 0 : Number(x.lease_name.split('#')[1]), holder: x.holder_id,
    epoch: Number(x.lease_epoch), live: x.live }));
}

/** Every partition led, no process above its fair share, and no lease acquired for 2 s. */
async function converged(db: PgDatabase, p: number): Promise<LeaseRow[]> {
  const cap = Math.ceil(p / PROCS);
  const acquired = async () => Number((await db.query<{ n: string }>(
    `SELECT count(*) AS n FROM submission_manager_lease_events WHERE event = 'acquired'`)).rows[0]!.n);
  const end = Date.now() + 40_000;
  while (Date.now() < end) {
    const rows = await leases(db);
    const per = new Map<string, number>();
    for (const r of rows) if (r.live) per.set(r.holder, (per.get(r.holder) ?? 0) + 1);
    if (rows.length === p && rows.every((r) => r.live) && [...per.values()].every((n) => n <= cap)) {
      const before = await acquired();
      await sleep(2_000);
      const again = await leases(db);
      if ((await acquired()) === before && again.map((r) => r.holder).join() === rows.map((r) => r.holder).join()) return again;
    } else {
      await sleep(200);
    }
  }
  throw new Error(`P = ${p}: the partitions did not settle to a fair share within 40 s: ${JSON.stringify(await leases(db))}`);
}

/** Longest gap (ms) between a partition's consecutive arrivals in [from, to]; the window's ends count as arrivals. */
function longestGap(times: number[], from: number, to: number): number {
  let last = from;
  let gap = 0;
  for (const t of times) {
    if (t < from || t > to) continue;
    gap = Math.max(gap, t - last);
    last = t;
  }
  return Math.max(gap, to - last);
}

interface RunResult { p: number; perS: number; perPartition: string; cpu: string; slot: string; written: string; busy: number; steadyGap: number;
  paused: number[]; pauseMs: number[]; held: number[]; outcomes: string; keptShare: number; violations: string[] }

async function run(p: number): Promise<RunResult> {
  const schema = await freshSchema();
  const db = schema.open(2);
  const provider = await startProvider();
  const env = {
    DATABASE_URL: `${schemaUrl(PG_URL, schema.schema)}&application_name=${schema.schema}`, INSTANCES: '1', PROVIDER_URL: provider.url, EXECUTOR_PARTITIONS: String(p),
    TIMER_MODE: 'every-instance', EXECUTOR_CONCURRENCY: String(CONC), PROVIDER_MAX_IN_FLIGHT: String(CONC),
    LEASE_DURATION_MS: String(LEASE_MS), LEASE_RENEW_INTERVAL_MS: '1000', LEASE_SAFETY_MARGIN_MS: '1000', LEASE_ACQUIRE_JITTER_MS: '100',
    EXECUTOR_SCHEDULE: '*/1 * * * * *', EXECUTOR_TICK_BUDGET_MS: '900', PROVIDER_TIMEOUT_MS: '1000',
    SCHEDULE_REFRESH_INTERVAL_MS: '200', COMMIT_GRACE_MS: '1500', DB_STATEMENT_TIMEOUT_MS: '1000',
    INSTANCE_HEARTBEAT_MS: '300', INSTANCE_LIVE_WINDOW_MS: '2000', RETENTION_DAYS: '0',
  };
  const hosts: (HostProcess & { id: string })[] = [];
  // Enough backlog for warm-up, window and the kill phase at the latency-bound ceiling, with 50 % to spare.
  const leaders = Math.min(p, PROCS);
  const n = Math.ceil((leaders * CONC * 1000 / LATENCY_MS) * ((WARMUP_MS + WINDOW_MS + AFTER_KILL_MS + 2_000) / 1000) * 1.5);
  try {
    hosts.push(...await Promise.all(Array.from({ length: PROCS }, async (_, i) =>
      Object.assign(await startHost({ ...env, HOLDER_ID: `proc${i + 1}` }, undefined, [], PROF ? ['--cpu-prof', `--cpu-prof-dir=${PROF}/P${p}`] : []),
        { id: `proc${i + 1}` }))));
    await converged(db, p);
    await seedPartitioned(db, n, p);
    await sleep(WARMUP_MS);
    // Steady state: provider arrivals in the window, by the provider's clock.
    const cpu0 = { hosts: hosts.map((h) => procCpuMs(h.child.pid!)), provider: procCpuMs(provider.pid), machine: cpuTimes(), pg: await backendCpuMs(db, schema.schema) };
    const t0 = Date.now();
    await sleep(WINDOW_MS);
    const t1 = Date.now();
    const cpu1 = { hosts: hosts.map((h) => procCpuMs(h.child.pid!)), provider: procCpuMs(provider.pid), machine: cpuTimes(), pg: await backendCpuMs(db, schema.schema) };
    let calls = await provider.calls();
    const inWindow = calls.filter((c) => c[2] >= t0 && c[2] < t1);
    const perS = inWindow.length / ((t1 - t0) / 1000);
    const byPart = Array.from({ length: p }, (_, k) => inWindow.filter((c) => c[1] === k).length / ((t1 - t0) / 1000));
    const hostMs = cpu1.hosts.reduce((a, b, i) => a + b - cpu0.hosts[i]!, 0);
    const busy = 1 - (cpu1.machine.idle - cpu0.machine.idle) / (cpu1.machine.total - cpu0.machine.total);
    // Where a call slot's cycle (leaders × concurrency ÷ rate) goes: START's clock_timestamp() → provider arrival, the
    // provider's 50 ms, and the rest: the freed slot waiting for the next START (one START at a time per leader, at
    // least startBatch free slots). The completion write (reply → finished_at) runs beside it, not in the cycle.
    const arrivedAt = new Map(inWindow.map((c) => [`${c[0]}/${c[4]}`, c[2]]));
    const timing = (await db.query<{ intent_id: string; attempt_no: number; s: number; f: number }>(
      `SELECT intent_id, attempt_no, extract(epoch FROM started_at) * 1000 AS s, extract(epoch FROM finished_at) * 1000 AS f
         FROM submission_attempts WHERE outcome = 'succeeded' AND started_at >= to_timestamp($1 / 1000.0) AND started_at < to_timestamp($2 / 1000.0)`,
      [t0, t1])).rows.flatMap((r) => {
      const a = arrivedAt.get(`${r.intent_id}/${r.attempt_no}`);
      return a === undefined ? [] : [{ toProvider: a - Number(r.s), toWritten: Number(r.f) - a - LATENCY_MS }];
    });
    const cycleMs = (Math.min(p, PROCS) * CONC * 1000) / perS;
    const toProvider = median(timing.map((x) => x.toProvider));
    const slot = `${fmt(cycleMs)} = ${fmt(toProvider)} + ${LATENCY_MS} + ${fmt(cycleMs - toProvider - LATENCY_MS)}`;
    const written = fmt(median(timing.map((x) => x.toWritten)));
    const steadyGap = Math.max(...Array.from({ length: p }, (_, k) => longestGap(inWindow.filter((c) => c[1] === k).map((c) => c[2]), t0, t1)));

    // Kill the holder of partition 0 under load; per partition, the longest gap in arrivals around the kill.
    const led = await leases(db);
    const victimHolder = led.find((r) => r.partition === 0)!.holder;
    const victim = hosts.find((h) => victimHolder.startsWith(`${h.id}-`))!;
    victim.child.kill('SIGKILL');
    const killedAt = Date.now();
    await sleep(AFTER_KILL_MS);
    calls = await provider.calls();
    const gaps = Array.from({ length: p }, (_, k) =>
      longestGap(calls.filter((c) => c[1] === k).map((c) => c[2]), killedAt - 1_000, killedAt + AFTER_KILL_MS));
    const paused = gaps.flatMap((g, k) => (g > PAUSED_MS ? [k] : []));
    const inLease = calls.filter((c) => c[2] >= killedAt && c[2] < killedAt + LEASE_MS).length;
    const keptShare = inLease / (perS * LEASE_MS / 1000);
    const heldByVictim = led.filter((r) => r.holder === victimHolder).map((r) => r.partition);

    // Stop the rest gracefully (their calls in flight settle), then check every intent against the provider's log.
    await Promise.all(hosts.map((h) => h.stop('SIGTERM')));
    calls = await provider.calls();
    const { violations, outcomes } = await check(db, n, calls, p);
    return {
      p, perS, perPartition: byPart.map((x) => fmt(x)).join(' / '), slot, written,
      cpu: `${fmt(hostMs / inWindow.length, 2)} / ${fmt(cpuDeltaMs(cpu0.pg, cpu1.pg) / inWindow.length, 2)} / ${fmt((cpu1.provider - cpu0.provider) / inWindow.length, 2)}`,
      busy, steadyGap, paused, pauseMs: paused.map((k) => gaps[k]!), held: heldByVictim, outcomes, keptShare, violations,
    };
  } finally {
    for (const h of hosts) await h.stop('SIGKILL');
    provider.stop();
    await db.close();
    await schema.drop();
  }
}

/** Lost or executed twice, from the database (all processes stopped) and the provider's log. */
async function check(db: PgDatabase, n: number, calls: Arrival[], p: number): Promise<{ violations: string[]; outcomes: string }> {
  const out: string[] = [];
  const outcomes = (await db.query<{ outcome: string; n: string }>(
    'SELECT outcome, count(*) AS n FROM submission_attempts GROUP BY outcome ORDER BY outcome')).rows.map((r) => `${r.outcome} ${r.n}`).join(', ');
  const status = new Map((await db.query<{ status: string; n: string }>(
    'SELECT status, count(*) AS n FROM submission_intents GROUP BY status')).rows.map((r) => [r.status, Number(r.n)]));
  const total = [...status.values()].reduce((a, b) => a + b, 0);
  if (total !== n) out.push(`P = ${p}: ${n} intents seeded, ${total} in the table`);
  if (status.get('failed')) out.push(`P = ${p}: ${status.get('failed')} intents failed against a provider that always answers 200`);
  const attempts = await db.query<{ intent_id: string; status: string; sent: string; succeeded: string }>(
    `SELECT i.intent_id, i.status, count(a.*) FILTER (WHERE a.outcome <> 'aborted') AS sent,
            count(a.*) FILTER (WHERE a.outcome = 'succeeded') AS succeeded
       FROM submission_intents i LEFT JOIN submission_attempts a ON a.intent_id = i.intent_id GROUP BY i.intent_id, i.status`);
  const arrivals = new Map<string, number>();
  for (const c of calls) arrivals.set(c[0], (arrivals.get(c[0]) ?? 0) + 1);
  const known = new Set<string>();
  let sentUnrecorded = 0, twiceSucceeded = 0, successUnseen = 0;
  for (const r of attempts.rows) {
    known.add(r.intent_id);
    const a = arrivals.get(r.intent_id) ?? 0;
    if (a > Number(r.sent)) sentUnrecorded++;
    if (Number(r.succeeded) > 1) twiceSucceeded++;
    if (r.status === 'succeeded' && a === 0) successUnseen++;
  }
  const strangers = [...arrivals.keys()].filter((id) => !known.has(id)).length;
  if (sentUnrecorded) out.push(`P = ${p}: ${sentUnrecorded} intents reached the provider more often than attempts were recorded (executed twice)`);
  if (twiceSucceeded) out.push(`P = ${p}: ${twiceSucceeded} intents have two succeeded attempts (executed twice)`);
  if (successUnseen) out.push(`P = ${p}: ${successUnseen} intents recorded succeeded that the provider never saw (lost)`);
  if (strangers) out.push(`P = ${p}: ${strangers} provider calls for intents not in the table`);
  if (calls.length === 0 || !status.get('succeeded')) out.push(`P = ${p}: nothing executed`);
  if (!status.get('scheduled')) out.push(`P = ${p}: the backlog ran out before the end (throughput window not saturated)`);
  return { violations: out, outcomes };
}

export async function benchPartitions(): Promise<{ line: string; violations: string[] }> {
  const results: RunResult[] = [];
  for (let round = 0; round < ROUNDS; round++) for (const p of PS) results.push(await run(p));
  const base = (round: number) => results[round * PS.length]!.perS;
  printTable(`Partitions: throughput (${PROCS} processes, every-instance, concurrency ${CONC} per leader, ${LATENCY_MS} ms provider, ` +
    `${WINDOW_MS / 1000} s window after ${WARMUP_MS / 1000} s warm-up)`, results.map((r, i) => ({
    P: r.p, 'attempts/s': fmt(r.perS), 'ceiling/s': fmt(Math.min(r.p, PROCS) * CONC * 1000 / LATENCY_MS),
    [`÷ P = ${PS[0]}`]: fmt(r.perS / base(Math.floor(i / PS.length)), 2), 'per partition /s': r.perPartition,
    'CPU ms/attempt hosts / PostgreSQL / provider': r.cpu, 'machine busy': `${fmt(r.busy * 100)} %`, 'longest steady gap ms': fmt(r.steadyGap),
    'call slot cycle ms = START→provider (p50) + provider + refill': r.slot, 'reply→written ms (p50)': r.written,
  })));
  printTable(`Partitions: SIGKILL of the holder of partition 0 under load (lease ${LEASE_MS / 1000} s; paused = no arrival for > ${PAUSED_MS} ms)`,
    results.map((r) => ({
      P: r.p, 'killed process held': r.held.join(', '), 'partitions paused': `${r.paused.length} / ${r.p} (${r.paused.join(', ')})`, 'share paused': fmt(r.paused.length / r.p, 2),
      'pause ms': r.pauseMs.map((x) => fmt(x)).join(', '), 'attempts in the lease after the kill ÷ steady': fmt(r.keptShare, 2),
      'attempts by outcome (all processes stopped)': r.outcomes,
    })));
  const violations = results.flatMap((r) => r.violations);
  const ratio = (p: number) => results.filter((r) => r.p === p).map((r, i) => fmt(r.perS / base(i), 2)).join('/');
  const share = (p: number) => results.filter((r) => r.p === p).map((r) => fmt(r.paused.length / r.p, 2)).join('/');
  const line = PS.slice(1).map((p) => `P${p}/P${PS[0]}=${ratio(p)}x`).join(' ') + ' pausedShare ' +
    PS.map((p) => `P${p}=${share(p)}`).join(' ') + (violations.length ? ` VIOLATIONS=${violations.length}` : '');
  return { line, violations };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  benchPartitions().then(({ line, violations }) => {
    console.log(`\nratios: ${line}`);
    if (violations.length) {
      console.error(`\npartitions: ${violations.length} correctness violation(s):\n- ${violations.join('\n- ')}`);
      process.exit(1);
    }
    process.exit(0);
  }, (e) => { console.error(e); process.exit(1); });
}
