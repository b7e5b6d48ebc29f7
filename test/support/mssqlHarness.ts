// SQL Server harness for the shared contract suites. Configured by
//   MSSQL_TEST_URL=mssql://sa:<password>@localhost:1433/master?trustServerCertificate=true   (SQL login), or
//   MSSQL_TEST_SERVER + MSSQL_TEST_DATABASE [+ MSSQL_TEST_CLIENT_ID]                       (Entra, Azure SQL)
// Unset → the suite is skipped with one line (the only suite allowed to skip). Set but unreachable → it fails.
// Each context is a fresh database (CREATE DATABASE t_xxx, migrated, dropped at close). By default the
// database runs READ_COMMITTED_SNAPSHOT ON like Azure SQL; MSSQL_TEST_RCSI=off keeps SQL Server's default.
import { randomBytes } from 'node:crypto';
import sql from 'mssql';
import type { DatabaseTarget } from '../../src/config.js';
import type { Stores } from '../../src/store/stores.js';
import { createMssqlStores, openMssqlPool, type MssqlDatabase } from '../../src/store/mssql/index.js';
import { fencedTransaction } from '../../src/store/mssql/fence.js';
import { p, type SqlParam } from '../../src/store/mssql/params.js';
import type { DialectContext, DialectHarness } from './dialects.js';

const env = process.env;

function testTarget(): DatabaseTarget | null {
  if (env.MSSQL_TEST_URL) return { kind: 'mssql', url: env.MSSQL_TEST_URL };
  if (env.MSSQL_TEST_SERVER && env.MSSQL_TEST_DATABASE) {
    return { kind: 'mssqlEntra', server: env.MSSQL_TEST_SERVER, database: env.MSSQL_TEST_DATABASE, clientId: env.MSSQL_TEST_CLIENT_ID ?? null };
  }
  return null;
}

const STATEMENT_TIMEOUT_MS = 10_000;
const open = (target: DatabaseTarget, poolMax: number, database?: string) =>
  openMssqlPool(target, { poolMax, statementTimeoutMs: STATEMENT_TIMEOUT_MS, appName: 'submission-manager-tests', database }, () => {});

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
async function rawSql<R>(db: MssqlDatabase, text: string, params: unknown[] = []): Promise<R[]> {
  const sets = await db.run<R>({
    text: text.replace(/\$(\d+)\b/g, '@p$1'),
    params: params.map((v, i) => inferParam(`p${i + 1}`, v)),
  });
  return sets[0] ?? [];
}

async function adminBatch(target: DatabaseTarget, text: string): Promise<void> {
  const admin = await open(target, 1);
  try {
    await admin.runBatch(text);
  } finally {
    await admin.close().catch(() => {});
  }
}

export const mssql: DialectHarness = {
  name: 'mssql',
  unavailable: () =>
    testTarget()
      ? null
      : 'SQL Server not configured: set MSSQL_TEST_URL=mssql://sa:<password>@localhost:1433/master?trustServerCertificate=true ' +
        '(or MSSQL_TEST_SERVER + MSSQL_TEST_DATABASE for Entra) to run this suite — see docs/sqlserver.md',
  async createContext(): Promise<DialectContext> {
    const target = testTarget();
    if (!target) throw new Error('SQL Server not configured');
    const dbName = `t_${randomBytes(6).toString('hex')}`; // generated, safe to inline
    const rcsi = (env.MSSQL_TEST_RCSI ?? 'on').toLowerCase() !== 'off';
    await adminBatch(target, `CREATE DATABASE [${dbName}];`);
    if (rcsi) await adminBatch(target, `ALTER DATABASE [${dbName}] SET READ_COMMITTED_SNAPSHOT ON;`);
    const admin = await open(target, 4, dbName);
    await createMssqlStores(admin).migrate();
    const opened = new Map<Stores, MssqlDatabase>();
    return {
      name: 'mssql',
      async openStores(opts) {
        const db = await open(target, opts?.poolMax ?? 4, dbName);
        const stores = createMssqlStores(db);
        opened.set(stores, db);
        return stores;
      },
      async fencedHold(stores, token, hold, onFenced) {
        const db = opened.get(stores) ?? admin;
        return fencedTransaction(db, token, 'probe', async (tx) => {
          onFenced?.();
          await hold;
          const [rows = []] = await tx.run<{ seq: string }>({
            text: `INSERT INTO submission_execution_audit (lease_name, lease_epoch, holder_id, [action], rows_written, [at])
OUTPUT inserted.seq VALUES (@lease_name, @lease_epoch, @holder_id, 'probe', 1, SYSUTCDATETIME());`,
            params: [p.varchar('lease_name', 64, token.leaseName), p.bigint('lease_epoch', token.leaseEpoch),
              p.varchar('holder_id', 128, token.holderId)],
          });
          return { value: Number(rows[0]!.seq), rowsWritten: 0 };
        });
      },
      async auditLog() {
        const rows = await rawSql<{ seq: string; lease_epoch: string; action: string }>(admin,
          'SELECT seq, lease_epoch, [action] AS action FROM submission_execution_audit ORDER BY seq;');
        return rows.map((x) => ({ seq: Number(x.seq), leaseEpoch: Number(x.lease_epoch), action: x.action }));
      },
      sql: (text, params) => rawSql(admin, text, params),
      async close() {
        for (const s of opened.keys()) await s.close().catch(() => {});
        await admin.close().catch(() => {});
        // SINGLE_USER kicks any straggling session; Azure SQL (EngineEdition 5) has no SINGLE_USER and drops anyway.
        await adminBatch(target, `IF DB_ID(N'${dbName}') IS NOT NULL
BEGIN
  IF CAST(SERVERPROPERTY('EngineEdition') AS int) <> 5
    EXEC(N'ALTER DATABASE [${dbName}] SET SINGLE_USER WITH ROLLBACK IMMEDIATE');
  EXEC(N'DROP DATABASE [${dbName}]');
END;`).catch(() => {});
      },
    };
  },
};
