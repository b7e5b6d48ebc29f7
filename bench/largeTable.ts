// A table of realistic size for the benchmarks that read or write many rows: N finished intents (one succeeded attempt
// each, settled 30 days ago onwards) plus an open backlog, inserted set-based in SQL (never through the API), in chunks
// of CHUNK rows per statement. Ids have the uuidv7 layout and grow with the row number, so the open backlog (seeded
// last) has the newest ids, as in production: a read walking the primary key from the start meets every finished row
// before the first open one. Every row is in its partition under `count` by the rule of src/intents/partition.ts, in
// the dialect's SQL (docs/operations.md). PostgreSQL server and MySQL/MariaDB, each on a scratch schema / database.
import type { PgDatabase } from '../src/store/postgres/db.js';
import type { MyDatabase } from '../src/store/mysql/db.js';
import { createPostgresStores } from '../src/store/postgres/index.js';
import { createMysqlStores } from '../src/store/mysql/index.js';
import type { Stores } from '../src/store/stores.js';
import { freshSchema } from './support.js';
import { freshMysqlDatabase } from './mysqlDatabase.js';

const CHUNK = 200_000;
const DAY_MS = 86_400_000;
const CONTRACT = JSON.stringify({ provider: { url: null }, payload: { bench: true }, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 50 } });

export interface LargeTable {
  dialect: 'postgres' | 'mariadb';
  stores: Stores;
  /** Raw SQL (the dialect's own placeholders); rows back. */
  sql<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
  /** Rows numbered from..to−1: `finished` = succeeded 30 days ago onwards (one ms apart, one attempt each), `open` =
   *  scheduled, due in an hour, modified an hour ago. Partitioned under `count`. */
  seed(from: number, to: number, kind: 'finished' | 'open', count: number): Promise<void>;
  /** One statement in a transaction that is rolled back (the table stays as seeded): its own time, ms. */
  rolledBack(text: string, params: unknown[]): Promise<number>;
  /** Rows not in their partition under `count` (only the succeeded ones: `finished`). */
  misplaced(count: number, finished?: boolean): Promise<number>;
  /** Fresh statistics (ANALYZE), as a table of this size has. */
  analyze(): Promise<void>;
  close(): Promise<void>;
}

/** The stores on a second pool with the product's statement timeout (what the changer runs with). */
export type OpenStores = (statementTimeoutMs: number, poolMax: number) => { stores: Stores; close(): Promise<void> };

/** The statement's time, from the error that rolled its transaction back. */
const rollingBack = (p: Promise<unknown>): Promise<number> => p.then(() => NaN, (e: { ms?: number }) => {
  if (e.ms === undefined) throw e;
  return e.ms;
});

/** LargeTable.rolledBack on `db`: the statement timed inside a transaction its own error rolls back. */
const timedRollback = (db: { transaction<T>(fn: (tx: { query(text: string, params?: unknown[]): Promise<unknown> }) => Promise<T>): Promise<T> }) =>
  (text: string, params: unknown[]): Promise<number> => rollingBack(db.transaction(async (tx) => {
    const t0 = performance.now();
    await tx.query(text, params);
    throw Object.assign(new Error('rollback'), { ms: performance.now() - t0 });
  }));

export async function seedInChunks(t: LargeTable, n: number, kind: 'finished' | 'open', count: number, offset = 0): Promise<void> {
  for (let at = 0; at < n; at += CHUNK) await t.seed(offset + at, offset + Math.min(n, at + CHUNK), kind, count);
}

// PostgreSQL. The id of row g: 48-bit milliseconds (base + g), version 7, g mod 4096, variant 8, g in 48 bits.
const PG_PARTITION = (key: string, count: number) =>
  `(('x' || left(encode(sha256(convert_to(${key}, 'UTF8')), 'hex'), 8))::bit(32)::bigint % ${count})::smallint`;
const PG_ID = (ms: string) => `(substr(lpad(to_hex(${ms}), 12, '0'), 1, 8) || '-' || substr(lpad(to_hex(${ms}), 12, '0'), 9, 4) || '-7'
  || lpad(to_hex(g % 4096), 3, '0') || '-8000-' || lpad(to_hex(g), 12, '0'))`;

