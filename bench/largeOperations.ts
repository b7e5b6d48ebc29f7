// Every operation that reads or writes many rows, on a table of realistic size (bench/largeTable.ts: N finished
// intents, succeeded with one attempt each, plus an open backlog with the newest ids), at each of BENCH_OPS_SIZES,
// the same table grown from one size to the next, on PostgreSQL and MariaDB. Each operation runs through the
// product's own stores and classes, with the product's page sizes and limits: a new leader's rebuild of partition 0
// (ScheduleRefresher: rebuildStart + loadScheduled pages), its interval refresh (refreshPage), orphan recovery
// (FEW started attempts of an older epoch), redrive by filter (FEW failed intents), one retention slice as the
// maintenance task runs it (retentionTask, 1 s; 3 slices, each deleting up to 5 × 1 000 of partition 0's oldest
// finished rows), the API's list (GET /api/intents) and the dashboard's search, overview, recent failures, attempts per minute
// and partition states, and intake (sequential store inserts). Median and max of BENCH_OPS_REPS runs each (intake:
// of BENCH_OPS_INSERTS inserts), the work each did, and the ratio of the median to the same operation's at the first
// size: ≈ 1 when an operation follows its work, not the table. Baseline, same run: a primary-key read (intents.get).
// BENCH_OPS_SIZES (100000,1000000), BENCH_OPS_DIALECTS (postgres,mariadb), BENCH_OPS_OPEN (10000), BENCH_OPS_REPS (5),
// BENCH_OPS_INSERTS (500); BENCH_OPS_KEEP=1 keeps each dialect's scratch schema / database (its name printed) for EXPLAIN.
import os from 'node:os';
import { ScheduleRefresher } from '../src/schedule/refresher.js';
import { retentionTask } from '../src/executor/maintenance.js';
import { emptySummary } from '../src/executor/tickSummary.js';
import { partitionHash } from '../src/intents/partition.js';
import { uuidv7 } from '../src/intents/ids.js';
import { LIST_LIMIT_DEFAULT } from '../src/intents/contract.js';
import { partitionLeaseName } from '../src/limits.js';
import { systemClock } from '../src/lease/clock.js';
import { silentLogger } from '../src/observability/logger.js';
import type { LeaseToken } from '../src/store/ports.js';
import { fmt, printTable } from './support.js';
import { mariadbTable, postgresTable, seedInChunks, type LargeTable } from './largeTable.js';

const env = (name: string, dflt: string) => (process.env[name] ?? dflt).split(',').filter(Boolean);
const SIZES = env('BENCH_OPS_SIZES', '100000,1000000').map(Number);
const DIALECTS = env('BENCH_OPS_DIALECTS', 'postgres,mariadb');
const OPEN = Number(process.env.BENCH_OPS_OPEN ?? 10_000);
const REPS = Number(process.env.BENCH_OPS_REPS ?? 5);
const INSERTS = Number(process.env.BENCH_OPS_INSERTS ?? 500);
const PARTITIONS = 2;
const FEW = 20;
const LEASE = 'bench';
const HOUR_MS = 3_600_000;
// The product's retention settings but for the age: 30 days less an hour, so the oldest 3.6 M finished rows are past it
// (seeded 30 days ago onwards, one ms apart) and every slice has its full work; at 10 M the younger rest follows them.
const RETENTION = { olderThanMs: 30 * 86_400_000 - HOUR_MS, batchSize: 1_000, maxBatchesPerTick: 5, intervalMs: 60_000 };
const SLICE_MS = 1_000; // DEFAULT_MAINTENANCE.sliceMs
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** One operation: `prepare` (untimed) before each run; `run` returns the work it did (rows). */
interface Op { name: string; reps?: number; prepare?(): Promise<void>; run(): Promise<number> }
interface Figure { medianMs: number; maxMs: number; work: number }

const median = (xs: number[]) => { const s = [...xs].sort((a, b) => a - b); return s[Math.floor((s.length - 1) / 2)]!; };

