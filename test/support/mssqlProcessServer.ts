// SQL Server for the process-level tests (ServerCapability in test/support/dialects.ts): a fresh database per test on
// the server MSSQL_TEST_URL points at, with READ_COMMITTED_SNAPSHOT as the contexts have it (MSSQL_TEST_RCSI), its
// mssql:// URL for the hosts' DATABASE_URL, raw SQL for the test's own checks, and rows held locked. A SQL login only:
// the hosts are given a DATABASE_URL, and Entra (MSSQL_TEST_SERVER) has no URL form.
import { randomBytes } from 'node:crypto';
import type { DatabaseTarget } from '../../src/config.js';
import { createMssqlStores, openMssqlPool, type MssqlDatabase } from '../../src/store/mssql/index.js';
import type { MssqlRunner } from '../../src/store/mssql/db.js';
import { p } from '../../src/store/mssql/params.js';
import type { ServerCapability } from './dialects.js';
import type { PgTestDatabase } from './localHostProcess.js';
import { holdTransaction } from './heldLock.js';
import { mssqlSeedSettledSql } from './largeTable.js';
import { adminBatch, dropTestDatabase, mssqlRcsi, mssqlUnavailable, open, rawSql } from './mssqlServer.js';

const APP_NAME = 'submission-manager-tests';

/** null when the process-level tests can run on SQL Server; otherwise the one line they are skipped with. */
export function mssqlProcessUnavailable(): string | null {
  if (process.env.MSSQL_TEST_URL) return null;
  return mssqlUnavailable()
    ?? 'SQL Server process-level tests need a SQL login URL: set MSSQL_TEST_URL (the hosts get DATABASE_URL; Entra has no URL form) — see docs/sqlserver.md';
}

const adminTarget = (): Extract<DatabaseTarget, { kind: 'mssql' }> => {
  const url = process.env.MSSQL_TEST_URL;
  if (!url) throw new Error(mssqlProcessUnavailable()!);
  return { kind: 'mssql', url };
};

const openUrl = (url: string, poolMax: number, statementTimeoutMs: number): Promise<MssqlDatabase> =>
  openMssqlPool({ kind: 'mssql', url }, { poolMax, statementTimeoutMs, appName: APP_NAME }, () => {});

/** A fresh database on the test server (the hosts migrate it concurrently at start); its URL names the port always. */
async function createMssqlProcessDatabase(): Promise<PgTestDatabase> {
  const target = adminTarget();
  const name = `sm_proc_${randomBytes(5).toString('hex')}`; // generated, safe to inline
  await adminBatch(target, `CREATE DATABASE [${name}];`);
  let db: MssqlDatabase | null = null;
  try {
    if (mssqlRcsi()) await adminBatch(target, `ALTER DATABASE [${name}] SET READ_COMMITTED_SNAPSHOT ON;`);
    db = await open(target, 2, name, 120_000); // the test's own statements, a large seed among them
  } catch (e) {
    // Nothing will call drop(): drop the database here, or every failed setup leaves one behind.
    await db?.close().catch(() => {});
    await dropTestDatabase(target, name);
    throw e;
  }
  const opened = db;
  const url = new URL(target.url);
  url.pathname = `/${name}`;
  if (!url.port) url.port = '1433';
  return {
    url: url.toString(),
    sql: (text, params) => rawSql(opened, text, params),
    async drop() {
      await opened.close().catch(() => {});
      await dropTestDatabase(target, name);
    },
  };
}

export const mssqlServerCapability: ServerCapability = {
  unavailable: mssqlProcessUnavailable,
  create: createMssqlProcessDatabase,
  openStores: async (url, statementTimeoutMs) => createMssqlStores(await openUrl(url, 2, statementTimeoutMs)),
  dbTimeSql: (secondsAgo = 0) => (secondsAgo ? `DATEADD(second, -${secondsAgo}, SYSUTCDATETIME())` : 'SYSUTCDATETIME()'),
  seedSettledSql: (n) => mssqlSeedSettledSql(n),
  async holdRowLock(db, table, column, keys, mode = 'exclusive') {
    // UPDLOCK + HOLDLOCK: U locks to commit, as the product's own locking reads take them (writers and those readers
    // wait; plain reads do not). Shared: S locks to commit (writers wait; other lockers do not).
    const hints = mode === 'shared' ? 'HOLDLOCK, ROWLOCK' : 'UPDLOCK, HOLDLOCK, ROWLOCK';
    const pool = await openUrl(db.url, 1, 300_000);
    let spid = 0;
    const release = await holdTransaction<MssqlRunner>((fn) => pool.transaction(fn), async (tx) => {
      const sets = await tx.run<{ spid?: number; x?: number }>({
        text: `SET NOCOUNT ON;
SELECT @@SPID AS spid;
SELECT 1 AS x FROM ${table} WITH (${hints}) WHERE ${column} IN (${keys.map((_, i) => `@k${i}`).join(', ')});`,
        // Typed as the key columns are (integers, varchar identifiers), so each key is a seek that locks its row only.
        params: keys.map((k, i) => (typeof k === 'number' ? p.bigint(`k${i}`, k) : p.varchar(`k${i}`, 256, k))),
      });
      spid = Number(sets[0]?.[0]?.spid);
      const found = sets[1]?.length ?? 0;
      if (found !== keys.length) throw new Error(`holdRowLock: ${found} of ${keys.length} rows of ${table} found`);
    }, () => pool.close());
    const waiters = async () => Number((await db.sql<{ n: number }>(
      'SELECT COUNT(*) AS n FROM sys.dm_exec_requests WHERE blocking_session_id = $1', [spid]))[0]!.n);
    return { release, waiters, get session() { return spid; } };
  },
};
