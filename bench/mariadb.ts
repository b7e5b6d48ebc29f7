// The MySQL / MariaDB dialect on the local MariaDB (BENCH_MYSQL_URL, default mysql://root@127.0.0.1:3306/test),
// each figure against a baseline on the same server in the same run:
//  - execution: one leader under the provider guard production builds, a no-op provider in its own process (HTTP),
//    then in process (no HTTP, as the peers' bench; the HTTP call's share of the cost is the difference), c = 64 and
//    256 (batches c/4 and c/2 as in production), attempts/s from first start to last completion (database time),
//    against one-commit-per-row UPDATEs of the same rows through the same pool size (16) at concurrency 16; CPU per
//    attempt of the MariaDB server (when local), the leader and the provider process, from /proc;
//  - intake: POST /api/intents through the local host (one instance, pool 10) at c = 1, 16, 64, against
//    single-row INSERTs of the same columns straight through the driver (same pool size and concurrency); to split
//    the cost, in the same rounds (interleaved halves, CPU per request of each server from /proc): the app's own
//    postIntent handler served from node:http (bench/handlerIntakeServer.ts) and a bare node:http + one INSERT server
//    (bench/bareIntakeServer.ts), each its own process like the host;
//  - pickup: submit → first provider call with the default settings (10 s timer, 1 s refresh; MySQL has no
//    notices, so the refresh interval bounds pickup): p99 ÷ refresh is the figure.
import { randomUUID } from 'node:crypto';
import { LeaseManager } from '../src/lease/leaseManager.js';
import { systemClock } from '../src/lease/clock.js';
import { Executor } from '../src/executor/executor.js';
import { NO_OPS } from '../src/executor/executorOps.js';
import { HttpProvider } from '../src/provider/httpProvider.js';
import { silentLogger } from '../src/observability/logger.js';
import type { MyDatabase } from '../src/store/mysql/db.js';
import { createMysqlStores } from '../src/store/mysql/index.js';
import { freshMysqlDatabase } from './mysqlDatabase.js';
import { benchExecutorSettings, fmt, localServerPid, NO_HTTP, pool, printTable, procCpuMs, productionGuard, selfCpuMs,
  startProviderProcess } from './support.js';
import { startHost } from './localHost.js';
import { BARE, BODY, HANDLER, postAll } from './intake.js';
import { measure, RATE, REFRESH_MS, SECONDS } from './pickup.js';

const POOL = 16;


const CONTRACT = JSON.stringify({ provider: { url: null }, payload: { bench: true }, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 50 } });

async function seed(db: MyDatabase, n: number): Promise<void> {
  const digits = '(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)';
  await db.query(`INSERT INTO submission_intents (intent_id, request_hash, contract, status, attempt_count, max_attempts,
      next_attempt_at, created_at, last_modified_at)
    SELECT UUID(), REPEAT('0', 64), ?, 'scheduled', 0, 3, DATE_SUB(UTC_TIMESTAMP(6), INTERVAL 1 SECOND), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6)
      FROM ${['a', 'b', 'c', 'd', 'e', 'f'].map((x) => `${digits} AS ${x}`).join(' CROSS JOIN ')} LIMIT ?`, [CONTRACT, n]);
}

/** CPU (ms) used so far by this process, the provider's (NaN: none) and the MariaDB server's (NaN: not on this machine). */
function cpuNow(providerPid: number, serverPid: number | null): { leader: number; provider: number; server: number } {
  return { leader: selfCpuMs(), provider: providerPid > 0 ? procCpuMs(providerPid) : Number.NaN,
    server: serverPid === null ? Number.NaN : procCpuMs(serverPid) };
}

/** One leader over `n` due intents; `provider`: 'process' (a no-op HTTP provider in its own process) or 'none' (an
 *  in-process no-op, no HTTP: the executor's and the database's own cost, as the peers' bench runs them). */
