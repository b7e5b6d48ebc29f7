// Where the SQL Server suites run, and the server-level helpers the harnesses share (test/support/mssqlHarness.ts,
// test/support/migrationTargets.ts). Configured by
//   MSSQL_TEST_URL=mssql://sa:<password>@localhost:1433/master?trustServerCertificate=true   (SQL login), or
//   MSSQL_TEST_SERVER + MSSQL_TEST_DATABASE [+ MSSQL_TEST_CLIENT_ID]                       (Entra, Azure SQL)
// Unset → the SQL Server suites are skipped with one line. Set but unreachable → they fail.
import sql from 'mssql';
import type { DatabaseTarget } from '../../src/config.js';
import { openMssqlPool, type MssqlDatabase } from '../../src/store/mssql/index.js';
import { p, type SqlParam } from '../../src/store/mssql/params.js';

const env = process.env;

export function testTarget(): DatabaseTarget | null {
  if (env.MSSQL_TEST_URL) return { kind: 'mssql', url: env.MSSQL_TEST_URL };
  if (env.MSSQL_TEST_SERVER && env.MSSQL_TEST_DATABASE) {
    return { kind: 'mssqlEntra', server: env.MSSQL_TEST_SERVER, database: env.MSSQL_TEST_DATABASE, clientId: env.MSSQL_TEST_CLIENT_ID ?? null };
  }
  return null;
}

const STATEMENT_TIMEOUT_MS = 10_000;
export const open = (target: DatabaseTarget, poolMax: number, database?: string, statementTimeoutMs = STATEMENT_TIMEOUT_MS) =>
  openMssqlPool(target, { poolMax, statementTimeoutMs, appName: 'submission-manager-tests', database }, () => {});

/** Untyped test values → explicit types (tests only; src binds every parameter by hand). */
function inferParam(name: string, v: unknown): SqlParam {
  if (v === null || v === undefined) return { name, type: sql.NVarChar(sql.MAX), value: null };
  if (v instanceof Date) return p.datetime2(name, v);
  if (typeof v === 'boolean') return { name, type: sql.Bit(), value: v };
  if (typeof v === 'number') return Number.isInteger(v) ? p.bigint(name, v) : { name, type: sql.Float(), value: v };
  if (typeof v === 'bigint') return p.bigint(name, Number(v));
  return p.nvarcharMax(name, typeof v === 'string' ? v : JSON.stringify(v));
}

/** Raw SQL for tests: positional params bound as @p1…@pn; `$n` placeholders (PostgreSQL style) become @pn. */
export async function rawSql<R>(db: MssqlDatabase, text: string, params: unknown[] = []): Promise<R[]> {
  const sets = await db.run<R>({
    text: text.replace(/\$(\d+)\b/g, '@p$1'),
    params: params.map((v, i) => inferParam(`p${i + 1}`, v)),
  });
  return sets[0] ?? [];
}

export async function adminBatch(target: DatabaseTarget, text: string): Promise<void> {
  const admin = await open(target, 1);
  try {
    await admin.runBatch(text);
  } finally {
    await admin.close().catch(() => {});
  }
}

/** Drop a test database, best effort. SINGLE_USER kicks any straggling session; Azure SQL (EngineEdition 5) has no
 *  SINGLE_USER and drops anyway. */
export async function dropTestDatabase(target: DatabaseTarget, dbName: string): Promise<void> {
  await adminBatch(target, `IF DB_ID(N'${dbName}') IS NOT NULL
BEGIN
  IF CAST(SERVERPROPERTY('EngineEdition') AS int) <> 5
    EXEC(N'ALTER DATABASE [${dbName}] SET SINGLE_USER WITH ROLLBACK IMMEDIATE');
  EXEC(N'DROP DATABASE [${dbName}]');
END;`).catch(() => {});
}

/** READ_COMMITTED_SNAPSHOT of every test database: ON like Azure SQL, unless MSSQL_TEST_RCSI=off (SQL Server's default). */
export const mssqlRcsi = (): boolean => (env.MSSQL_TEST_RCSI ?? 'on').toLowerCase() !== 'off';

/** null when SQL Server is configured; otherwise the one line its suites are skipped with. */
export const mssqlUnavailable = (): string | null =>
  testTarget()
    ? null
    : 'SQL Server not configured: set MSSQL_TEST_URL=mssql://sa:<password>@localhost:1433/master?trustServerCertificate=true ' +
      '(or MSSQL_TEST_SERVER + MSSQL_TEST_DATABASE for Entra) to run this suite — see docs/sqlserver.md';
