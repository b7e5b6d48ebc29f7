// Execution throughput: one leader, a provider on loopback (own process, keep-alive), N due intents:
// attempts/s from first start to last completion (database time), against a baseline of one-commit-per-row
// UPDATEs of the same rows through the same pool size (16) at concurrency = pool size. Also printed: the
// statements the leader sent per attempt and the CPU each process spent per attempt (leader, provider,
// PostgreSQL backends; /proc, same machine), against the baseline's client and backends per row — on a
// shared 2-core box, throughput is roughly the CPU left over divided by the CPU per attempt.
// Executor settings: tick budget 2 s, the provider guard production builds with no limits set (in-flight cap =
// concurrency; BENCH_EXEC_GUARD=0: none), batches derived from
// the concurrency as in production (start = c/4, completion = c/2; BENCH_EXEC_START_BATCH /
// BENCH_EXEC_COMPLETION_BATCH override), refresh 1 s (BENCH_EXEC_REFRESH_MS overrides it: what the refresh
// costs). The headline is 0 ms at c = 256 (batches of 64 / 128): with a no-op provider the calls take no
// time, so the executor's cost is per statement and per attempt.
import { LeaseManager } from '../src/lease/leaseManager.js';
import { systemClock } from '../src/lease/clock.js';
import { Executor } from '../src/executor/executor.js';
import { NO_OPS } from '../src/executor/executorOps.js';
import { HttpProvider } from '../src/provider/httpProvider.js';
import { silentLogger } from '../src/observability/logger.js';
import type { PgDatabase } from '../src/store/postgres/db.js';
import type { RunProbe } from './serverCost.js';
import { backendCpuMs, benchExecutorSettings, counting, cpuDeltaMs, fmt, freshSchema, NO_HTTP, pool, printTable, procCpuMs, productionGuard,
  seedIntents, selfCpuMs, startProviderProcess, stores, type ProviderKind } from './support.js';

/** Pool of the leader and of the baseline (the issue's reference figure: one-commit-per-row UPDATEs, pool 16). */
const POOL = 16;

/** `provider: 'none'` runs the leader with NO_HTTP (latency ignored) instead of a provider process; `probe`
 *  (bench/profile.ts) wraps the leader's database and replaces the poll between ticks. */
export async function runLeader(n: number, latencyMs: number, concurrency: number,
  opts: { baseline?: boolean; provider?: ProviderKind | 'none'; probe?: RunProbe & { wrap(db: PgDatabase): PgDatabase } } = {}) {
  const schema = await freshSchema();
  const db = schema.open(POOL);
  const leaderDb = counting(opts.probe ? opts.probe.wrap(db) : db);
  const s = stores(leaderDb);
  const provider = opts.provider === 'none' ? { url: '', pid: 0, stop() {} } : await startProviderProcess(latencyMs, opts.provider);
  try {
    await seedIntents(db, n);
    const lease = new LeaseManager(s.lease, { name: 'bench', holderId: 'bench-leader', durationMs: 600_000, renewIntervalMs: 60_000,
      acquireIntervalMs: 1_000, safetyMarginMs: 5_000, acquireJitterMs: 0 }, systemClock, silentLogger);
    const http = new HttpProvider(provider.url);
    const base = benchExecutorSettings(concurrency);
    const settings = benchExecutorSettings(concurrency, {
      refresh: { ...base.refresh, intervalMs: Number(process.env.BENCH_EXEC_REFRESH_MS ?? base.refresh.intervalMs) },
      startBatch: Number(process.env.BENCH_EXEC_START_BATCH ?? base.startBatch),
      completionBatch: Number(process.env.BENCH_EXEC_COMPLETION_BATCH ?? base.completionBatch),
    });
    const ex = new Executor(lease, s.execution, opts.provider === 'none' ? NO_HTTP : http, settings, systemClock, silentLogger,
      Math.random, NO_OPS, productionGuard(settings));
    await opts.probe?.begin(schema.schema);
    const cpu0 = { leader: selfCpuMs(), provider: procCpuMs(provider.pid), pg: await backendCpuMs(db, schema.schema) };
    for (;;) {
      await ex.tick(undefined, 2_000); // as the timer runs it: a next occurrence, so a bridge between ticks
      if (opts.probe) {
        if (opts.probe.done()) break;
        continue;
      }
      const left = await db.query<{ n: number }>(`SELECT count(*)::int AS n FROM submission_intents WHERE status <> 'succeeded'`);
      if (left.rows[0]!.n === 0) break;
    }
    await ex.drain(); // the bridge left running after the last tick
    await opts.probe?.end(schema.schema);
    const cpu = { leader: selfCpuMs() - cpu0.leader, provider: procCpuMs(provider.pid) - cpu0.provider,
      pg: cpuDeltaMs(cpu0.pg, await backendCpuMs(db, schema.schema)) };
    const span = await db.query<{ ms: number; n: number; call: number }>(
      `SELECT extract(epoch FROM max(finished_at) - min(started_at)) * 1000 AS ms, count(*)::int AS n, avg(duration_ms)::float8 AS call
         FROM submission_attempts`);
    const { ms, n: attempts, call } = span.rows[0]!;
    // A slot's cycle: the run's span × c ÷ attempts. Its call part is what the leader timed (send → answer,
    // duration_ms); the rest is the slot idle between an answer and its next start (completion, START, waits).
    const cycleMs = (Number(ms) * concurrency) / attempts;
    http.close();
    const perAttempt = (v: number) => fmt((v * 1000) / attempts);
    const exec = { attempts, attemptsPerS: (attempts / Number(ms)) * 1000, statements: fmt(leaderDb.count / attempts, 2),
      slot: `${fmt(Number(call), 1)} / ${fmt(cycleMs - Number(call), 1)}`,
      cpu: `${perAttempt(cpu.leader)} / ${perAttempt(cpu.provider)} / ${perAttempt(cpu.pg)}` };
    // Baseline: the same rows, one UPDATE (one commit) each, same pool, concurrency = pool size.
    // (BENCH_EXEC_BASELINE=0 skips it, e.g. to profile the leader alone with `node --cpu-prof`.)
    if (opts.baseline === false || process.env.BENCH_EXEC_BASELINE === '0') return { ...exec, baselinePerS: NaN, baselineCpu: '' };
    const ids = (await db.query<{ intent_id: string }>('SELECT intent_id FROM submission_intents')).rows.map((r) => r.intent_id);
    const b0 = { client: selfCpuMs(), pg: await backendCpuMs(db, schema.schema) };
    const t0 = performance.now();
    await pool(ids, POOL, async (id) => {
      await db.query(`UPDATE submission_intents SET status = 'succeeded', attempt_count = attempt_count, last_modified_at = clock_timestamp()
                       WHERE intent_id = $1`, [id]);
    });
    const baseMs = performance.now() - t0;
    const perRow = (v: number) => fmt((v * 1000) / ids.length);
    const baselineCpu = `${perRow(selfCpuMs() - b0.client)} / ${perRow(cpuDeltaMs(b0.pg, await backendCpuMs(db, schema.schema)))}`;
    return { ...exec, baselinePerS: (ids.length / baseMs) * 1000, baselineCpu };
  } finally {
    provider.stop();
    await db.close();
    await schema.drop();
  }
}

