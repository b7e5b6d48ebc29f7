// A table of realistic shape for the suites that check an operation costs what its rows cost (test/store/
// partitionLargeTable.test.ts), per dialect: many settled intents inserted by one set-based statement, with ids below
// every id the app makes (so a walk of the primary key from the start meets all of them before any open intent), and
// the rows the database examined while stores on one session of their own ran: PostgreSQL's per-transaction counters
// (pg_stat_get_xact_tuples_returned: rows read by sequential scans, entries returned by index scans, over the
// context's own tables and indexes), MySQL/MariaDB's session Handler_read_* counters (every row or entry a handler
// read, temporary tables included), and on PostgreSQL the buffer pages they read (pg_stat_get_xact_blocks_fetched: an
// index scan whose key is on a later column returns only its matches, yet reads every page). Deterministic (no clock),
// so a bound on them is a test of the plan.
import type { Stores } from '../../src/store/stores.js';
import type { PgDatabase, PgQueryable } from '../../src/store/postgres/db.js';
import { createPostgresStores } from '../../src/store/postgres/index.js';
import type { MyDatabase } from '../../src/store/mysql/db.js';
import { createMysqlStores } from '../../src/store/mysql/index.js';

/** `blocks`: buffer pages read (PostgreSQL); null where the dialect keeps no count of them per session (MySQL).
 *  `plans: true` (PostgreSQL): each tagged statement (`/* sm:<kind> *\/`) also runs once before under EXPLAIN ANALYZE in
 *  a savepoint rolled back (not counted in rows and blocks; the real statement then meets its dead row versions), and
 *  `planRows` sums the rows its plan nodes processed: every node's output rows and the rows its filters and join
 *  filters removed, times its loops (a nested loop rescanning a function per outer row counts each rescan). Null where
 *  not asked or not counted (MySQL). */
export type Examined = <T>(run: (stores: Stores) => Promise<T>, o?: { plans?: boolean }) =>
  Promise<{ value: T; rows: number; blocks: number | null; planRows: number | null }>;

interface PlanNode {
  'Actual Rows': number; 'Actual Loops': number; 'Rows Removed by Filter'?: number; 'Rows Removed by Join Filter'?: number;
  Plans?: PlanNode[];
}
const planRows = (p: PlanNode): number => (p['Actual Rows'] + (p['Rows Removed by Filter'] ?? 0) + (p['Rows Removed by Join Filter'] ?? 0))
  * p['Actual Loops'] + (p.Plans ?? []).reduce((n, c) => n + planRows(c), 0);

/** `status`: what the settled rows are ('failed' sorts before every open status, so an index leading with status
 *  holds them before the open rows); `analyze: false`: no statistics, as right after a burst (autovacuum's ANALYZE
 *  turned off on the tables, so none arrive during the test). */
export interface SeedOptions { status?: 'succeeded' | 'failed'; analyze?: boolean }

const CONTRACT = JSON.stringify({ provider: { url: null }, payload: {}, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 20 } });

/** The statements that insert `n` succeeded (o.status) intents settled a day ago, partition 0, ids settledId(1..n)
 *  (before any uuidv7 made now), then refresh the statistics, as autovacuum keeps them on a table that grew by this much
 *  (not with `analyze: false`). No
 *  parameters (n is a number, the contract a constant): they run through any raw-SQL helper. */
export function pgSeedSettledSql(n: number, o: SeedOptions = {}): string[] {
  const quiet = ['submission_intents', 'submission_attempts'].map((t) => `ALTER TABLE ${t} SET (autovacuum_enabled = false)`);
  return [...(o.analyze === false ? quiet : []), `INSERT INTO submission_intents (intent_id, request_hash, contract, status, attempt_count, max_attempts, next_attempt_at,
      created_at, last_modified_at, partition_no)
    SELECT (lpad(to_hex(g), 8, '0') || '-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, repeat('0', 64), '${CONTRACT}'::jsonb, '${o.status ?? 'succeeded'}', 1, 3,
           x.t, x.t, x.t, 0
      FROM generate_series(1, ${Math.trunc(n)}) AS g, (SELECT clock_timestamp() - interval '1 day' AS t) AS x`,
  ...(o.analyze === false ? [] : ['ANALYZE submission_intents'])];
}

/** The id of the g-th settled intent the seed statements insert. */
export const settledId = (g: number) => `${g.toString(16).padStart(8, '0')}-0000-7000-8000-${g.toString(16).padStart(12, '0')}`;

/** Stores on one session inside one transaction (the stores' own transactions become savepoints), and the rows the
 *  database examined meanwhile. */
