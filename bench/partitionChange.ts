// A change of the partition count (issue 26) on N intents, most of them finished (as retention leaves a table) and
// 10 % open: how long the preparing pass runs (execution goes on) and how long the pause lasts (every lease held:
// switch, scan of the open and recent rows, the catch-up check (no wait: the switch excludes inserts that read the
// old count), complete), against a baseline: the raw database moving the same rows to the same partitions in one
// UPDATE that hashes in SQL. PostgreSQL server; no executor runs (leases are free).
import { PartitionChanger } from '../src/lease/partitionChanger.js';
import { assignPartition } from '../src/intents/partition.js';
import { partitionLeaseName, PREPARE_BATCH_IDS, REASSIGN_BATCH_ROWS } from '../src/limits.js';
import { systemClock } from '../src/lease/clock.js';
import { silentLogger } from '../src/observability/logger.js';
import { uuidv7 } from '../src/intents/ids.js';
import { fmt, freshSchema, printTable, seedIntents, stores } from './support.js';

const GRACE_MS = 200; // the catch-up check's window (modified since the switch less this); never waited for
// The partition rule in SQL (docs/operations.md): the first 4 bytes of SHA-256 of the key, mod the count.
const SQL_PARTITION = (count: number) =>
  `(('x' || left(encode(sha256(convert_to(COALESCE(partition_key, intent_id::text), 'UTF8')), 'hex'), 8))::bit(32)::bigint % ${count})`;

async function one(n: number, from: number, to: number) {
  const schema = await freshSchema();
  const db = schema.open(4);
  try {
    const open = Math.round(n / 10);
    for (let done = 0; done < n - open; done += 200_000) await seedIntents(db, Math.min(200_000, n - open - done), { status: 'succeeded' });
    await seedIntents(db, open, { status: 'scheduled', dueInMs: 3600_000 });
    await db.query(`UPDATE submission_intents SET partition_no = ${SQL_PARTITION(from)}`);
    await db.query('VACUUM (ANALYZE) submission_intents');
    const s = stores(db);
    await s.partitions.recordPartitionCount(from, 'bench');
    // Baseline: one statement moving every row to its partition under `to`, rolled back (the table stays as seeded).
    const b0 = performance.now();
    await db.transaction(async (tx) => {
      await tx.query(`UPDATE submission_intents SET partition_no = ${SQL_PARTITION(to)} WHERE partition_no <> ${SQL_PARTITION(to)}`);
      throw Object.assign(new Error('rollback'), { rollback: true });
    }).catch((e: { rollback?: boolean }) => { if (!e.rollback) throw e; });
    const baseMs = performance.now() - b0;

    const req = await s.partitions.requestChange(to, 'bench', uuidv7());
    if (req.kind !== 'created') throw new Error(`request: ${req.kind}`);
    const changer = new PartitionChanger(s.lease, s.partitions, {
      leaseNameOf: (k) => partitionLeaseName('bench', k), partitionOf: assignPartition, holderId: 'bench~partition-change',
      durationMs: 60_000, renewIntervalMs: 20_000, safetyMarginMs: 5_000, commitGraceMs: GRACE_MS, refreshIntervalMs: 0, batchSize: REASSIGN_BATCH_ROWS, prepareBatchSize: PREPARE_BATCH_IDS, pollMs: 50, stuckSteps: 5,
    }, systemClock, silentLogger);
    for (;;) {
      const layout = await s.partitions.readLayout();
      if (!layout.active) break;
      await changer.step(layout, systemClock.nowMs() + 8_000);
    }
    const rows = (await db.query<{ n: string }>(`SELECT count(*) AS n FROM submission_intents WHERE partition_no <> ${SQL_PARTITION(to)}`)).rows[0]!;
    if (Number(rows.n) !== 0) throw new Error(`${rows.n} rows left in the wrong partition`);
    // Database times of the change row: preparing from the request to preparedAt, the pause from then to completion.
    const change = (await s.partitions.listChanges(1))[0]!;
    const ms = (a: Date | null, b: Date | null) => b!.getTime() - a!.getTime();
    return { prepareMs: ms(change.requestedAt, change.preparedAt), pauseMs: ms(change.preparedAt, change.completedAt), baseMs, moved: change.rowsMoved,
      scanMs: ms(change.switchedAt, change.scanDoneAt) };
  } finally {
    await db.close();
    await schema.drop();
  }
}

export async function benchPartitionChange(sizes = (process.env.BENCH_CHANGE_SIZES ?? '100000,500000').split(',').map(Number)): Promise<string> {
  const rows = [];
  for (const n of sizes) {
    const r = await one(n, 4, 6);
    const pauseWork = r.pauseMs;
    rows.push({ intents: n, open: n / 10, 'rows moved': r.moved, 'preparing s (runs on)': fmt(r.prepareMs / 1000, 2),
      'pause s': fmt(r.pauseMs / 1000, 2), 'of which scan s': fmt(r.scanMs / 1000, 2), 'one UPDATE s (baseline)': fmt(r.baseMs / 1000, 2),
      'pause work ÷ baseline': fmt(pauseWork / r.baseMs, 2), 'all ÷ baseline': fmt((r.prepareMs + pauseWork) / r.baseMs, 2) });
  }
  printTable('Partition count change 4 → 6 (PostgreSQL server; 90 % finished, 10 % open; batches of 1 000)', rows);
  return `partitionChange ${rows.map((r) => `${r.intents}: pause ${r['pause s']}s (work ÷ one UPDATE ${r['pause work ÷ baseline']}x), preparing ${r['preparing s (runs on)']}s`).join('; ')}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  benchPartitionChange().then((line) => console.log(`\nratios: ${line}`), (e) => { console.error(e); process.exit(1); });
}
