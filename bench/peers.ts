// Peers on the same database in the same run: graphile-worker (unbatched, and batched with a local queue of
// 500) and pg-boss (4 workers × batches of 500), each draining N jobs with a no-op handler (no HTTP), against
// the one-commit-per-row UPDATE baseline (pool 16) and our executor (one leader) twice: with the no-op loopback
// provider (an HTTP call per attempt) and with an in-process no-op provider (no HTTP, like the peers); plus
// the HTTP part alone (our client, the same server, no database). Jobs/s from the start of the workers to the
// last job done (polled every 20 ms). Versions: those in package.json (devDependencies).
import { randomBytes } from 'node:crypto';
import { makeWorkerUtils, run, type Runner } from 'graphile-worker';
import PgBoss from 'pg-boss';
import { openPgPool } from '../src/store/postgres/db.js';
import { runLeader } from './execution.js';
import type { RunProbe } from './serverCost.js';
import { HttpProvider } from '../src/provider/httpProvider.js';
import { fmt, freshSchema, PG_URL, pool, printTable, seedIntents, startProviderProcess } from './support.js';

const POOL = 16;
const silentGw = { debug() {}, info() {}, warn() {}, error() {}, scope() { return silentGw; } };

async function until(check: () => Promise<boolean>): Promise<void> {
  while (!(await check())) await new Promise((r) => setTimeout(r, 20));
}

/** The baseline; `probe` (bench/profile.ts): `begin` before the first UPDATE, `end` after the last. */
export async function baseline(n: number, probe?: RunProbe): Promise<number> {
  const schema = await freshSchema();
  const db = schema.open(POOL);
  try {
    await seedIntents(db, n);
    const ids = (await db.query<{ intent_id: string }>('SELECT intent_id FROM submission_intents')).rows.map((r) => r.intent_id);
    await probe?.begin(schema.schema);
    const t0 = performance.now();
    await pool(ids, POOL, async (id) => {
      await db.query(`UPDATE submission_intents SET status = 'succeeded', attempt_count = attempt_count, last_modified_at = clock_timestamp()
                       WHERE intent_id = $1`, [id]);
    });
    const perS = (n / (performance.now() - t0)) * 1000;
    await probe?.end(schema.schema);
    return perS;
  } finally {
    await db.close();
    await schema.drop();
  }
}

async function graphileWorker(n: number, localQueue: number | null): Promise<number> {
  const schema = `gw_${randomBytes(4).toString('hex')}`;
  const utils = await makeWorkerUtils({ connectionString: PG_URL, schema, logger: silentGw as never });
  const admin = openPgPool({ url: PG_URL, max: 1, statementTimeoutMs: 600_000 });
  let runner: Runner | null = null;
  try {
    await utils.migrate();
    for (let i = 0; i < n; i += 1_000) {
      await utils.addJobs(Array.from({ length: Math.min(1_000, n - i) }, () => ({ identifier: 'noop', payload: {}, maxAttempts: 3 })));
    }
    const t0 = performance.now();
    runner = await run({
      connectionString: PG_URL, schema, concurrency: POOL, maxPoolSize: POOL, noHandleSignals: true, pollInterval: 1_000,
      logger: silentGw as never, taskList: { noop: async () => {} },
      ...(localQueue ? { preset: { worker: { localQueue: { size: localQueue } } } } : {}),
    });
    await until(async () => (await admin.query<{ n: number }>(`SELECT count(*)::int AS n FROM ${schema}._private_jobs`)).rows[0]!.n === 0);
    return (n / (performance.now() - t0)) * 1000;
  } finally {
    await runner?.stop();
    await utils.release();
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.close();
  }
}

