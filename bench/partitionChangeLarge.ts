// A change of the partition count on a table of realistic size: N finished intents (succeeded, one attempt each) plus
// an open backlog with the newest ids (bench/largeTable.ts, seeded in SQL), on PostgreSQL and MariaDB, the changer with
// the product's statement timeout (DB_STATEMENT_TIMEOUT_MS default, 3 s) and batch sizes. Beside it (from 1 partition,
// BENCH_CHANGE_BESIDE_RATE > 0, default 20/s), partition 0's leader executes a stream of intents (bench/
// executionBeside.ts) from 15 s before the request until the change is pending, then drains (stops, releases its
// lease): the pickup (insert → provider call) before the request and while the preparing pass runs. Per phase, from
// the change row's database times: preparing (request → preparedAt; execution goes on) and its rows/s, switch
// (claimedAt → switchedAt), scan (→ scanDoneAt), catch-up (→ completedAt), the pause as the change's own work
// (claimedAt → completedAt: every lease held) and from preparedAt (the drain of our one leader included), and the
// total; steps that failed (a statement timeout, say) and whether the change completed within BENCH_CHANGE_LIMIT_S.
// Baseline, same run and server: the raw database moving 100 000 finished rows to their new partition in one UPDATE
// that hashes in SQL (rolled back), as rows/s: "preparing ÷ raw" is the preparing pass's share of the raw rate.
// BENCH_CHANGE_DIALECTS (postgres,mariadb), BENCH_CHANGE_SIZES (100000,1000000), BENCH_CHANGE_OPEN (10000),
// BENCH_CHANGE_FROM / _TO (1 → 2, the operator's case).
import { PartitionChanger } from '../src/lease/partitionChanger.js';
import { assignPartition } from '../src/intents/partition.js';
import { partitionLeaseName, PREPARE_BATCH_IDS, REASSIGN_BATCH_ROWS } from '../src/limits.js';
import { systemClock } from '../src/lease/clock.js';
import { silentLogger } from '../src/observability/logger.js';
import { uuidv7 } from '../src/intents/ids.js';
import type { PartitionChange } from '../src/store/partitionPorts.js';
import type { Stores } from '../src/store/stores.js';
import { fmt, printTable } from './support.js';
import { startExecution, type Window } from './executionBeside.js';
import { mariadbTable, postgresTable, seedInChunks, type LargeTable, type OpenStores } from './largeTable.js';

const STATEMENT_TIMEOUT_MS = 3_000;
const GRACE_MS = 5_000; // COMMIT_GRACE_MS's default: the catch-up's window (the switch excludes old-count inserts: no wait)
const LIMIT_S = Number(process.env.BENCH_CHANGE_LIMIT_S ?? 900);
const RAW_ROWS = 100_000;
const BESIDE_RATE = Number(process.env.BENCH_CHANGE_BESIDE_RATE ?? 20);
const BASELINE_MS = 15_000;
const WARM_MS = 3_000;
const SETTLE_MS = 3_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const env = (name: string, dflt: string) => (process.env[name] ?? dflt).split(',').filter(Boolean);

/** The raw rate: rows moved per second by one UPDATE moving the oldest RAW_ROWS rows (finished; fewer on a small
 *  table) to their partition under `to`, where it differs (the statement alone, its transaction rolled back). */
async function rawRate(t: LargeTable, to: number, n: number): Promise<number> {
  const pg = t.dialect === 'postgres';
  const rows = Math.min(RAW_ROWS, Math.floor(n / 2));
  const hash = pg ? `(('x' || left(encode(sha256(convert_to(intent_id::text, 'UTF8')), 'hex'), 8))::bit(32)::bigint % ${to})`
    : `CONV(LEFT(SHA2(intent_id, 256), 8), 16, 10) % ${to}`;
  const upTo = (await t.sql<{ id: string }>(`SELECT intent_id${pg ? '::text' : ''} AS id FROM submission_intents
    ORDER BY intent_id LIMIT 1 OFFSET ${rows - 1}`))[0]!.id;
  const where = `WHERE intent_id <= ${pg ? '$1::uuid' : '?'} AND partition_no <> ${hash}`;
  const moved = Number((await t.sql<{ n: number | string }>(`SELECT count(*) AS n FROM submission_intents ${where}`, [upTo]))[0]!.n);
  const ms = await t.rolledBack(`UPDATE submission_intents SET partition_no = ${hash} ${where}`, [upTo]);
  return moved / (ms / 1000);
}