async function measure(op: Op, reps: number): Promise<Figure> {
  const ms: number[] = [];
  const work: number[] = [];
  for (let i = 0; i < reps; i++) {
    await op.prepare?.();
    const t0 = performance.now();
    work.push(await op.run());
    ms.push(performance.now() - t0);
  }
  return { medianMs: median(ms), maxMs: Math.max(...ms), work: median(work) };
}

/** The dialect's SQL for "now" and an id list of our own generated ids (literals: never user input). */
const nowSql = (t: LargeTable) => (t.dialect === 'postgres' ? 'clock_timestamp()' : 'UTC_TIMESTAMP(6)');
const inIds = (ids: string[]) => `(${ids.map((x) => `'${x}'`).join(', ')})`;

/** FEW open rows seeded at `from`, their ids (the rows scheduled at the time, but `except`; only partition 0's with
 *  `partition0`: call before the backlog exists). */
async function seedFew(t: LargeTable, from: number, except: string[], partition0 = false): Promise<string[]> {
  await t.seed(from, from + FEW, 'open', PARTITIONS);
  const rows = await t.sql<{ id: string }>(`SELECT intent_id AS id FROM submission_intents WHERE status = 'scheduled'${partition0 ? ' AND partition_no = 0' : ''}`);
  return rows.map((r) => String(r.id)).filter((id) => !except.includes(id));
}

