// The cost of intake's shared lock on the partition count row (a20f5b0, issue 26), MySQL / MariaDB: the store's real
// insert (MysqlIntentStore.insert with partitionHash set, so its INSERT … SELECT reads the count row `LOCK IN SHARE
// MODE`: an InnoDB S lock on that one row, held to the commit) against a baseline measured in the same run: the same
// store, driver and pool sending the same statement without `LOCK IN SHARE MODE` (the text before a20f5b0: under
// READ COMMITTED, a consistent read of the row, no lock). The baseline is built here only, by removing the clause
// from the statement text on its way to the driver, so both arms run the same code and differ by that clause alone.
// Each arm at concurrency c = 1, 16, 64 (c inserts in flight at once, one connection each: the pool holds 64), in
// rounds A/B, B/A, … (the order flips every round) so that drift (the table growing, other work on the machine)
// falls on both arms alike. Per arm: inserts/s (inserts ÷ the arm's wall time, summed over rounds), p50/p99 of one
// insert's latency (INSERT + the primary-key read-back of the database's times, one batch: one round trip), and the
// server's InnoDB row-lock waits and deadlocks meanwhile (global counters: S locks do not wait for each other, so
// anything here is from elsewhere or a surprise). `BENCH_LOCK_N` inserts per arm and round at c = 16
// and 64 (default 2 000; c = 1: a sixth of it), `BENCH_LOCK_ROUNDS` (default 4), `BENCH_MYSQL_URL`.
import { randomUUID } from 'node:crypto';
import { partitionHash } from '../src/intents/partition.js';
import { uuidv7 } from '../src/intents/ids.js';
import type { NewIntent } from '../src/store/intentPorts.js';
import type { MyDatabase, MyStatement } from '../src/store/mysql/db.js';
import { createMysqlStores } from '../src/store/mysql/index.js';
import { MysqlIntentStore } from '../src/store/mysql/intentStore.js';
import { freshMysqlDatabase } from './mysqlDatabase.js';
import { fmt, pool, printTable } from './support.js';

const N = Number(process.env.BENCH_LOCK_N ?? 2_000);
const ROUNDS = Number(process.env.BENCH_LOCK_ROUNDS ?? 4);
const LEVELS = [1, 16, 64] as const;
const POOL = 64;
const COUNT = 4; // the recorded partition count: the row exists, so the locked read has a row to lock

const LOCKED_READ = /(FROM submission_manager_partition_count WHERE id = 1) LOCK IN SHARE MODE/;

/** The database as the unlocked arm sees it: the count read's `LOCK IN SHARE MODE` removed from every statement
 *  text (counted, so the run fails if the store's text no longer has it and the arms would be the same). */
function unlocked(db: MyDatabase): MyDatabase & { rewritten: number } {
  const rewrite = (text: string) => {
    if (!LOCKED_READ.test(text)) return text;
    w.rewritten++;
    return text.replace(LOCKED_READ, '$1');
  };
  const w = {
    rewritten: 0,
    query: <R>(text: string, params?: unknown[]) => db.query<R>(rewrite(text), params),
    batch: (statements: MyStatement[]) => db.batch(statements.map((x) => ({ ...x, text: rewrite(x.text) }))),
    pipelined: db.pipelined.bind(db),
    session: db.session.bind(db),
    transaction: db.transaction.bind(db),
    server: db.server.bind(db),
    close: db.close.bind(db),
  };
  return w as MyDatabase & { rewritten: number };
}


// As the intake use case builds it (src/intents/useCases.ts): a fresh UUIDv7, partitionHash of the id, a key; not
// due before 2099 (nothing runs them anyway: no executor here).
const CONTRACT = { provider: { url: null }, payload: { orderId: 42, note: 'benchmark intent' }, retry: { maxAttempts: 5, baseDelayMs: 1000, maxDelayMs: 300000 } };
const LATER = new Date('2099-01-01T00:00:00Z');
function intent(): NewIntent {
  const intentId = uuidv7();
  return { intentId, partitionHash: partitionHash(intentId), partitionKey: null, idempotencyKey: randomUUID(),
    requestHash: '0'.repeat(64), contract: CONTRACT as NewIntent['contract'], maxAttempts: 5, notBefore: LATER };
}

async function lockCounters(db: MyDatabase): Promise<{ waits: number; waitMs: number; deadlocks: number }> {
  const r = await db.query<{ Variable_name: string; Value: string }>(
    `SHOW GLOBAL STATUS WHERE Variable_name IN ('Innodb_row_lock_waits', 'Innodb_row_lock_time', 'Innodb_deadlocks')`);
  const v = (k: string) => Number(r.rows.find((x) => x.Variable_name === k)?.Value ?? Number.NaN);
  return { waits: v('Innodb_row_lock_waits'), waitMs: v('Innodb_row_lock_time'), deadlocks: v('Innodb_deadlocks') };
}