export async function postgresTable(): Promise<LargeTable & { open: OpenStores }> {
  const schema = await freshSchema();
  const db: PgDatabase = schema.open(2);
  const base = Date.now() - 30 * DAY_MS;
  return {
    dialect: 'postgres',
    stores: createPostgresStores(db, 'postgres'),
    sql: async (text, params) => (await db.query(text, params)).rows as never,
    rolledBack: timedRollback(db),
    async seed(from, to, kind, count) {
      const ms = kind === 'finished' ? `(${base}::bigint + g)` : `(${Date.now() - 3_600_000}::bigint + g)`;
      const at = `to_timestamp(${ms} / 1000.0)`;
      const status = kind === 'finished' ? 'succeeded' : 'scheduled';
      await db.query(`INSERT INTO submission_intents (intent_id, request_hash, contract, status, attempt_count, max_attempts, next_attempt_at,
          created_at, last_modified_at, partition_no)
        SELECT id::uuid, repeat('0', 64), $1::jsonb, '${status}', ${kind === 'finished' ? 1 : 0}, 3,
               ${kind === 'finished' ? at : "clock_timestamp() + interval '1 hour'"}, ${at}, ${at}, ${PG_PARTITION('id', count)}
          FROM (SELECT g, ${PG_ID(ms)} AS id FROM generate_series(${from}::bigint, ${to - 1}::bigint) AS g) AS s`, [CONTRACT]);
      if (kind === 'finished') {
        await db.query(`INSERT INTO submission_attempts (intent_id, attempt_no, lease_epoch, holder_id, started_at, finished_at, outcome, http_status, duration_ms)
          SELECT ${PG_ID(ms)}::uuid, 1, 1, 'bench', ${at}, ${at}, 'succeeded', 200, 5 FROM generate_series(${from}::bigint, ${to - 1}::bigint) AS g`);
      }
    },
    misplaced: async (count, finished = false) => Number((await db.query<{ n: string }>(`SELECT count(*) AS n FROM submission_intents
      WHERE partition_no <> ${PG_PARTITION('COALESCE(partition_key, intent_id::text)', count)}${finished ? " AND status = 'succeeded'" : ''}`)).rows[0]!.n),
    analyze: async () => { await db.query('VACUUM (ANALYZE) submission_intents'); await db.query('VACUUM (ANALYZE) submission_attempts'); },
    open: (statementTimeoutMs, poolMax) => {
      const p = schema.openWith({ max: poolMax, statementTimeoutMs });
      return { stores: createPostgresStores(p, 'postgres'), close: () => p.close() };
    },
    async close() {
      await db.close();
      await schema.drop();
    },
  };
}

// MySQL / MariaDB: the same ids and times; rows from a cross join of digit tables (no generate_series; MySQL 8 has no
// sequence engine), numbered from..to−1.
const DIGITS = '(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)';
const MY_ROWS = (from: number, to: number) => `(SELECT ${from} + a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d + 100000 * h.d AS g
  FROM ${['a', 'b', 'c', 'e', 'f', 'h'].map((x) => `${DIGITS} AS ${x}`).join(' CROSS JOIN ')}
  WHERE h.d <= ${Math.floor((to - from - 1) / 100_000)} HAVING g < ${to})`;
const MY_PARTITION = (key: string, count: number) => `CAST(CONV(LEFT(SHA2(${key}, 256), 8), 16, 10) % ${count} AS UNSIGNED)`;
const MY_HEX = (x: string, width: number) => `LPAD(LOWER(HEX(${x})), ${width}, '0')`;
const MY_ID = (ms: string) => `CONCAT(LEFT(${MY_HEX(ms, 12)}, 8), '-', RIGHT(${MY_HEX(ms, 12)}, 4), '-7', ${MY_HEX('g % 4096', 3)}, '-8000-', ${MY_HEX('g', 12)})`;

export async function mariadbTable(): Promise<LargeTable & { open: OpenStores }> {
  const d = await freshMysqlDatabase();
  const db: MyDatabase = d.open(2);
  const base = Date.now() - 30 * DAY_MS;
  const time = (ms: string) => `FROM_UNIXTIME(${ms} / 1000.0)`;
  return {
    dialect: 'mariadb',
    stores: createMysqlStores(db),
    sql: async (text, params) => (await db.query(text, params)).rows as never,
    rolledBack: timedRollback(db),
    async seed(from, to, kind, count) {
      const ms = kind === 'finished' ? `(${base} + g)` : `(${Date.now() - 3_600_000} + g)`;
      const status = kind === 'finished' ? 'succeeded' : 'scheduled';
      const rows = `(SELECT g, ${MY_ID(ms)} AS id, ${time(ms)} AS at FROM ${MY_ROWS(from, to)} AS r) AS s`;
      await db.session(async (c) => {
        await c.query(`INSERT INTO submission_intents (intent_id, request_hash, contract, status, attempt_count, max_attempts, next_attempt_at,
            created_at, last_modified_at, partition_no)
          SELECT id, REPEAT('0', 64), ?, '${status}', ${kind === 'finished' ? 1 : 0}, 3,
                 ${kind === 'finished' ? 'at' : 'DATE_ADD(UTC_TIMESTAMP(6), INTERVAL 1 HOUR)'}, at, at, ${MY_PARTITION('id', count)} FROM ${rows}`, [CONTRACT]);
        if (kind === 'finished') {
          await c.query(`INSERT INTO submission_attempts (intent_id, attempt_no, lease_epoch, holder_id, started_at, finished_at, outcome, http_status, duration_ms)
            SELECT id, 1, 1, 'bench', at, at, 'succeeded', 200, 5 FROM ${rows}`);
        }
      });
    },
    misplaced: async (count, finished = false) => Number((await db.query<{ n: number }>(`SELECT COUNT(*) AS n FROM submission_intents
      WHERE partition_no <> ${MY_PARTITION('COALESCE(partition_key, intent_id)', count)}${finished ? " AND status = 'succeeded'" : ''}`)).rows[0]!.n),
    analyze: async () => { await db.query('ANALYZE TABLE submission_intents, submission_attempts'); },
    open: (statementTimeoutMs, poolMax) => {
      const p = d.openWith({ max: poolMax, statementTimeoutMs });
      return { stores: createMysqlStores(p), close: () => p.close() };
    },
    async close() {
      await db.close();
      await d.drop();
    },
  };
}
