// The campaign's database on the servers other than PostgreSQL (cluster.ts keeps PostgreSQL's): a fresh database per
// run, raw SQL (`$n` placeholders) on a small pool of the runner's own, dropped at the end, and the SQL the runner
// itself needs in each server's terms (database now, a time column as epoch milliseconds, the first start after a time).
import { randomBytes } from 'node:crypto';
import { openMysqlPool } from '../../src/store/mysql/db.js';
import { MYSQL_TEST_URL, positional } from '../support/mysqlServer.js';
import { adminBatch, dropTestDatabase, mssqlRcsi, open as openMssql, rawSql } from '../support/mssqlServer.js';
import type { ChaosDb } from './cluster.js';

type FirstStartAfter = (sql: ChaosDb['sql']) => ChaosDb['firstStartAfter'];

/** What `--db mssql` needs, said when it is missing. */
export const MSSQL_CHAOS_NEEDS = '--db mssql needs MSSQL_TEST_URL=mssql://sa:<password>@<host>:1433/master?trustServerCertificate=true ' +
  '(a SQL login that may create databases; the hosts get DATABASE_URL) — see docs/sqlserver.md';

/** SQL Server: times are datetime2(7) UTC; epoch milliseconds through microseconds (DATEDIFF_BIG), back through days
 *  and the milliseconds within the day (DATEADD takes an int). */
const EPOCH = "CAST('1970-01-01' AS datetime2(7))";
const fromEpochMs = (x: string) =>
  `DATEADD(millisecond, CAST(CAST(${x} AS bigint) % 86400000 AS int), DATEADD(day, CAST(CAST(${x} AS bigint) / 86400000 AS int), ${EPOCH}))`;
export const MSSQL_CHAOS_SQL = {
  now: 'SYSUTCDATETIME()',
  epochMs: (col: string) => `(CAST(DATEDIFF_BIG(microsecond, ${EPOCH}, ${col}) AS float) / 1000)`,
  firstStartAfter: `SELECT (CAST(DATEDIFF_BIG(microsecond, ${EPOCH}, MIN([at])) AS float) / 1000) AS t FROM submission_execution_audit
        WHERE [action] = 'start_attempts' AND [at] > ${fromEpochMs('$1')}
          AND NOT (holder_id = $2 AND [at] < ${fromEpochMs('$3')})`,
};

/** The same on the MariaDB server (its sessions pinned to UTC, so UNIX_TIMESTAMP/FROM_UNIXTIME are UTC). */
export async function createMariaChaosDb(firstStartAfter: FirstStartAfter): Promise<ChaosDb> {
  const name = `sm_chaos_${randomBytes(5).toString('hex')}`;
  const admin = () => openMysqlPool({ url: MYSQL_TEST_URL, max: 1, statementTimeoutMs: 10_000 });
  const a = admin();
  await a.query(`CREATE DATABASE ${name}`).finally(() => a.close());
  const u = new URL(MYSQL_TEST_URL);
  u.pathname = `/${name}`;
  const pool = openMysqlPool({ url: u.toString(), max: 3, statementTimeoutMs: 10_000 });
  const sql: ChaosDb['sql'] = async (text, params) => {
    const p = positional(text, params);
    return (await pool.query(p.text, p.params)).rows as never[];
  };
  return {
    name, url: u.toString(), sql, firstStartAfter: firstStartAfter(sql),
    async drop() {
      await pool.close().catch(() => {});
      for (let i = 0; ; i++) {
        const c = admin();
        try {
          await c.query(`DROP DATABASE IF EXISTS ${name}`);
          return;
        } catch (e) {
          if (i >= 10) throw e; // the server may be restarting
          await new Promise((r) => setTimeout(r, 1_000));
        } finally {
          await c.close().catch(() => {});
        }
      }
    },
  };
}

/** The same on the SQL Server MSSQL_TEST_URL points at, READ_COMMITTED_SNAPSHOT as MSSQL_TEST_RCSI says (ON by
 *  default, like Azure SQL); the hosts' URL names the port always (their proxies forward to it). */
export async function createMssqlChaosDb(firstStartAfter: FirstStartAfter): Promise<ChaosDb> {
  const adminUrl = process.env.MSSQL_TEST_URL;
  if (!adminUrl) throw new Error(MSSQL_CHAOS_NEEDS);
  const target = { kind: 'mssql', url: adminUrl } as const;
  const name = `sm_chaos_${randomBytes(5).toString('hex')}`; // generated, safe to inline
  await adminBatch(target, `CREATE DATABASE [${name}];`);
  let pool: Awaited<ReturnType<typeof openMssql>>;
  try {
    if (mssqlRcsi()) await adminBatch(target, `ALTER DATABASE [${name}] SET READ_COMMITTED_SNAPSHOT ON;`);
    pool = await openMssql(target, 3, name);
  } catch (e) {
    await dropTestDatabase(target, name);
    throw e;
  }
  const u = new URL(adminUrl);
  u.pathname = `/${name}`;
  if (!u.port) u.port = '1433';
  const sql: ChaosDb['sql'] = (text, params) => rawSql(pool, text, params);
  return {
    name, url: u.toString(), sql, firstStartAfter: firstStartAfter(sql),
    async drop() {
      await pool.close().catch(() => {});
      await dropTestDatabase(target, name);
    },
  };
}

/** null when the campaign's SQL Server answers; otherwise why not. */
export async function checkMssqlServer(): Promise<string | null> {
  const url = process.env.MSSQL_TEST_URL;
  if (!url) return MSSQL_CHAOS_NEEDS;
  try {
    const db = await openMssql({ kind: 'mssql', url }, 1);
    await db.close();
    return null;
  } catch (e) {
    return `SQL Server not reachable at ${url.replace(/\/\/[^@/]*@/, '//')}: ${(e as Error).message}`;
  }
}