/** The operations on `t`, partition 0's lease held as `token`; `failed` / `orphans` = the seeded failed and orphaned intents. */
function operations(t: LargeTable, token: LeaseToken, failed: string[], orphans: string[], finishedId: () => string, size: () => number): Op[] {
  const s = t.stores;
  const exec = s.executionFor(0);
  const refresher = new ScheduleRefresher(exec, { pageSize: 500, commitGraceMs: 5_000 }, systemClock);
  const search = { intentId: null, idempotencyKey: null, status: null, createdFrom: null, createdTo: null, before: null, limit: 25 };
  const refs = Array.from({ length: PARTITIONS }, (_, p) => ({ partition: p, leaseName: partitionLeaseName(LEASE, p) }));
  const retention = retentionTask(s.ops, RETENTION, systemClock, silentLogger, undefined, 0);
  const reFail = async () => {
    await t.sql(`UPDATE submission_intents SET status = 'failed', last_error = 'bench: provider answered 500', last_modified_at = ${nowSql(t)}
      WHERE intent_id IN ${inIds(failed)}`);
  };
  let inserted = 0;
  return [
    { name: 'baseline: primary-key read (intents.get)', run: async () => ((await s.intents.get(finishedId())) ? 1 : 0) },
    { name: 'rebuild of partition 0 (rebuildStart + loadScheduled)', run: async () => { const r = await refresher.rebuild(); return r.rows; } },
    { name: 'refresh (refreshPage from the cursor)', prepare: async () => { if (!refresher.schedule.size) await refresher.rebuild(); },
      run: async () => (await refresher.refresh()).rows },
    { name: 'orphan recovery (fencedRecoverOrphans)', prepare: async () => {
      await t.sql(`UPDATE submission_intents SET status = 'in_flight', attempt_count = attempt_count + 1, max_attempts = 1000000
        WHERE intent_id IN ${inIds(orphans)}`);
      await t.sql(`INSERT INTO submission_attempts (intent_id, attempt_no, lease_epoch, holder_id, started_at, outcome)
        SELECT intent_id, attempt_count, ${token.leaseEpoch - 1}, 'bench-old', ${nowSql(t)}, 'started' FROM submission_intents WHERE intent_id IN ${inIds(orphans)}`);
    }, run: async () => { const r = await exec.fencedRecoverOrphans(token); return r.kind === 'ok' ? r.value.recovered : -1; } },
    { name: 'API list, first page (intents.list)', run: async () => (await s.intents.list({ limit: LIST_LIMIT_DEFAULT })).length },
    { name: 'API list, status=scheduled', run: async () => (await s.intents.list({ status: 'scheduled', limit: LIST_LIMIT_DEFAULT })).length },
    { name: 'API list, status=failed', prepare: reFail, run: async () => (await s.intents.list({ status: 'failed', limit: LIST_LIMIT_DEFAULT })).length },
    { name: 'dashboard search, newest first', run: async () => (await s.insights.searchIntents(search)).length },
    { name: 'dashboard search, status=scheduled', run: async () => (await s.insights.searchIntents({ ...search, status: 'scheduled' })).length },
    { name: 'dashboard search, status=succeeded', run: async () => (await s.insights.searchIntents({ ...search, status: 'succeeded' })).length },
    { name: 'dashboard search, status=failed', run: async () => (await s.insights.searchIntents({ ...search, status: 'failed' })).length },
    { name: 'search by id', run: async () => (await s.insights.searchIntents({ ...search, intentId: finishedId() })).length },
    { name: 'search by idempotency key', run: async () => (await s.insights.searchIntents({ ...search, idempotencyKey: 'bench-key' })).length },
    { name: 'overview counts (getClusterOverview)', run: async () => Object.values((await s.ops.getClusterOverview(LEASE)).intentsByStatus).reduce((a, b) => a + b, 0) },
    { name: 'recent failures (recentFailures 20)', run: async () => (await s.insights.recentFailures(20)).length },
    { name: 'attempts per minute (last hour)', run: async () => (await s.insights.attemptsPerMinute(HOUR_MS)).minutes.length },
    { name: 'partition states (GET /api/leases)', run: async () => (await s.insights.partitionStates(refs)).partitions.length },
    { name: 'redrive by filter (limit 100)', prepare: reFail, run: async () => (await s.redrive.redrive({ redriveId: uuidv7(), requestedBy: 'bench',
      reason: null, ids: null, failedFrom: null, failedTo: null, errorContains: null, limit: 100 })).redriven.length },
    { name: 'retention slice (retentionTask, 1 s; work = rows purged)', reps: 3, run: async () => {
      const sum = emptySummary(token.holderId);
      await retention.run(token, systemClock.nowMs() + SLICE_MS, sum);
      return sum.purgedIntents;
    } },
    { name: `intake (intents.insert; per insert, ${INSERTS} in a row)`, reps: INSERTS, run: async () => {
      const id = uuidv7();
      await s.intents.insert({ intentId: id, partitionHash: partitionHash(id), partitionKey: null, idempotencyKey: `bench-${size()}-${inserted++}`,
        requestHash: 'a'.repeat(64), contract: { provider: { url: null }, payload: { bench: true }, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 50 } },
        maxAttempts: 3, notBefore: new Date(Date.now() + HOUR_MS) });
      return 1;
    } },
  ];
}

interface DialectRun { dialect: string; sizes: number[]; figures: Map<string, Figure[]>; seedS: number[]; load: string[]; kept: string | null }

