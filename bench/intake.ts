// Intake: POST /api/intents through the local host (one instance, real HTTP, keep-alive) at concurrency
// 1, 16, 64: requests/s and p50/p99. Baselines measured in this run, same client, same pool size: a bare
// node:http server doing JSON.parse + one INSERT (bench/bareIntakeServer.ts, its own process like the host),
// and single-row INSERTs straight through the driver. A decomposition row: the app's own postIntent handler
// served from node:http without the Functions objects (bench/handlerIntakeServer.ts), so the cost of the
// Functions programming model and the cost of our code are told apart.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { fromPglite, type PgQueryable } from '../src/store/postgres/db.js';
import { migratePostgres } from '../src/store/postgres/migrate.js';
import { fmt, freshSchema, pool, PG_URL, printTable, procCpuMs } from './support.js';
import { fileURLToPath } from 'node:url';
import { schemaUrl, startHost } from './localHost.js';

export const BARE = path.join(path.dirname(fileURLToPath(import.meta.url)), 'bareIntakeServer.js');
export const HANDLER = path.join(path.dirname(fileURLToPath(import.meta.url)), 'handlerIntakeServer.js');

interface Perf { rps: number; p50: number; p99: number }
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
export const BODY = JSON.stringify({ payload: { orderId: 42, note: 'benchmark intent' }, maxAttempts: 5 });
const POOL = 10;
export const QUIET = { TIMER_MODE: 'off', PROVIDER_URL: 'http://127.0.0.1:9/unused', INSTANCES: process.env.BENCH_INTAKE_INSTANCES ?? '1', DB_POOL_MAX: String(POOL) };

