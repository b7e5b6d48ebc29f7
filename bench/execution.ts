// Execution throughput: one leader, a provider on loopback (own process, keep-alive), N due intents:
// attempts/s from first start to last completion (database time), against a baseline of one-commit-per-row
// UPDATEs of the same rows through the same pool at the same concurrency.
import { LeaseManager } from '../src/lease/leaseManager.js';
import { systemClock } from '../src/lease/clock.js';
import { Executor } from '../src/executor/executor.js';
import { HttpProvider } from '../src/provider/httpProvider.js';
import { silentLogger } from '../src/observability/logger.js';
import { fmt, freshSchema, pool, printTable, seedIntents, startProviderProcess, stores } from './support.js';

const POOL = 10;

async function runLeader(n: number, latencyMs: number, concurrency: number) {
  const schema = await freshSchema();
  const db = schema.open(POOL);
  const s = stores(db);
  const provider = await startProviderProcess(latencyMs);
  try {
    await seedIntents(db, n);
    const lease = new LeaseManager(s.lease, { name: 'bench', holderId: 'bench-leader', durationMs: 600_000, renewIntervalMs: 60_000,
      acquireIntervalMs: 1_000, safetyMarginMs: 5_000, acquireJitterMs: 0 }, systemClock, silentLogger);
    const http = new HttpProvider(provider.url);
    const ex = new Executor(lease, s.execution, http, {
      tickBudgetMs: 2_000, maxAttemptsPerTick: 1_000_000, concurrency, providerTimeoutMs: 10_000, reconcileIntervalMs: 3_600_000,
      refresh: { intervalMs: 1_000, pageSize: 500, commitGraceMs: 1_000 }, startBatch: Math.max(1, concurrency / 4),
      completionBatch: Math.max(1, concurrency / 2), minLeaderWorkMs: 100,
    }, systemClock, silentLogger);
    for (;;) {
      await ex.tick();
      const left = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM submission_intents WHERE status <> 'succeeded'`);
      if (left.rows[0]!.n === 0) break;
    }
    const span = await db.query<{ ms: number; n: number }>(
      `SELECT extract(epoch FROM max(finished_at) - min(started_at)) * 1000 AS ms, count(*)::int AS n FROM submission_attempts`);
    const { ms, n: attempts } = span.rows[0]!;
    http.close();
    // Baseline: the same rows, one UPDATE (one commit) each, same pool, concurrency = pool size.
    const ids = (await db.query<{ intent_id: string }>('SELECT intent_id FROM submission_intents')).rows.map((r) => r.intent_id);
    const t0 = performance.now();
    await pool(ids, POOL, async (id) => {
      await db.query(`UPDATE submission_intents SET status = 'succeeded', attempt_count = attempt_count, last_modified_at = clock_timestamp()
                       WHERE intent_id = $1`, [id]);
    });
    const baseMs = performance.now() - t0;
    return { attempts, attemptsPerS: (attempts / Number(ms)) * 1000, baselinePerS: (ids.length / baseMs) * 1000 };
  } finally {
    provider.stop();
    await db.close();
    await schema.drop();
  }
}

export async function benchExecution(n = Number(process.env.BENCH_EXEC_N ?? 20_000)): Promise<string> {
  const rows = [];
  for (const [count, latency, conc] of [[n, 0, 64], [2_000, 50, 16], [4_000, 50, 64]] as const) {
    const r = await runLeader(count, latency, conc);
    rows.push({ intents: count, 'provider ms': latency, concurrency: conc, 'attempts/s': fmt(r.attemptsPerS),
      'baseline UPDATE/s': fmt(r.baselinePerS), ratio: fmt(r.attemptsPerS / r.baselinePerS, 2) });
  }
  printTable('Execution (PostgreSQL server, one leader, provider in its own process)', rows);
  return `execution ${rows.map((r) => `${r['provider ms']}ms/c${r.concurrency}=${r.ratio}x`).join(' ')}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  benchExecution().then((line) => console.log(`\nratios: ${line}`), (e) => { console.error(e); process.exit(1); });
}