/** Scenarios as `intents:providerMs:concurrency[:raw]`, comma-separated (BENCH_EXEC_SCENARIOS overrides);
 *  `raw` = the minimal net-based provider server instead of node:http (support.ts). */
function scenarios(n: number): { count: number; latency: number; conc: number; provider: ProviderKind }[] {
  const spec = process.env.BENCH_EXEC_SCENARIOS ?? `${n}:0:64,${n}:0:256,${n}:0:256:raw,2000:50:16,4000:50:64`;
  return spec.split(',').map((x) => {
    const [count, latency, conc, kind] = x.split(':');
    return { count: Number(count), latency: Number(latency), conc: Number(conc), provider: kind === 'raw' ? 'raw' : 'node' };
  });
}

export async function benchExecution(n = Number(process.env.BENCH_EXEC_N ?? 10_000)): Promise<string> {
  const rows = [];
  const list = scenarios(n);
  // A warm-up run of the first scenario (at most 2 000 intents, not printed; BENCH_EXEC_WARMUP=0 skips it): the
  // first run of a process otherwise pays for compiling the executor's hot paths (1–3 points of the bound at 50 ms).
  const first = list[0];
  if (first && process.env.BENCH_EXEC_WARMUP !== '0') {
    await runLeader(Math.min(first.count, 2_000), first.latency, first.conc, { provider: first.provider, baseline: false });
  }
  for (const { count, latency, conc, provider } of list) {
    const r = await runLeader(count, latency, conc, { provider });
    rows.push({ intents: count, 'provider ms': latency, 'provider server': provider === 'raw' ? 'net (minimal)' : 'node:http',
      concurrency: conc, 'attempts/s': fmt(r.attemptsPerS),
      '% of c ÷ latency': latency > 0 ? `${fmt((100 * r.attemptsPerS * latency) / (conc * 1000))} %` : '—',
      'slot ms: call (leader-timed) / idle': r.slot,
      'statements/attempt': r.statements, 'CPU µs/attempt leader / provider / PG': r.cpu,
      'baseline UPDATE/s': fmt(r.baselinePerS), 'baseline CPU µs/row client / PG': r.baselineCpu, ratio: fmt(r.attemptsPerS / r.baselinePerS, 2) });
  }
  printTable('Execution (PostgreSQL server, one leader, provider in its own process)', rows);
  return `execution ${rows.map((r) => `${r['provider ms']}ms/c${r.concurrency}${r['provider server'] === 'node:http' ? '' : '/net'}=${r.ratio}x`).join(' ')}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  // Exit explicitly: a pool's idle timer or a keep-alive socket must not keep the benchmark process alive.
  benchExecution().then((line) => { console.log(`\nratios: ${line}`); process.exit(0); }, (e) => { console.error(e); process.exit(1); });
}