async function execution(n: number, concurrency: number, provider: 'process' | 'none') {
  const d = await freshMysqlDatabase();
  const db = d.open(POOL);
  const s = createMysqlStores(db);
  let child: { url: string; pid: number; stop(): void } = { url: '', pid: 0, stop() {} };
  let http: HttpProvider | null = null;
  try {
    if (provider === 'process') child = await startProviderProcess(0, 'raw');
    const serverPid = localServerPid(d.url, 'mariadbd', 'mysqld');
    await seed(db, n);
    const lease = new LeaseManager(s.lease, { name: 'bench', holderId: 'bench-leader', durationMs: 600_000, renewIntervalMs: 60_000,
      acquireIntervalMs: 1_000, safetyMarginMs: 5_000, acquireJitterMs: 0 }, systemClock, silentLogger);
    http = provider === 'none' ? null : new HttpProvider(child.url);
    const settings = benchExecutorSettings(concurrency);
    // Under the provider guard production builds with no limits set (BENCH_EXEC_GUARD=0: none).
    const ex = new Executor(lease, s.execution, http ?? NO_HTTP, settings, systemClock, silentLogger, Math.random,
      NO_OPS, productionGuard(settings));
    const cpu0 = cpuNow(child.pid, serverPid);
    for (;;) {
      await ex.tick(undefined, 2_000); // as the timer runs it: a next occurrence, so a bridge between ticks
      const left = await db.query<{ n: string }>(`SELECT COUNT(*) AS n FROM submission_intents WHERE status <> 'succeeded'`);
      if (Number(left.rows[0]!.n) === 0) break;
    }
    await ex.drain(); // the bridge left running after the last tick
    const cpu1 = cpuNow(child.pid, serverPid);
    const span = (await db.query<{ us: string; n: string }>(
      'SELECT TIMESTAMPDIFF(MICROSECOND, MIN(started_at), MAX(finished_at)) AS us, COUNT(*) AS n FROM submission_attempts')).rows[0]!;
    const attempts = Number(span.n);
    const attemptsPerS = attempts / (Number(span.us) / 1e6);
    // Baseline: the same rows, one UPDATE (one commit) each, same pool, concurrency = pool size.
    const ids = (await db.query<{ intent_id: string }>('SELECT intent_id FROM submission_intents')).rows.map((r) => r.intent_id);
    const b0 = cpuNow(0, serverPid);
    const t0 = performance.now();
    await pool(ids, POOL, async (id) => {
      await db.query(`UPDATE submission_intents SET status = 'succeeded', last_modified_at = UTC_TIMESTAMP(6) WHERE intent_id = ?`, [id]);
    });
    const baselinePerS = (ids.length / (performance.now() - t0)) * 1000;
    const b1 = cpuNow(0, serverPid);
    const per = (a: number, b: number, count: number) => (Number.isNaN(b - a) ? '—' : fmt(((b - a) * 1000) / count));
    return { attempts, attemptsPerS, baselinePerS,
      cpu: `${per(cpu0.server, cpu1.server, attempts)} / ${per(cpu0.leader, cpu1.leader, attempts)} / ${per(cpu0.provider, cpu1.provider, attempts)}`,
      baselineCpu: `${per(b0.server, b1.server, ids.length)} / ${per(b0.leader, b1.leader, ids.length)}` };
  } finally {
    http?.close();
    child.stop();
    await db.close();
    await d.drop();
  }
}

/** The intake body, not due before 2099: the leader refreshes the new rows (as in production) but calls nothing. */
const LATER = JSON.stringify({ ...JSON.parse(BODY), notBefore: '2099-01-01T00:00:00Z' });
const INTAKE_POOL = 10;