/** pg-boss; `db` (bench/profile.ts) is the adapter it sends every statement through, and `probe` replaces the poll. */
export async function pgBoss(n: number, workers: number, batchSize: number,
  profile?: { db: PgBoss.Db; probe: RunProbe }): Promise<number> {
  const schema = `pgboss_${randomBytes(4).toString('hex')}`;
  const boss = new PgBoss({ ...(profile ? { db: profile.db } : { connectionString: PG_URL, max: POOL }), schema, supervise: false, schedule: false });
  boss.on('error', () => {});
  const admin = openPgPool({ url: PG_URL, max: 1, statementTimeoutMs: 600_000 });
  try {
    await boss.start();
    await boss.createQueue('noop');
    for (let i = 0; i < n; i += 1_000) await boss.insert(Array.from({ length: Math.min(1_000, n - i) }, () => ({ name: 'noop', data: {} })));
    await profile?.probe.begin(schema);
    const t0 = performance.now();
    for (let w = 0; w < workers; w++) await boss.work('noop', { batchSize, pollingIntervalSeconds: 0.5 }, async () => {});
    if (profile) await until(async () => profile.probe.done());
    else {
      await until(async () => (await admin.query<{ n: number }>(
        `SELECT count(*)::int AS n FROM ${schema}.job WHERE name = 'noop' AND state = 'completed'`)).rows[0]!.n >= n);
    }
    const perS = (n / (performance.now() - t0)) * 1000;
    await profile?.probe.end(schema);
    return perS;
  } finally {
    await boss.stop({ graceful: false, wait: true, close: true }).catch(() => {});
    await admin.query(`DROP SCHEMA IF EXISTS ${schema} CASCADE`);
    await admin.close();
  }
}

/** The HTTP part alone: `n` calls through HttpProvider at concurrency `c` to the same no-op server process. */
async function httpOnly(n: number, c: number): Promise<number> {
  const server = await startProviderProcess(0);
  const http = new HttpProvider(server.url);
  try {
    const ids = Array.from({ length: n }, (_, i) => i);
    const t0 = performance.now();
    await pool(ids, c, async (i) => {
      await http.submit({ intentId: `00000000-0000-4000-8000-${String(i).padStart(12, '0')}`, attemptNo: 1, leaseEpoch: 1, payload: { bench: true }, url: null }, { timeoutMs: 10_000 });
    });
    return (n / (performance.now() - t0)) * 1000;
  } finally {
    http.close();
    server.stop();
  }
}

export async function benchPeers(n = Number(process.env.BENCH_PEERS_N ?? 10_000)): Promise<string> {
  const base = await baseline(n);
  const rows: Record<string, string>[] = [];
  const short: string[] = [];
  const add = (who: string, key: string, perS: number) => {
    rows.push({ system: who, jobs: String(n), 'jobs/s': fmt(perS), ratio: fmt(perS / base, 2) });
    short.push(`${key}=${fmt(perS / base, 2)}x`);
  };
  add('one-commit-per-row UPDATE, pool 16 (baseline)', 'baseline', base);
  add('graphile-worker, concurrency 16, unbatched', 'graphile', await graphileWorker(n, null));
  add('graphile-worker, concurrency 16, localQueue 500', 'graphileBatched', await graphileWorker(n, 500));
  add('pg-boss, 4 workers × batch 500', 'pgBoss', await pgBoss(n, 4, 500));
  const conc = Number(process.env.BENCH_PEERS_EXEC_CONCURRENCY ?? 256);
  add(`SubmissionManager executor, c ${conc}, HTTP no-op provider (node:http server)`, 'executor',
    (await runLeader(n, 0, conc, { baseline: false })).attemptsPerS);
  add(`SubmissionManager executor, c ${conc}, in-process no-op provider (no HTTP, like the peers)`, 'executorNoHttp',
    (await runLeader(n, 0, conc, { baseline: false, provider: 'none' })).attemptsPerS);
  add(`HTTP only: our provider client → node:http no-op server, c ${conc} (no database)`, 'httpOnly', await httpOnly(n, conc));
  printTable(`Peers (PostgreSQL server, no-op handlers; same database, same run)`, rows);
  return `peers ${short.slice(1).join(' ')}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  benchPeers().then((line) => { console.log(`\nratios: ${line}`); process.exit(0); }, (e) => { console.error(e); process.exit(1); });
}