export async function postAll(base: string, n: number, concurrency: number, body = BODY) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const lat: number[] = [];
  const post = () => new Promise<void>((resolve, reject) => {
    const t = performance.now();
    const req = http.request(`${base}/intents`, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'idempotency-key': randomUUID() } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 201 ? (lat.push(performance.now() - t), resolve()) : reject(new Error(`HTTP ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(body);
  });
  const t0 = performance.now();
  await pool(Array.from({ length: n }), concurrency, post);
  const ms = performance.now() - t0;
  agent.destroy();
  return { rps: (n / ms) * 1000, p50: pct(lat, 50), p99: pct(lat, 99) };
}

async function baseline(db: PgQueryable, n: number, concurrency: number) {
  const contract = JSON.stringify({ provider: { url: null }, payload: JSON.parse(BODY).payload, retry: { maxAttempts: 5, baseDelayMs: 1000, maxDelayMs: 300000 } });
  const t0 = performance.now();
  await pool(Array.from({ length: n }), concurrency, async () => {
    await db.query(`INSERT INTO submission_intents (intent_id, idempotency_key, request_hash, contract, status, attempt_count,
        max_attempts, next_attempt_at, created_at, last_modified_at)
      VALUES ($1, $2, $3, $4::jsonb, 'scheduled', 0, 5, clock_timestamp(), clock_timestamp(), clock_timestamp())`,
      [randomUUID(), randomUUID(), '0'.repeat(64), contract]);
  });
  return ((n / (performance.now() - t0)) * 1000);
}

export async function benchIntake(n = Number(process.env.BENCH_INTAKE_N ?? 3_000)): Promise<string> {
  const rows: Record<string, string | number>[] = [];
  // PostgreSQL server
  const schema = await freshSchema();
  // BENCH_INTAKE_NODE_ARGS: extra node flags for the host (space-separated), e.g. GC settings to compare.
  const hostArgs = [...(process.env.BENCH_INTAKE_NODE_ARGS ?? '').split(' ').filter(Boolean),
    ...(process.env.BENCH_INTAKE_PROF ? ['--cpu-prof', `--cpu-prof-dir=${process.env.BENCH_INTAKE_PROF}`] : [])];
  const host = await startHost({ ...QUIET, DATABASE_URL: schemaUrl(PG_URL, schema.schema) }, undefined, [], hostArgs);
  const bare = await startHost({}, BARE, [PG_URL, schema.schema, String(POOL)]);
  const handler = await startHost({ ...QUIET, DATABASE_URL: schemaUrl(PG_URL, schema.schema) }, HANDLER);
  const servers = [host, handler, bare];
  const db = schema.open(POOL);
  try {
    for (const s of servers) await postAll(s.base, 1_000, 16); // warm-up (JIT, pool connections), not measured
    for (const c of [1, 16, 64]) {
      const count = c === 1 ? Math.min(n, 1_000) : n;
      // Interleaved halves (host, handler, bare, then the reverse), so a burst of load elsewhere on the
      // machine hits every server alike. CPU per request of each server process (from /proc): unlike req/s,
      // hardly moved by other load on the machine.
      const cpu0 = servers.map((s) => procCpuMs(s.child.pid!));
      const halves: Awaited<ReturnType<typeof postAll>>[][] = servers.map(() => []);
      for (const i of [0, 1, 2, 2, 1, 0]) halves[i]!.push(await postAll(servers[i]!.base, count / 2, c));
      const cpu = servers.map((s, i) => (procCpuMs(s.child.pid!) - cpu0[i]!) / count);
      const [r, hd, h] = halves.map(([a, b]) => ({ rps: (a!.rps + b!.rps) / 2, p50: Math.max(a!.p50, b!.p50), p99: Math.max(a!.p99, b!.p99) })) as [Perf, Perf, Perf];
      const b = await baseline(db, count, c);
      rows.push({ backend: 'postgres', concurrency: c, 'req/s': fmt(r.rps), 'p50 ms': fmt(r.p50, 1), 'p99 ms': fmt(r.p99, 1),
        'bare http+INSERT req/s': fmt(h.rps), 'bare p99 ms': fmt(h.p99, 1), 'ratio vs bare': fmt(r.rps / h.rps, 2),
        'CPU ms/req host': fmt(cpu[0]!, 3), 'CPU ms/req bare': fmt(cpu[2]!, 3),
        'handler on node:http req/s': fmt(hd.rps), 'handler p99 ms': fmt(hd.p99, 1), 'handler vs bare': fmt(hd.rps / h.rps, 2), 'CPU ms/req handler': fmt(cpu[1]!, 3),
        'raw INSERT/s': fmt(b), 'ratio vs INSERT': fmt(r.rps / b, 2) });
    }
  } finally {
    await host.stop();
    await handler.stop();
    await bare.stop();
    await db.close();
    await schema.drop();
  }
  // PGlite: the host's embedded database vs a PGlite of our own (same driver) for the baseline.
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sm-bench-'));
  const lite = await startHost({ ...QUIET, DATABASE_URL: `pglite:${path.join(dir, 'host')}` });
  const own = fromPglite(await PGlite.create(path.join(dir, 'baseline')));
  await migratePostgres(own);
  try {
    for (const c of [1, 16]) {
      const count = Math.min(n, 1_000);
      const r = await postAll(lite.base, count, c);
      const b = await baseline(own, count, c);
      rows.push({ backend: 'pglite', concurrency: c, 'req/s': fmt(r.rps), 'p50 ms': fmt(r.p50, 1), 'p99 ms': fmt(r.p99, 1),
        'bare http+INSERT req/s': '—', 'bare p99 ms': '—', 'ratio vs bare': '—', 'CPU ms/req host': '—', 'CPU ms/req bare': '—',
        'handler on node:http req/s': '—', 'handler p99 ms': '—', 'handler vs bare': '—', 'CPU ms/req handler': '—', 'raw INSERT/s': fmt(b), 'ratio vs INSERT': fmt(r.rps / b, 2) });
    }
  } finally {
    await lite.stop();
    await own.close();
    rmSync(dir, { recursive: true, force: true });
  }
  printTable(`Intake (POST /api/intents through the local host, ${QUIET.INSTANCES} instance(s))`, rows);
  const pg = rows.filter((r) => r.backend === 'postgres');
  return `intake vs bare http+INSERT ${pg.map((r) => `c${r.concurrency}=${r['ratio vs bare']}x (p99 ${r['p99 ms']} ms)`).join(' ')}; `
    + `handler on node:http vs bare ${pg.map((r) => `c${r.concurrency}=${r['handler vs bare']}x`).join(' ')}; `
    + `vs raw INSERT ${rows.map((r) => `${r.backend}/c${r.concurrency}=${r['ratio vs INSERT']}x`).join(' ')}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  benchIntake().then((line) => console.log(`\nratios: ${line}`), (e) => { console.error(e); process.exit(1); });
}
