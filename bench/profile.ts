// Execution profile: what one attempt costs the PostgreSQL server, measured in units a shared, loaded machine does
// not distort (statements, round trips, rows, WAL records and bytes, commits, blocks dirtied, tuples written, buffer
// accesses; backend CPU from /proc, which load distorts less than throughput). In one run, on the same server, each
// with no-op handlers and N jobs (BENCH_PROFILE_N, 10 000): our executor (one leader, in-process no-op provider,
// c = BENCH_PROFILE_CONCURRENCY, 256, production batch rule), pg-boss (4 workers × batches of 500, as in peers)
// and the one-commit-per-row UPDATE baseline (pool 16). Statements are counted in the client (the leader's
// database wrapper, pg-boss's db adapter); the server's side comes from serverCost.ts, attributed to each run's
// own schema and backends. Autovacuum is off on the measured tables for the run (its WAL would count).
import pg from 'pg';
import type PgBoss from 'pg-boss';
import { openPgPool, type PgDatabase, type PgQueryable } from '../src/store/postgres/db.js';
import { runLeader } from './execution.js';
import { baseline, pgBoss } from './peers.js';
import { costSince, holdWal, mark, quietSchema, type RunProbe, type ServerCost, type ServerMark } from './serverCost.js';
import { fmt, PG_URL, printTable } from './support.js';

const N = Number(process.env.BENCH_PROFILE_N ?? 10_000);
const CONC = Number(process.env.BENCH_PROFILE_CONCURRENCY ?? 256);
const BOSS_APP = 'bench-profile-pgboss';

interface Kind { calls: number; rows: number; batch: number; ms: number }

/** Statements per kind (our `/* sm:<kind> *\/` tag, else the statement's first words), counted while `on`. */
class Tally {
  on = false;
  readonly kinds = new Map<string, Kind>();
  record(text: string, params: unknown[] | undefined, rows: number, ms: number): void {
    if (!this.on) return;
    const tag = /\/\* sm:(\S+) \*\//.exec(text)?.[1];
    const name = tag ?? text.replace(/\s+/g, ' ').trim().replace(/pgboss_[0-9a-f]+\./g, '').slice(0, 56);
    const k = this.kinds.get(name) ?? { calls: 0, rows: 0, batch: 0, ms: 0 };
    k.calls++;
    k.rows += rows;
    k.batch += (params?.find((p) => Array.isArray(p)) as unknown[] | undefined)?.length ?? 0;
    k.ms += ms;
    this.kinds.set(name, k);
  }
  get statements(): number {
    let n = 0;
    for (const k of this.kinds.values()) n += k.calls;
    return n;
  }
}

/** A probe measuring the server between `begin` and `end` for the backends named `app(schema)`. */
function serverProbe(admin: PgQueryable, app: (schema: string) => string, tally: Tally | null, done: () => boolean) {
  let before: ServerMark | null = null;
  let wal: { release(): Promise<void> } | null = null;
  const out: RunProbe & { cost: ServerCost | null } = {
    cost: null,
    async begin(schema) {
      await quietSchema(admin, schema);
      wal = await holdWal(PG_URL);
      before = await mark(admin, schema, app(schema), 'before');
      if (tally) tally.on = true;
    },
    done,
    async end(schema) {
      if (tally) tally.on = false;
      out.cost = await costSince(admin, schema, app(schema), before!);
      await wal?.release();
    },
  };
  return out;
}

/** BENCH_PROFILE_EXPLAIN=start,complete: the first call of each named kind with a batch of ≥ 100 is run once more
 *  before the real call, under EXPLAIN (ANALYZE, BUFFERS) in a transaction rolled back, and its plan printed. */
const EXPLAIN = new Set((process.env.BENCH_PROFILE_EXPLAIN ?? '').split(',').filter(Boolean));

async function explainOnce(db: PgDatabase, text: string, params: unknown[] | undefined): Promise<void> {
  const kind = /\/\* sm:(\S+) \*\//.exec(text)?.[1];
  const batch = (params?.find((p) => Array.isArray(p)) as unknown[] | undefined)?.length ?? 0;
  if (!kind || batch < 100 || !EXPLAIN.delete(kind)) return;
  const undo = new Error('rollback');
  await db.transaction(async (tx) => {
    const r = await tx.query<{ 'QUERY PLAN': string }>(`EXPLAIN (ANALYZE, BUFFERS, COSTS OFF) ${text}`, params);
    const plan = r.rows.map((x) => x['QUERY PLAN'].replace(/'\{[^}]{100,}\}'/g, "'{…}'")).join('\n');
    console.log(`\n### EXPLAIN ANALYZE ${kind}, batch ${batch}\n\n\`\`\`\n${plan}\n\`\`\``);
    throw undo;
  }).catch((e) => { if (e !== undo) throw e; });
}

/** The leader's database with every statement recorded (BEGIN and COMMIT of a transaction as their own kinds). */
function tallied(db: PgDatabase, tally: Tally, onRows: (text: string, rows: Record<string, unknown>[]) => void): PgDatabase {
  const wrap = (q: PgQueryable): PgQueryable => ({
    async query<R>(text: string, params?: unknown[]) {
      if (EXPLAIN.size > 0 && tally.on) await explainOnce(db, text, params);
      const t0 = performance.now();
      const r = await q.query<R>(text, params);
      tally.record(text, params, r.rows.length || r.rowCount, performance.now() - t0);
      onRows(text, r.rows as Record<string, unknown>[]);
      return r;
    },
  });
  return {
    ...db,
    query: wrap(db).query,
    transaction: (fn) => db.transaction(async (tx) => {
      tally.record('BEGIN', [], 0, 0);
      const v = await fn(wrap(tx));
      tally.record('COMMIT', [], 0, 0);
      return v;
    }),
  };
}