async function oneDialect(dialect: string): Promise<DialectRun> {
  const t = await (dialect === 'postgres' ? postgresTable() : mariadbTable());
  const out: DialectRun = { dialect, sizes: [], figures: new Map(), seedS: [], load: [], kept: null };
  let keep = false;
  try {
    await t.stores.partitions.recordPartitionCount(PARTITIONS, 'bench');
    // The few failed and orphaned intents, then the backlog (the newest ids); a second epoch of partition 0's lease,
    // so attempts of the first are orphans.
    const failed = await seedFew(t, OPEN, []);
    await t.sql(`UPDATE submission_intents SET idempotency_key = 'bench-key' WHERE intent_id = '${failed[0]}'`);
    const orphans = await seedFew(t, OPEN + FEW, failed, true); // partition 0's: the ones its leader recovers
    await seedInChunks(t, OPEN, 'open', PARTITIONS);
    const name = partitionLeaseName(LEASE, 0);
    await t.stores.lease.tryAcquire(name, 'bench-old', 1);
    await sleep(20);
    const got = await t.stores.lease.tryAcquire(name, 'bench', 6 * HOUR_MS);
    if (!got.acquired) throw new Error('could not acquire the partition lease');
    const token: LeaseToken = { leaseName: name, holderId: 'bench', leaseEpoch: got.lease.leaseEpoch };
    let finishedId = '';
    let size = 0;
    const ops = operations(t, token, failed, orphans, () => finishedId, () => size);
    let seeded = 0;
    for (const n of SIZES) {
      const t0 = performance.now();
      await seedInChunks(t, n - seeded, 'finished', PARTITIONS, seeded);
      await t.analyze();
      out.seedS.push((performance.now() - t0) / 1000);
      seeded = size = n;
      finishedId = String((await t.sql<{ id: string }>(`SELECT intent_id AS id FROM submission_intents WHERE status = 'succeeded' ORDER BY intent_id DESC LIMIT 1`))[0]!.id);
      out.sizes.push(n);
      out.load.push(os.loadavg().map((x) => x.toFixed(1)).join(' '));
      const rows: Record<string, string>[] = [];
      for (const op of ops) {
        const f = await measure(op, op.reps ?? REPS).catch((e: unknown) => {
          console.log(`${dialect} ${n} ${op.name}: failed: ${String(e)}`);
          return { medianMs: NaN, maxMs: NaN, work: NaN };
        });
        out.figures.set(op.name, [...(out.figures.get(op.name) ?? []), f]);
        rows.push({ operation: op.name, work: fmt(f.work), 'median ms': fmt(f.medianMs, 2), 'max ms': fmt(f.maxMs, 2) });
      }
      printTable(`${dialect}, ${n} finished + ${OPEN} open (seeded and analysed in ${fmt(out.seedS.at(-1)!, 1)} s; load ${out.load.at(-1)})`, rows);
    }
    keep = process.env.BENCH_OPS_KEEP === '1';
    if (keep) out.kept = String((await t.sql<{ n: string }>(dialect === 'postgres' ? 'SELECT current_schema() AS n' : 'SELECT DATABASE() AS n'))[0]!.n);
    return out;
  } finally {
    if (!keep) await t.close();
  }
}

const sizeText = (n: number) => n.toLocaleString('en-US').replace(/,/g, ' ');

export async function benchLargeOperations(): Promise<string> {
  const lines: string[] = [];
  for (const dialect of DIALECTS) {
    const r = await oneDialect(dialect);
    const rows = [...r.figures].map(([op, fs]) => {
      const row: Record<string, string> = { operation: op, work: fs.map((f) => fmt(f.work)).join(' / ') };
      fs.forEach((f, i) => { row[`${sizeText(r.sizes[i]!)} ms (median / max)`] = `${fmt(f.medianMs, 2)} / ${fmt(f.maxMs, 1)}`; });
      fs.slice(1).forEach((f, i) => { row[`× at ${sizeText(r.sizes[i + 1]!)}`] = fmt(f.medianMs / fs[0]!.medianMs, 2); });
      return row;
    });
    printTable(`Every operation on a large table, ${r.dialect} (${OPEN} open; seeding s ${r.seedS.map((x) => fmt(x, 0)).join(' / ')}; load ${r.load.join(' | ')})`, rows);
    if (r.kept) console.log(`\nkept: ${r.kept}`);
    const grown = rows.filter((x) => Number(x[`× at ${sizeText(r.sizes.at(-1)!)}`]) > 3).map((x) => x.operation);
    lines.push(`${dialect}: ${grown.length ? `grows > 3× by ${sizeText(r.sizes.at(-1)!)}: ${grown.join(', ')}` : 'every operation within 3× of the smallest size'}`);
  }
  return lines.join('; ');
}

if (import.meta.url === `file://${process.argv[1]}`) {
  benchLargeOperations().then((line) => { console.log(`\nratios: ${line}`); process.exit(0); }, (e) => { console.error(e); process.exit(1); });
}