interface Arm { inserts: number; ms: number; lat: number[]; errors: number; waits: number; waitMs: number; deadlocks: number; perRound: number[] }
const arm = (): Arm => ({ inserts: 0, ms: 0, lat: [], errors: 0, waits: 0, waitMs: 0, deadlocks: 0, perRound: [] });
const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

/** `n` inserts through `store` at concurrency `c`, added to `a`. Errors are counted (a deadlock or lock wait
 *  timeout would be the finding), not thrown. */
async function run(store: MysqlIntentStore, admin: MyDatabase, n: number, c: number, a: Arm): Promise<void> {
  const before = await lockCounters(admin);
  const items = Array.from({ length: n }, intent);
  const t0 = performance.now();
  await pool(items, c, async (x) => {
    const t = performance.now();
    try {
      await store.insert(x);
      a.lat.push(performance.now() - t);
    } catch {
      a.errors++;
    }
  });
  const ms = performance.now() - t0;
  const after = await lockCounters(admin);
  a.inserts += n;
  a.ms += ms;
  a.perRound.push((n / ms) * 1000);
  a.waits += after.waits - before.waits;
  a.waitMs += after.waitMs - before.waitMs;
  a.deadlocks += after.deadlocks - before.deadlocks;
}

const d = await freshMysqlDatabase();
const db = d.open(POOL);
const admin = d.open(1);
const plain = unlocked(db);
const locked = new MysqlIntentStore(db);
const baseline = new MysqlIntentStore(plain);
const arms = new Map(LEVELS.map((c) => [c, { locked: arm(), unlocked: arm() }]));
let rows = 0;
try {
  await createMysqlStores(admin).partitions.recordPartitionCount(COUNT, 'bench');
  // Warm-up (JIT, all 64 connections opened and their sessions pinned), both arms, not measured.
  await run(locked, admin, 1_000, 64, arm());
  await run(baseline, admin, 1_000, 64, arm());
  for (let round = 0; round < ROUNDS; round++) {
    for (const c of LEVELS) {
      const n = c === 1 ? Math.round(N / 6) : N;
      const a = arms.get(c)!;
      const order = round % 2 === 0 ? ['locked', 'unlocked'] as const : ['unlocked', 'locked'] as const;
      for (const which of order) await run(which === 'locked' ? locked : baseline, admin, n, c, a[which]);
    }
  }
  if (plain.rewritten === 0) throw new Error('the store\'s insert no longer reads the count LOCK IN SHARE MODE: both arms were the same');
  // Every intent got partitionHash mod the recorded count (the read worked in both arms).
  const bad = await admin.query<{ n: number }>(`SELECT COUNT(*) AS n FROM submission_intents WHERE partition_no >= ${COUNT}`);
  if (Number(bad.rows[0]!.n) !== 0) throw new Error(`${bad.rows[0]!.n} intents outside partitions 0..${COUNT - 1}`);
  rows = Number((await admin.query<{ n: number }>('SELECT COUNT(*) AS n FROM submission_intents')).rows[0]!.n);
} finally {
  await db.close();
  await admin.close();
  await d.drop();
}

const perS = (a: Arm) => (a.inserts / a.ms) * 1000;
const table = [];
const ratios: string[] = [];
for (const c of LEVELS) {
  const { locked: l, unlocked: u } = arms.get(c)!;
  const roundRatios = l.perRound.map((x, i) => x / u.perRound[i]!);
  for (const [name, a] of [['locked (a20f5b0)', l], ['unlocked (before)', u]] as const) {
    table.push({ c, statement: name, inserts: a.inserts, 'inserts/s': fmt(perS(a)), 'p50 ms': fmt(pct(a.lat, 50), 2), 'p99 ms': fmt(pct(a.lat, 99), 2),
      'lock waits': a.waits, 'lock wait ms': a.waitMs, deadlocks: a.deadlocks, errors: a.errors,
      'locked ÷ unlocked': a === l ? `${fmt(perS(l) / perS(u), 3)} (rounds ${fmt(Math.min(...roundRatios), 2)}–${fmt(Math.max(...roundRatios), 2)})` : '' });
  }
  ratios.push(`c${c}=${fmt(perS(l) / perS(u), 3)}x`);
}
printTable(`Intake insert, count read LOCK IN SHARE MODE vs unlocked (MariaDB, pool ${POOL}, ${ROUNDS} interleaved rounds, ${rows} rows at the end)`, table);
console.log(`\nratios: locked/unlocked inserts/s ${ratios.join(' ')}`);
process.exit(0);
