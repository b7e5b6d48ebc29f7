// Pickup while the periodic reconcile runs (issue 20 item 4): one leader on the PostgreSQL server with N future
// intents (BENCH_RECONCILE_FUTURE, default 30 000) that every reconcile re-reads, the reconcile every 2 s, refresh
// 1 s, due-intent notices on; an intent submitted every ~50 ms for BENCH_RECONCILE_SECONDS (default 12 s); pickup =
// first provider arrival − submit (in-process no-op HTTP provider). Baseline, same run: the reconcile off (1 h).
// Before: the reconcile reloaded the whole schedule while the batch waited; after: a page at a time between batches.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { randomUUID } from 'node:crypto';
import { LeaseManager } from '../src/lease/leaseManager.js';
import { systemClock } from '../src/lease/clock.js';
import { Executor } from '../src/executor/executor.js';
import { HttpProvider } from '../src/provider/httpProvider.js';
import { silentLogger } from '../src/observability/logger.js';
import { fmt, freshSchema, printTable, stores } from './support.js';

const FUTURE = Number(process.env.BENCH_RECONCILE_FUTURE ?? 30_000);
const SECONDS = Number(process.env.BENCH_RECONCILE_SECONDS ?? 12);
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

async function measure(reconcileMs: number) {
  const arrived = new Map<string, number>();
  const server = http.createServer((req, res) => {
    const key = String(req.headers['idempotency-key'] ?? '');
    if (!arrived.has(key)) arrived.set(key, performance.now());
    req.resume();
    req.on('end', () => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'));
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/submit`;
  const schema = await freshSchema();
  const db = schema.open(8);
  const s = stores(db);
  await db.query(`INSERT INTO submission_intents (intent_id, request_hash, contract, status, attempt_count, max_attempts,
      next_attempt_at, created_at, last_modified_at)
    SELECT gen_random_uuid(), repeat('0', 64), '{"provider":{"url":null},"payload":{},"retry":{"maxAttempts":3,"baseDelayMs":10,"maxDelayMs":50}}'::jsonb,
      'scheduled', 0, 3, now() + interval '1 day', now(), now() FROM generate_series(1, $1::int)`, [FUTURE]);
  const lease = new LeaseManager(s.lease, { name: 'bench', holderId: 'bench-leader', durationMs: 600_000, renewIntervalMs: 60_000,
    acquireIntervalMs: 60_000, safetyMarginMs: 5_000, acquireJitterMs: 0 }, systemClock, silentLogger);
  const ex = new Executor(lease, s.execution, new HttpProvider(url), {
    tickBudgetMs: 60_000, concurrency: 16, providerTimeoutMs: 10_000, reconcileIntervalMs: reconcileMs,
    refresh: { intervalMs: 1_000, pageSize: 500, commitGraceMs: 1_000 }, startBatch: 4, completionBatch: 8, minLeaderWorkMs: 100,
  }, systemClock, silentLogger);
  if (s.notices) ex.wakeOn(s.notices);
  try {
    await ex.tick(3_000); // acquire + rebuild
    const tick = ex.tick((SECONDS + 3) * 1_000);
    const sent = new Map<string, number>();
    const end = performance.now() + SECONDS * 1_000;
    while (performance.now() < end) {
      await new Promise((r) => setTimeout(r, 50 * (0.5 + Math.random())));
      const intentId = randomUUID();
      const t0 = performance.now();
      await s.intents.insert({ intentId, idempotencyKey: null, requestHash: '0'.repeat(64),
        contract: { provider: { url: null }, payload: {}, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 50 } }, maxAttempts: 3, notBefore: null });
      sent.set(intentId, t0);
    }
    const deadline = performance.now() + 10_000;
    while ([...sent.keys()].some((id) => !arrived.has(id)) && performance.now() < deadline) await new Promise((r) => setTimeout(r, 20));
    const sum = await tick;
    const lat = [...sent].map(([id, t0]) => (arrived.get(id) ?? Number.POSITIVE_INFINITY) - t0);
    return { reconcile: reconcileMs >= 3_600_000 ? 'off' : `every ${reconcileMs / 1000} s`, n: lat.length,
      p50: fmt(pct(lat, 50)), p99: fmt(pct(lat, 99)), max: fmt(Math.max(...lat)), rowsRead: sum.refreshedRows };
  } finally {
    await ex.drain();
    await lease.release();
    await db.close();
    await schema.drop();
    await new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); });
  }
}

const rows = [];
for (const ms of [2_000, 3_600_000]) rows.push(await measure(ms));
printTable(`pickup (ms) with ${FUTURE} future intents, PostgreSQL, ${SECONDS} s at ~20 intents/s`, rows);
