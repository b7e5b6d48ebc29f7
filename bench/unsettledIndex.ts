// What an index of the intents costs intake (PostgreSQL): BENCH_PARTIAL_INDEX = failed (the partial index migration 15
// adds, ix_intents_failed: status = 'failed'), unsettled (its first version, every status but the settled ones,
// measured at 0.85 × intake and replaced) or status (migration 19's ix_intents_status_id (status, intent_id), every
// intent: the API list by status). The store's own insert, N intents at concurrency C through a pool of C, in
// rounds that alternate with and without the index on the same schema (dropped and created between them; which goes
// first alternates too, as the table grows), so both see about the same table size and the same noise. The figure: inserts/s with ÷ without, per round and their median.
// BENCH_UNSETTLED_N (10000), BENCH_UNSETTLED_C (8), BENCH_UNSETTLED_ROUNDS (3).
import { uuidv7 } from '../src/intents/ids.js';
import { partitionHash } from '../src/intents/partition.js';
import { fmt, freshSchema, pool, printTable, stores } from './support.js';

const N = Number(process.env.BENCH_UNSETTLED_N ?? 10_000);
const C = Number(process.env.BENCH_UNSETTLED_C ?? 8);
const ROUNDS = Number(process.env.BENCH_UNSETTLED_ROUNDS ?? 3);
const CONTRACT = { provider: { url: null }, payload: { bench: 'unsettled' }, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 50 } };
const WHICH = (['unsettled', 'status'] as const).find((w) => w === process.env.BENCH_PARTIAL_INDEX) ?? 'failed';
const NAME = WHICH === 'status' ? 'ix_intents_status_id' : `ix_intents_${WHICH}`;
const INDEX = WHICH === 'status' ? `CREATE INDEX ${NAME} ON submission_intents (status, intent_id)`
  : `CREATE INDEX ${NAME} ON submission_intents (intent_id) WHERE status ${WHICH === 'failed' ? "= 'failed'" : "IN ('scheduled', 'in_flight', 'failed')"}`;

export async function benchUnsettledIndex(): Promise<string> {
  const schema = await freshSchema();
  const db = schema.open(C);
  const s = stores(db);
  await s.partitions.recordPartitionCount(1, 'bench');
  const insertsPerS = async () => {
    const ids = Array.from({ length: N }, () => uuidv7());
    const t0 = performance.now();
    await pool(ids, C, async (intentId) => {
      await s.intents.insert({ intentId, idempotencyKey: null, requestHash: '0'.repeat(64), contract: CONTRACT, maxAttempts: 3, notBefore: null,
        partitionKey: null, partitionHash: partitionHash(intentId) });
    });
    return N / ((performance.now() - t0) / 1000);
  };
  const rows: Record<string, string | number>[] = [];
  const ratios: number[] = [];
  try {
    if (WHICH === 'unsettled') await db.query(INDEX);
    await insertsPerS(); // warm-up (with the index)
    for (let r = 1; r <= ROUNDS; r++) {
      // Odd rounds measure with the index first, even ones without it first (the table grows by N each time).
      let withIndex = 0;
      let without = 0;
      if (r % 2 === 1) withIndex = await insertsPerS();
      await db.query(`DROP INDEX ${NAME}`);
      without = await insertsPerS();
      await db.query(INDEX);
      if (r % 2 === 0) withIndex = await insertsPerS();
      ratios.push(withIndex / without);
      rows.push({ round: r, 'with index /s': fmt(withIndex), 'without /s': fmt(without), 'with ÷ without': fmt(withIndex / without, 3) });
    }
  } finally {
    await db.close();
    await schema.drop();
  }
  const median = [...ratios].sort((a, b) => a - b)[Math.floor(ratios.length / 2)]!;
  printTable(`Intake with and without ${NAME} (PostgreSQL server; ${N} inserts per round at c = ${C}, the store's insert)`, rows);
  return `unsettledIndex: intake with ÷ without ${NAME}, median of ${ROUNDS}: ${fmt(median, 3)}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  benchUnsettledIndex().then((line) => console.log(`\nratios: ${line}`), (e) => { console.error(e); process.exit(1); });
}