export function pgExamined(open: () => PgDatabase, name: 'pglite' | 'postgres'): Examined {
  const counted = async (tx: PgQueryable) => (await tx.query<{ n: string; b: string }>(`SELECT COALESCE(sum(pg_stat_get_xact_tuples_returned(c.oid)), 0) AS n,
      COALESCE(sum(pg_stat_get_xact_blocks_fetched(c.oid)), 0) AS b
    FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'i')`)).rows[0]!;
  return async (run, o = {}) => {
    const db = open();
    try {
      return await db.transaction(async (tx) => {
        let planned = 0;
        const unseen = { n: 0, b: 0 };
        const plan = async (text: string, params?: unknown[]) => {
          const c0 = await counted(tx);
          await tx.query('SAVEPOINT planned');
          try {
            const r = await tx.query<{ 'QUERY PLAN': [{ Plan: PlanNode }] }>(`EXPLAIN (ANALYZE, FORMAT JSON) ${text}`, params);
            planned += planRows(r.rows[0]!['QUERY PLAN'][0].Plan);
          } finally {
            await tx.query('ROLLBACK TO SAVEPOINT planned');
          }
          const c1 = await counted(tx);
          unseen.n += Number(c1.n) - Number(c0.n);
          unseen.b += Number(c1.b) - Number(c0.b);
        };
        const inner: PgDatabase = {
          query: async (text, params) => {
            if (o.plans && text.startsWith('/* sm:')) await plan(text, params);
            return tx.query(text, params);
          },
          transaction: async (fn) => {
            await tx.query('SAVEPOINT examined');
            try {
              const v = await fn(tx);
              await tx.query('RELEASE SAVEPOINT examined');
              return v;
            } catch (e) {
              await tx.query('ROLLBACK TO SAVEPOINT examined');
              throw e;
            }
          },
          exec: async (text) => { await tx.query(text); },
          close: async () => {},
        };
        const before = await counted(tx);
        const value = await run(createPostgresStores(inner, name));
        const after = await counted(tx);
        return { value, rows: Number(after.n) - Number(before.n) - unseen.n, blocks: Number(after.b) - Number(before.b) - unseen.b,
          planRows: o.plans ? planned : null };
      });
    } finally {
      await db.close();
    }
  };
}

const DIGITS = '(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)';

/** As pgSeedSettledSql (at most 1 000 000 rows): rows from a cross join of digit tables, one INSERT … SELECT;
 *  `analyze: false` turns off InnoDB's automatic recalculation of the tables' statistics. */
export function mysqlSeedSettledSql(n: number, o: SeedOptions = {}): string[] {
  const hex = (width: number) => `LPAD(LOWER(HEX(g)), ${width}, '0')`;
  const quiet = ['submission_intents', 'submission_attempts'].map((t) => `ALTER TABLE ${t} STATS_AUTO_RECALC = 0`);
  return [...(o.analyze === false ? quiet : []), `INSERT INTO submission_intents (intent_id, request_hash, contract, status, attempt_count, max_attempts, next_attempt_at,
      created_at, last_modified_at, partition_no)
    SELECT CONCAT(${hex(8)}, '-0000-7000-8000-', ${hex(12)}), REPEAT('0', 64), '${CONTRACT}', '${o.status ?? 'succeeded'}', 1, 3, t, t, t, 0
      FROM (SELECT 1 + a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d + 100000 * h.d AS g, DATE_SUB(UTC_TIMESTAMP(6), INTERVAL 1 DAY) AS t
              FROM ${['a', 'b', 'c', 'e', 'f', 'h'].map((x) => `${DIGITS} AS ${x}`).join(' CROSS JOIN ')}) AS r
     WHERE g <= ${Math.trunc(n)}`, ...(o.analyze === false ? [] : ['ANALYZE TABLE submission_intents'])];
}

/** As pgSeedSettledSql on SQL Server: TOP (n) numbered rows of a cross join of sys.all_columns (ample for 10^6), one
 *  INSERT … SELECT; each id's hex from the number's big-endian bytes (CONVERT style 2: no 0x); `analyze: false` turns
 *  the automatic statistics of the two tables off (sp_autostats). */
export function mssqlSeedSettledSql(n: number, o: SeedOptions = {}): string[] {
  const hex = (bytes: number) => `LOWER(CONVERT(char(${2 * bytes}), CONVERT(binary(${bytes}), g), 2))`;
  const quiet = ['submission_intents', 'submission_attempts'].map((t) => `EXEC sp_autostats N'${t}', 'OFF'`);
  return [...(o.analyze === false ? quiet : []), `INSERT INTO submission_intents (intent_id, request_hash, contract, status, attempt_count, max_attempts, next_attempt_at,
      created_at, last_modified_at, partition_no)
    SELECT ${hex(4)} + '-0000-7000-8000-' + ${hex(6)}, REPLICATE('0', 64), N'${CONTRACT}', '${o.status ?? 'succeeded'}', 1, 3, x.t, x.t, x.t, 0
      FROM (SELECT TOP (${Math.trunc(n)}) CAST(ROW_NUMBER() OVER (ORDER BY (SELECT NULL)) AS bigint) AS g
              FROM sys.all_columns AS a CROSS JOIN sys.all_columns AS b) AS r
     CROSS JOIN (SELECT DATEADD(day, -1, SYSUTCDATETIME()) AS t) AS x`, ...(o.analyze === false ? [] : ['UPDATE STATISTICS submission_intents'])];
}

/** Stores on a pool of one connection (one session; and one for the pipelined transactions, the executor's start and
 *  completion: both are counted), and the rows their handlers read meanwhile, less what reading the counters itself
 *  costs (measured on the same sessions just before). */
export function mysqlExamined(open: () => MyDatabase): Examined {
  const READS = "SHOW SESSION STATUS LIKE 'Handler_read%'";
  const sum = (rows: Record<string, unknown>[]) => rows.reduce((n, r) => n + Number(r.Value), 0);
  const counted = async (db: MyDatabase) => sum((await db.query(READS)).rows);
  const countedPipelined = async (db: MyDatabase) => sum((await db.pipelined((tx) => tx.commit([{ text: READS }])))[0]!.rows);
  const since = async (db: MyDatabase) => {
    const [a, b, pa, pb] = [await counted(db), await counted(db), await countedPipelined(db), await countedPipelined(db)];
    return async () => (await counted(db)) - b - (b - a) + (await countedPipelined(db)) - pb - (pb - pa);
  };
  return async (run) => {
    const db = open();
    try {
      const read = await since(db);
      const value = await run(createMysqlStores(db));
      return { value, rows: await read(), blocks: null, planRows: null };
    } finally {
      await db.close();
    }
  };
}
