// Intake: POST /api/intents through the local host (3 instances, real HTTP, keep-alive) at concurrency
// 1, 16, 64: requests/s and p50/p99; baseline: single-row INSERTs of the same row through the same driver
// and the same pool size at the same concurrency, measured in this run.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { PGlite } from '@electric-sql/pglite';
import { fromPglite, type PgQueryable } from '../src/store/postgres/db.js';
import { migratePostgres } from '../src/store/postgres/migrate.js';
import { fmt, freshSchema, pool, PG_URL, printTable } from './support.js';
import { schemaUrl, startHost } from './localHost.js';

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;
const BODY = JSON.stringify({ payload: { orderId: 42, note: 'benchmark intent' }, maxAttempts: 5 });
const QUIET = { EXECUTOR_SCHEDULE: '0 0 0 1 1 *', PROVIDER_URL: 'http://127.0.0.1:9/unused', INSTANCES: '3', DB_POOL_MAX: '10' };

async function postAll(base: string, n: number, concurrency: number) {
  const agent = new http.Agent({ keepAlive: true, maxSockets: concurrency });
  const lat: number[] = [];
  const post = () => new Promise<void>((resolve, reject) => {
    const t = performance.now();
    const req = http.request(`${base}/intents`, { method: 'POST', agent, headers: { 'content-type': 'application/json', 'idempotency-key': randomUUID() } }, (res) => {
      res.resume();
      res.on('end', () => (res.statusCode === 201 ? (lat.push(performance.now() - t), resolve()) : reject(new Error(`HTTP ${res.statusCode}`))));
    });
    req.on('error', reject);
    req.end(BODY);
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
  const host = await startHost({ ...QUIET, DATABASE_URL: schemaUrl(PG_URL, schema.schema) });
  const db = schema.open(10);
  try {
    for (const c of [1, 16, 64]) {
      const r = await postAll(host.base, c === 1 ? Math.min(n, 1_000) : n, c);
      const b = await baseline(db, c === 1 ? Math.min(n, 1_000) : n, c);
      rows.push({ backend: 'postgres', concurrency: c, 'req/s': fmt(r.rps), 'p50 ms': fmt(r.p50, 1), 'p99 ms': fmt(r.p99, 1), 'baseline INSERT/s': fmt(b), ratio: fmt(r.rps / b, 2) });
    }
  } finally {
    await host.stop();
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
      rows.push({ backend: 'pglite', concurrency: c, 'req/s': fmt(r.rps), 'p50 ms': fmt(r.p50, 1), 'p99 ms': fmt(r.p99, 1), 'baseline INSERT/s': fmt(b), ratio: fmt(r.rps / b, 2) });
    }
  } finally {
    await lite.stop();
    await own.close();
    rmSync(dir, { recursive: true, force: true });
  }
  printTable('Intake (POST /api/intents through the local host, 3 instances)', rows);
  return `intake ${rows.map((r) => `${r.backend}/c${r.concurrency}=${r.ratio}x`).join(' ')}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  benchIntake().then((line) => console.log(`\nratios: ${line}`), (e) => { console.error(e); process.exit(1); });
}