async function ours(admin: PgQueryable) {
  const tally = new Tally();
  let succeeded = 0;
  const probe = serverProbe(admin, (s) => s, tally, () => succeeded >= N);
  const r = await runLeader(N, 0, CONC, { baseline: false, provider: 'none', probe: {
    ...probe,
    wrap: (db) => tallied(db, tally, (text, rows) => {
      if (text.includes('/* sm:complete */')) succeeded += rows.filter((x) => x.status === 'succeeded').length;
    }),
  } });
  return { perS: r.attemptsPerS, jobs: r.attempts, tally, cost: probe.cost! };
}

async function boss(admin: PgQueryable) {
  const tally = new Tally();
  let completed = 0;
  const pool = new pg.Pool({ connectionString: PG_URL, max: 16, application_name: BOSS_APP });
  const db: PgBoss.Db = {
    async executeSql(text, values) {
      const t0 = performance.now();
      const r = await pool.query(text, values);
      const last = (Array.isArray(r) ? r.at(-1) : r) as pg.QueryResult; // a multi-statement text answers an array
      tally.record(text, values, last.rows.length || (last.rowCount ?? 0), performance.now() - t0);
      if (tally.on && text.includes('completed_on = now()') && text.includes("state = 'completed'")) completed += Number(last.rows[0]?.count ?? 0);
      return r;
    },
  };
  const probe = serverProbe(admin, () => BOSS_APP, tally, () => completed >= N);
  try {
    const perS = await pgBoss(N, 4, 500, { db, probe });
    return { perS, jobs: completed, tally, cost: probe.cost! };
  } finally {
    await pool.end();
  }
}

async function raw(admin: PgQueryable) {
  const probe = serverProbe(admin, (s) => s, null, () => true);
  const perS = await baseline(N, probe);
  const tally = new Tally();
  tally.kinds.set('UPDATE submission_intents … WHERE intent_id = $1 (autocommit)', { calls: N, rows: N, batch: 0, ms: NaN });
  return { perS, jobs: N, tally, cost: probe.cost! };
}

export async function benchProfile(): Promise<string> {
  const admin = openPgPool({ url: PG_URL, max: 1, statementTimeoutMs: 600_000, applicationName: 'bench-profile-admin' });
  try {
    const runs = [
      { who: 'one-commit-per-row UPDATE, pool 16 (baseline)', key: 'baseline', ...(await raw(admin)) },
      { who: 'pg-boss, 4 workers × batch 500', key: 'pgBoss', ...(await boss(admin)) },
      { who: `our executor, c ${CONC}, in-process no-op provider`, key: 'ours', ...(await ours(admin)) },
    ];
    const per = (v: number, jobs: number, d = 2) => (Number.isFinite(v) ? fmt(v / jobs, d) : '—');
    printTable(`Per job / attempt (PostgreSQL server, ${N} no-op jobs each, same run)`, runs.map(({ who, jobs, perS, tally, cost: c }) => ({
      system: who, jobs, 'jobs/s': fmt(perS), 'statements = round trips': per(tally.statements, jobs, 3),
      commits: per(c.wal.commits, jobs, 3), 'WAL records': per(c.wal.records, jobs, 1), 'WAL bytes (no FPI)': per(c.wal.bytes, jobs, 0),
      'FPI bytes': per(c.wal.fpiBytes, jobs, 0), 'blocks dirtied': per(c.wal.blocks, jobs, 3),
      'tuples ins / upd (HOT)': `${per(c.ins, jobs)} / ${per(c.upd, jobs)} (${per(c.hot, jobs)})`,
      'buffer hits': per(c.bufferHits, jobs, 1), 'backend CPU µs': per(c.cpuMs * 1000, jobs, 0),
      'backend bytes written': per(c.writeBytes, jobs, 0),
    })));
    for (const r of runs) {
      if (!r.cost.walAttributed) console.log(`\n(${r.key}: pg_waldump unavailable — WAL bytes are the server-wide LSN difference)`);
    }
    printTable('Statements per 1 000 jobs / attempts, by kind', runs.filter((r) => r.key !== 'baseline').flatMap(({ key, jobs, tally }) =>
      [...tally.kinds].sort((a, b) => b[1].calls - a[1].calls).map(([name, k]) => ({
        system: key, statement: name.replace(/\|/g, '/'), 'per 1 000': fmt((k.calls * 1000) / jobs, 2),
        'rows returned / call': fmt(k.rows / k.calls, 1), 'array length / call': fmt(k.batch / k.calls, 1),
        'client ms / call (load-dependent)': fmt(k.ms / k.calls, 2),
      }))));
    printTable('WAL by record kind and relation (no FPI), per job / attempt', runs.flatMap(({ key, jobs, cost }) =>
      [...cost.wal.byKind].sort((a, b) => b[1].bytes - a[1].bytes).slice(0, 14).map(([kind, k]) => ({
        system: key, 'record · relation': kind, records: fmt(k.records / jobs, 3), bytes: fmt(k.bytes / jobs, 1),
      }))));
    const walPer = (key: string) => {
      const r = runs.find((x) => x.key === key)!;
      return r.cost.wal.bytes / r.jobs;
    };
    return `profile walBytesPerJob ${runs.map((r) => `${r.key}=${fmt(walPer(r.key))}`).join(' ')} ours/pgBoss=${fmt(walPer('ours') / walPer('pgBoss'), 2)}x`;
  } finally {
    await admin.close();
  }
}

if (import.meta.url === `file://${process.argv[1]}`) {
  benchProfile().then((line) => { console.log(`\nratios: ${line}`); process.exit(0); }, (e) => { console.error(e); process.exit(1); });
}