interface Run {
  change: PartitionChange; preparedRows: number; failedSteps: number; steps: number; stuck: string | null; rawRowsPerS: number; misplaced: number;
  /** Execution beside it: before the request (baseline) and while preparing (null: BENCH_CHANGE_BESIDE_RATE=0). */
  beside: { before: Window; preparing: Window } | null;
}

async function one(make: () => Promise<LargeTable & { open: OpenStores }>, n: number, open: number, from: number, to: number): Promise<Run> {
  const t = await make();
  try {
    await seedInChunks(t, n, 'finished', from);
    await seedInChunks(t, open, 'open', from, n);
    await t.analyze();
    const rawRowsPerS = await rawRate(t, to, n);
    const preparedRows = await t.misplaced(to, true); // what the preparing pass moves: every finished row whose partition changes
    await t.stores.partitions.recordPartitionCount(from, 'bench');
    const product = t.open(STATEMENT_TIMEOUT_MS, 4);
    // Partition 0's leader executing a stream beside the change until it is pending (then it drains: stops, releases).
    const execution = BESIDE_RATE > 0 && from === 1 ? await startExecution(t.open, partitionLeaseName('bench', 0), BESIDE_RATE, STATEMENT_TIMEOUT_MS) : null;
    let beside: Run['beside'] = null;
    const tStart = performance.now();
    if (execution) await sleep(BASELINE_MS);
    const tRequest = performance.now();
    try {
      const s = product.stores;
      const req = await s.partitions.requestChange(to, 'bench', uuidv7());
      if (req.kind !== 'created') throw new Error(`request: ${req.kind}`);
      const drained = execution ? drainWhenPending(s, execution, (tPrepared) => {
        beside = { before: execution.window(tStart + WARM_MS, tRequest), preparing: execution.window(tRequest, tPrepared - SETTLE_MS) };
      }) : Promise.resolve();
      const changer = new PartitionChanger(s.lease, s.partitions, {
        leaseNameOf: (k) => partitionLeaseName('bench', k), partitionOf: assignPartition, holderId: 'bench~partition-change',
        durationMs: 60_000, renewIntervalMs: 20_000, safetyMarginMs: 5_000, commitGraceMs: GRACE_MS, refreshIntervalMs: 1_000,
        batchSize: REASSIGN_BATCH_ROWS, prepareBatchSize: PREPARE_BATCH_IDS, pollMs: 50, stuckSteps: 5,
      }, systemClock, silentLogger);
      const t0 = performance.now();
      let failedSteps = 0;
      let steps = 0;
      let stuck: string | null = null;
      for (;;) {
        const layout = await s.partitions.readLayout();
        if (!layout.active) break;
        if ((performance.now() - t0) / 1000 > LIMIT_S) {
          stuck = `not completed in ${LIMIT_S} s: state ${layout.active.state}, scan cursor ${layout.active.scanCursor}, ${failedSteps} failed step(s)`;
          break;
        }
        const out = await changer.step(layout, systemClock.nowMs() + 8_000);
        steps++;
        if (out.kind === 'failed') failedSteps++;
      }
      await changer.close();
      await drained;
      const change = (await s.partitions.listChanges(1))[0]!;
      return { change, preparedRows, failedSteps, steps, stuck, rawRowsPerS, misplaced: stuck ? -1 : await t.misplaced(to), beside };
    } finally {
      await execution?.stop(); // (stopped by the drain already, unless the change failed before it)
      await product.close();
    }
  } finally {
    await t.close();
  }
}