async function intake(n: number) {
  const d = await freshMysqlDatabase();
  const env = { DATABASE_URL: d.url, INSTANCES: '1', DB_POOL_MAX: String(INTAKE_POOL), PROVIDER_URL: 'http://127.0.0.1:9/unused' };
  const host = await startHost(env);
  const handler = await startHost(env, HANDLER);
  const bare = await startHost({}, BARE, [d.url, '-', String(INTAKE_POOL)]);
  const servers = [host, handler, bare];
  const db = d.open(INTAKE_POOL);
  const contract = JSON.stringify({ provider: { url: null }, payload: JSON.parse(BODY).payload, retry: { maxAttempts: 5, baseDelayMs: 1000, maxDelayMs: 300000 } });
  const rows = [];
  try {
    for (const s of servers) await postAll(s.base, 500, 16, LATER); // warm-up (JIT, pool connections), not measured
    for (const c of [1, 16, 64]) {
      const count = c === 1 ? Math.min(n, 1_000) : n;
      // Interleaved halves (host, handler, bare, then the reverse), so a burst of load elsewhere hits each alike.
      const cpu0 = servers.map((s) => procCpuMs(s.child.pid!));
      const halves: Awaited<ReturnType<typeof postAll>>[][] = servers.map(() => []);
      for (const i of [0, 1, 2, 2, 1, 0]) halves[i]!.push(await postAll(servers[i]!.base, count / 2, c, LATER));
      const cpu = servers.map((s, i) => (procCpuMs(s.child.pid!) - cpu0[i]!) / count);
      const [r, hd, b] = halves.map(([x, y]) => ({ rps: (x!.rps + y!.rps) / 2, p50: Math.max(x!.p50, y!.p50), p99: Math.max(x!.p99, y!.p99) }));
      const t0 = performance.now();
      await pool(Array.from({ length: count }), c, async () => {
        await db.query(`INSERT INTO submission_intents (intent_id, idempotency_key, request_hash, contract, status, attempt_count,
            max_attempts, next_attempt_at, created_at, last_modified_at)
          VALUES (?, ?, ?, ?, 'scheduled', 0, 5, '2099-01-01', UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
        [randomUUID(), randomUUID(), '0'.repeat(64), contract]);
      });
      const insertPerS = (count / (performance.now() - t0)) * 1000;
      rows.push({ concurrency: c, 'req/s': fmt(r!.rps), 'p50 ms': fmt(r!.p50, 1), 'p99 ms': fmt(r!.p99, 1), 'raw INSERT/s': fmt(insertPerS),
        'ratio vs INSERT': fmt(r!.rps / insertPerS, 2), 'handler on node:http req/s': fmt(hd!.rps), 'handler p99 ms': fmt(hd!.p99, 1),
        'handler vs INSERT': fmt(hd!.rps / insertPerS, 2), 'bare http+INSERT req/s': fmt(b!.rps), 'bare p99 ms': fmt(b!.p99, 1),
        'bare vs INSERT': fmt(b!.rps / insertPerS, 2), 'CPU ms/req host / handler / bare': cpu.map((x) => fmt(x, 3)).join(' / ') });
    }
  } finally {
    for (const s of servers) await s.stop();
    await db.close();
    await d.drop();
  }
  return rows;
}

const ratios: string[] = [];
const n = Number(process.env.BENCH_MYSQL_EXEC_N ?? 5_000);
const exec = [];
for (const provider of n > 0 ? ['process', 'none'] as const : []) { // BENCH_MYSQL_EXEC_N=0: no execution part
  for (const c of [64, 256]) {
    const r = await execution(n, c, provider);
    exec.push({ intents: n, provider: provider === 'none' ? 'in process, no HTTP' : 'own process, HTTP', concurrency: c,
      'attempts/s': fmt(r.attemptsPerS), 'baseline UPDATE/s': fmt(r.baselinePerS), ratio: fmt(r.attemptsPerS / r.baselinePerS, 2),
      'CPU µs/attempt mariadbd / leader / provider': r.cpu, 'baseline CPU µs/row mariadbd / client': r.baselineCpu });
    ratios.push(`execution${provider === 'none' ? ' (no HTTP)' : ''} c${c}=${fmt(r.attemptsPerS / r.baselinePerS, 2)}x`);
  }
}
if (n > 0) printTable('Execution (MariaDB, one leader, no-op provider; baseline: one-commit-per-row UPDATE, pool 16)', exec);
const intakeRows = await intake(Number(process.env.BENCH_MYSQL_INTAKE_N ?? 2_000));
printTable('Intake (MariaDB, POST /api/intents through the local host, 1 instance; baseline: single-row INSERT, same pool)', intakeRows);
ratios.push(`intake vs INSERT ${intakeRows.map((r) => `c${r.concurrency}=${r['ratio vs INSERT']}x (p99 ${r['p99 ms']} ms)`).join(' ')}`,
  `handler on node:http vs INSERT ${intakeRows.map((r) => `c${r.concurrency}=${r['handler vs INSERT']}x`).join(' ')}`,
  `bare http+INSERT vs INSERT ${intakeRows.map((r) => `c${r.concurrency}=${r['bare vs INSERT']}x`).join(' ')}`);
const d = await freshMysqlDatabase();
try {
  const r = await measure('defaults (no notices on MySQL)', d.url, {});
  printTable(`Submit → first provider call (MariaDB, default settings, ${RATE}/s for ${SECONDS} s, refresh ${REFRESH_MS} ms)`, [{
    layout: r.label, intents: r.n, lost: r.missing, 'p50 ms': fmt(r.p50), 'p90 ms': fmt(r.p90), 'p99 ms': fmt(r.p99), 'max ms': fmt(r.max),
    'p99 ÷ refresh': fmt(r.p99 / REFRESH_MS, 2) }]);
  ratios.push(`pickup p50 ${fmt(r.p50)} ms, p99 ÷ refresh ${fmt(r.p99 / REFRESH_MS, 2)}`);
} finally {
  await d.drop();
}
console.log(`\nratios: ${ratios.join('; ')}`);
process.exit(0);
