// A table of realistic shape for the suites that check an operation costs what its rows cost (test/store/
// partitionLargeTable.test.ts), per dialect: many settled intents inserted by one set-based statement, with ids below
// every id the app makes (so a walk of the primary key from the start meets all of them before any open intent), and
// the rows the database examined while stores on one session of their own ran: PostgreSQL's per-transaction counters
// (pg_stat_get_xact_tuples_returned: rows read by sequential scans, entries returned by index scans, over the
// context's own tables and indexes), MySQL/MariaDB's session Handler_read_* counters (every row or entry a handler
// read, temporary tables included). Deterministic (no clock), so a bound on them is a test of the plan.
import type { Stores } from '../../src/store/stores.js';
import type { PgDatabase, PgQueryable } from '../../src/store/postgres/db.js';
import { createPostgresStores } from '../../src/store/postgres/index.js';
import type { MyDatabase } from '../../src/store/mysql/db.js';
import { createMysqlStores } from '../../src/store/mysql/index.js';

export type Examined = <T>(run: (stores: Stores) => Promise<T>) => Promise<{ value: T; rows: number }>;

const CONTRACT = JSON.stringify({ provider: { url: null }, payload: {}, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 20 } });

/** The statements that insert `n` succeeded intents settled a day ago, partition 0, ids settledId(1..n) (before any
 *  uuidv7 made now), then refresh the statistics, as autovacuum keeps them on a table that grew by this much. No
 *  parameters (n is a number, the contract a constant): they run through any raw-SQL helper. */
export function pgSeedSettledSql(n: number): string[] {
  return [`INSERT INTO submission_intents (intent_id, request_hash, contract, status, attempt_count, max_attempts, next_attempt_at,
      created_at, last_modified_at, partition_no)
    SELECT (lpad(to_hex(g), 8, '0') || '-0000-7000-8000-' || lpad(to_hex(g), 12, '0'))::uuid, repeat('0', 64), '${CONTRACT}'::jsonb, 'succeeded', 1, 3,
           x.t, x.t, x.t, 0
      FROM generate_series(1, ${Math.trunc(n)}) AS g, (SELECT clock_timestamp() - interval '1 day' AS t) AS x`, 'ANALYZE submission_intents'];
}

/** The id of the g-th settled intent the seed statements insert. */
export const settledId = (g: number) => `${g.toString(16).padStart(8, '0')}-0000-7000-8000-${g.toString(16).padStart(12, '0')}`;

/** Stores on one session inside one transaction (the stores' own transactions become savepoints), and the rows the
 *  database examined meanwhile. */
export function pgExamined(open: () => PgDatabase, name: 'pglite' | 'postgres'): Examined {
  const counted = async (tx: PgQueryable) => Number((await tx.query<{ n: string }>(`SELECT COALESCE(sum(pg_stat_get_xact_tuples_returned(c.oid)), 0) AS n
    FROM pg_class c WHERE c.relnamespace = current_schema()::regnamespace AND c.relkind IN ('r', 'i')`)).rows[0]!.n);
  return async (run) => {
    const db = open();
    try {
      return await db.transaction(async (tx) => {
        const inner: PgDatabase = {
          query: (text, params) => tx.query(text, params),
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
        return { value, rows: (await counted(tx)) - before };
      });
    } finally {
      await db.close();
    }
  };
}

const DIGITS = '(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)';

/** As pgSeedSettledSql (at most 1 000 000 rows): rows from a cross join of digit tables, one INSERT … SELECT. */
export function mysqlSeedSettledSql(n: number): string[] {
  const hex = (width: number) => `LPAD(LOWER(HEX(g)), ${width}, '0')`;
  return [`INSERT INTO submission_intents (intent_id, request_hash, contract, status, attempt_count, max_attempts, next_attempt_at,
      created_at, last_modified_at, partition_no)
    SELECT CONCAT(${hex(8)}, '-0000-7000-8000-', ${hex(12)}), REPEAT('0', 64), '${CONTRACT}', 'succeeded', 1, 3, t, t, t, 0
      FROM (SELECT 1 + a.d + 10 * b.d + 100 * c.d + 1000 * e.d + 10000 * f.d + 100000 * h.d AS g, DATE_SUB(UTC_TIMESTAMP(6), INTERVAL 1 DAY) AS t
              FROM ${['a', 'b', 'c', 'e', 'f', 'h'].map((x) => `${DIGITS} AS ${x}`).join(' CROSS JOIN ')}) AS r
     WHERE g <= ${Math.trunc(n)}`, 'ANALYZE TABLE submission_intents'];
}

/** Stores on a pool of one connection (one session), and the rows its handlers read meanwhile, less what reading
 *  the counters itself costs (measured on the same session just before). */
export function mysqlExamined(open: () => MyDatabase): Examined {
  const counted = async (db: MyDatabase) => (await db.query<{ Value: string }>("SHOW SESSION STATUS LIKE 'Handler_read%'")).rows
    .reduce((sum, r) => sum + Number(r.Value), 0);
  return async (run) => {
    const db = open();
    try {
      const a = await counted(db);
      const b = await counted(db);
      const value = await run(createMysqlStores(db));
      return { value, rows: (await counted(db)) - b - (b - a) };
    } finally {
      await db.close();
    }
  };
}