/** Polls the change every 100 ms; once it is past preparing, reports the time and stops the execution beside it. */
async function drainWhenPending(s: Stores, execution: Awaited<ReturnType<typeof startExecution>>, prepared: (at: number) => void): Promise<void> {
  for (;;) {
    const active = (await s.partitions.readLayout()).active;
    if (active === null || active.state !== 'preparing') break;
    await sleep(100);
  }
  const at = performance.now();
  await execution.stop(); // the drain; the window ends SETTLE_MS before it (those inserted later may not be called yet)
  prepared(at);
}

const secs = (a: Date | null, b: Date | null) => (a && b ? (b.getTime() - a.getTime()) / 1000 : NaN);

export async function benchPartitionChangeLarge(): Promise<string> {
  const sizes = env('BENCH_CHANGE_SIZES', '100000,1000000').map(Number);
  const open = Number(process.env.BENCH_CHANGE_OPEN ?? 10_000);
  const from = Number(process.env.BENCH_CHANGE_FROM ?? 1);
  const to = Number(process.env.BENCH_CHANGE_TO ?? 2);
  const rows: Record<string, string | number>[] = [];
  for (const dialect of env('BENCH_CHANGE_DIALECTS', 'postgres,mariadb')) {
    for (const n of sizes) {
      const r = await one(dialect === 'postgres' ? postgresTable : mariadbTable, n, open, from, to);
      const c = r.change;
      if (r.misplaced > 0) throw new Error(`${dialect} ${n}: ${r.misplaced} rows left outside their partition`);
      const prepS = secs(c.requestedAt, c.preparedAt);
      const preparedRows = r.preparedRows;
      rows.push({
        dialect, finished: n, open, 'rows moved': c.rowsMoved, completed: r.stuck ? `no (${r.stuck})` : 'yes',
        'steps (failed)': `${r.steps} (${r.failedSteps})`, 'preparing s': fmt(prepS, 1), 'preparing rows/s': fmt(preparedRows / prepS),
        'raw rows/s': fmt(r.rawRowsPerS), 'preparing ÷ raw': fmt(preparedRows / prepS / r.rawRowsPerS, 3),
        'pickup p50/p99 ms before': r.beside ? `${fmt(r.beside.before.p50)} / ${fmt(r.beside.before.p99)}` : '—',
        'while preparing (called/inserted)': r.beside ? `${fmt(r.beside.preparing.p50)} / ${fmt(r.beside.preparing.p99)} (${r.beside.preparing.called}/${r.beside.preparing.inserted})` : '—',
        'switch s': fmt(secs(c.claimedAt, c.switchedAt), 2), 'scan s': fmt(secs(c.switchedAt, c.scanDoneAt), 2),
        'catch-up s': fmt(secs(c.scanDoneAt, c.completedAt), 2), 'pause s (claim → completed)': fmt(secs(c.claimedAt, c.completedAt), 2),
        'pause s (prepared → completed)': fmt(secs(c.preparedAt, c.completedAt), 2),
        'total s': fmt(secs(c.requestedAt, c.completedAt), 1),
      });
    }
  }
  printTable(`Partition count change ${from} → ${to} on a large table (finished intents + ${open} open with the newest ids; statement timeout ${STATEMENT_TIMEOUT_MS} ms; batches of ${REASSIGN_BATCH_ROWS})`, rows);
  return rows.map((r) => `${r.dialect} ${r.finished}: pause ${r['pause s (prepared → completed)']}s, preparing ${r['preparing rows/s']} rows/s (${r['preparing ÷ raw']} × raw), completed ${r.completed}`).join('; ');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  benchPartitionChangeLarge().then((line) => console.log(`\nratios: ${line}`), (e) => { console.error(e); process.exit(1); });
}
