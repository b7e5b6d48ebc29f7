// What ix_intents_status_id (status, intent_id; PostgreSQL migration 19, MySQL/MariaDB migration 13: the API list by
// status) costs intake: POST /api/intents through the local host (one instance, pool 10, no timers) at concurrency C,
// with the index and without it, on the same database and host in one run. Rounds alternate which arm goes first (the
// index dropped and created again between the arms, so the table grows alike under both and it ends as migrated),
// so drift and other load on the machine fall on both arms. Per dialect and arm: req/s (requests ÷ the arm's wall
// time over every round), the worst round's p50 / p99, and with ÷ without per round and their median.
// BENCH_STATUS_INDEX_DIALECTS (postgres,mariadb), BENCH_STATUS_INDEX_N (3000 requests per arm and round),
// BENCH_STATUS_INDEX_C (16), BENCH_STATUS_INDEX_ROUNDS (4).
import { fmt, freshSchema, PG_URL, printTable } from './support.js';
import { schemaUrl, startHost } from './localHost.js';
import { freshMysqlDatabase } from './mysqlDatabase.js';
import { postAll, QUIET } from './intake.js';

const N = Number(process.env.BENCH_STATUS_INDEX_N ?? 3_000);
const C = Number(process.env.BENCH_STATUS_INDEX_C ?? 16);
const ROUNDS = Number(process.env.BENCH_STATUS_INDEX_ROUNDS ?? 4);
const DIALECTS = (process.env.BENCH_STATUS_INDEX_DIALECTS ?? 'postgres,mariadb').split(',').filter(Boolean);
const NAME = 'ix_intents_status_id';

interface Target {
  url: string;
  sql(text: string): Promise<void>;
  drop: string;
  create: string;
  close(): Promise<void>;
}

async function postgres(): Promise<Target> {
  const schema = await freshSchema();
  const db = schema.open(1);
  return { url: schemaUrl(PG_URL, schema.schema), sql: async (t) => void (await db.query(t)),
    drop: `DROP INDEX ${NAME}`, create: `CREATE INDEX ${NAME} ON submission_intents (status, intent_id)`,
    close: async () => { await db.close(); await schema.drop(); } };
}

async function mariadb(): Promise<Target> {
  const d = await freshMysqlDatabase();
  const db = d.open(1);
  return { url: d.url, sql: async (t) => void (await db.query(t)),
    drop: `ALTER TABLE submission_intents DROP INDEX ${NAME}`, create: `ALTER TABLE submission_intents ADD INDEX ${NAME} (status, intent_id)`,
    close: async () => { await db.close(); await d.drop(); } };
}

type Perf = Awaited<ReturnType<typeof postAll>>;
type Arm = { ms: number; n: number; p50: number; p99: number };
const sum = (xs: Perf[]): Arm => ({ ms: xs.reduce((m, x) => m + (N / x.rps) * 1000, 0), n: N * xs.length,
  p50: Math.max(...xs.map((x) => x.p50)), p99: Math.max(...xs.map((x) => x.p99)) });
const median = (xs: number[]) => {
  const s = [...xs].sort((a, b) => a - b);
  return (s[Math.floor((s.length - 1) / 2)]! + s[Math.ceil((s.length - 1) / 2)]!) / 2;
};

async function one(dialect: string): Promise<Record<string, string | number>[]> {
  const t = dialect === 'postgres' ? await postgres() : await mariadb();
  const host = await startHost({ ...QUIET, DATABASE_URL: t.url });
  const rows: Record<string, string | number>[] = [];
  try {
    await postAll(host.base, 1_000, C); // warm-up (JIT, pool connections), not measured
    const withIx: Perf[] = [];
    const without: Perf[] = [];
    for (let r = 1; r <= ROUNDS; r++) {
      // Odd rounds: with the index first; even rounds: without it first. The index is there again after each round.
      if (r % 2 === 1) withIx.push(await postAll(host.base, N, C));
      await t.sql(t.drop);
      without.push(await postAll(host.base, N, C));
      await t.sql(t.create);
      if (r % 2 === 0) withIx.push(await postAll(host.base, N, C));
      const [w, o] = [withIx.at(-1)!, without.at(-1)!];
      rows.push({ dialect, round: r, 'with req/s': fmt(w.rps), 'with p50 / p99 ms': `${fmt(w.p50, 1)} / ${fmt(w.p99, 1)}`,
        'without req/s': fmt(o.rps), 'without p50 / p99 ms': `${fmt(o.p50, 1)} / ${fmt(o.p99, 1)}`, 'with ÷ without': fmt(w.rps / o.rps, 3) });
    }
    const [w, o] = [sum(withIx), sum(without)];
    rows.push({ dialect, round: 'all', 'with req/s': fmt((w.n / w.ms) * 1000), 'with p50 / p99 ms': `${fmt(w.p50, 1)} / ${fmt(w.p99, 1)}`,
      'without req/s': fmt((o.n / o.ms) * 1000), 'without p50 / p99 ms': `${fmt(o.p50, 1)} / ${fmt(o.p99, 1)}`,
      'with ÷ without': `${fmt(o.ms / w.ms, 3)} (median of rounds ${fmt(median(withIx.map((x, k) => x.rps / without[k]!.rps)), 3)})` });
    return rows;
  } finally {
    await host.stop();
    await t.close();
  }
}

export async function benchStatusIndexIntake(): Promise<string> {
  const rows: Record<string, string | number>[] = [];
  for (const d of DIALECTS) rows.push(...(await one(d)));
  printTable(`Intake with and without ${NAME} (POST /api/intents, local host, 1 instance, c = ${C}, ${N} requests per arm and round)`, rows);
  return rows.filter((r) => r.round === 'all').map((r) => `${r.dialect}: with ÷ without ${r['with ÷ without']}`).join('; ');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  benchStatusIndexIntake().then((line) => console.log(`\nratios: ${line}`), (e) => { console.error(e); process.exit(1); });
}
