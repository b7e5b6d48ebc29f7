// Empty databases to migrate, one kind per dialect (DialectHarness.migrations; the contract is
// test/store/migrationContract.test.ts). Each migrator runs on a pool of its own through the dialect's cold-start
// entry (migrate…IfNeeded, what stores.migrate() calls), and the lock a test holds is the one those migrators take:
// PostgreSQL's transaction-scoped advisory lock on the schema, MySQL's GET_LOCK on the database, SQL Server's
// transaction-owned sp_getapplock.
import { randomBytes } from 'node:crypto';
import type { Stores } from '../../src/store/stores.js';
import { splitStatements } from '../../src/store/sqlScript.js';
import { fromPglite, openPgPool, type PgQueryable } from '../../src/store/postgres/db.js';
import { createPostgresStores } from '../../src/store/postgres/index.js';
import { MIGRATION_LOCK_SQL, migratePostgresIfNeeded } from '../../src/store/postgres/migrate.js';
import { migrations as pgMigrations } from '../../src/store/postgres/migrations/index.js';
import { openMysqlPool, type MyQueryable } from '../../src/store/mysql/db.js';
import { createMysqlStores } from '../../src/store/mysql/index.js';
import { MIGRATION_LOCK, migrateMysqlIfNeeded } from '../../src/store/mysql/migrate.js';
import { migrations as myMigrations } from '../../src/store/mysql/migrations/index.js';
import type { MssqlRunner } from '../../src/store/mssql/db.js';
import { createMssqlStores } from '../../src/store/mssql/index.js';
import { migrateMssqlIfNeeded, migrateQueries, splitBatches } from '../../src/store/mssql/migrate.js';
import { migrations as msMigrations } from '../../src/store/mssql/migrations/index.js';
import type { MigrationCapability } from './dialects.js';
import { holdTransaction, type HeldLock } from './heldLock.js';
import { newPglite } from './pgliteTemplate.js';
import { PG_TEST_URL } from './pgServer.js';
import { MYSQL_TEST_URL, positional } from './mysqlServer.js';
import { adminBatch, dropTestDatabase, open as openMssql, rawSql, testTarget } from './mssqlServer.js';
import { MSSQL_SCHEMA_SQL, MYSQL_SCHEMA_SQL, PG_SCHEMA_SQL } from './schemaSnapshot.js';

const MIGRATOR_TIMEOUT_MS = 60_000;
const scratchName = () => `m_${randomBytes(6).toString('hex')}`; // generated, safe to inline
const upTo = <M extends { id: number }>(list: readonly M[], id?: number) => list.filter((m) => id === undefined || m.id <= id);
const statementsOf = <M extends { id: number; sql: string }>(list: readonly M[], id: number, split: (sql: string) => string[]) => {
  const m = list.find((x) => x.id === id);
  if (!m) throw new Error(`no migration ${id}`);
  return split(m.sql);
};
/** `run` on a pool of its own, closed after (each migrator is a process of its own, on its own connection). */
async function onOwnPool<D extends { close(): Promise<void> }, T>(open: () => D | Promise<D>, run: (db: D) => Promise<T>): Promise<T> {
  const db = await open();
  try {
    return await run(db);
  } finally {
    await db.close();
  }
}
const counts = <M extends { id: number; sql: string }>(list: readonly M[], split: (sql: string) => string[]) =>
  list.map((m) => ({ id: m.id, statements: split(m.sql).length }));

/** PGlite: a database of its own per test (one session: migrators queue for it, so no lock to hold from outside). */
export const pgliteMigrations: MigrationCapability = {
  schemaSql: PG_SCHEMA_SQL,
  migrations: counts(pgMigrations, splitStatements),
  statementCommits: false,
  async create() {
    const lite = await newPglite();
    const db = fromPglite(lite, { closeOnClose: false });
    return {
      migrate: async (id) => (await migratePostgresIfNeeded(db, undefined, upTo(pgMigrations, id))).applied,
      openStores: async () => createPostgresStores(db, 'pglite'),
      sql: async (text, params) => (await db.query(text, params)).rows as never[],
      runStatements: (id, n) => db.transaction(async (tx) => {
        for (const s of statementsOf(pgMigrations, id, splitStatements).slice(0, n)) await tx.query(s);
      }),
      drop: () => lite.close(),
    };
  },
};

/** PostgreSQL: a schema of its own per test (the migration lock is per schema). */
export const postgresMigrations: MigrationCapability = {
  schemaSql: PG_SCHEMA_SQL,
  migrations: counts(pgMigrations, splitStatements),
  statementCommits: false,
  async create() {
    const schema = scratchName();
    const pool = (max: number, s: string = schema) => openPgPool({ url: PG_TEST_URL, max, statementTimeoutMs: MIGRATOR_TIMEOUT_MS, schema: s }, () => {});
    const bootstrap = pool(1, 'public');
    await bootstrap.query(`CREATE SCHEMA ${schema}`).finally(() => bootstrap.close());
    const admin = pool(2);
    return {
      migrate: (id) => onOwnPool(() => pool(1), async (db) => (await migratePostgresIfNeeded(db, undefined, upTo(pgMigrations, id))).applied),
      openStores: async () => createPostgresStores(pool(2), 'postgres'),
      sql: async (text, params) => (await admin.query(text, params)).rows as never[],
      async holdMigrationLock(): Promise<HeldLock> {
        const db = pool(1);
        let pid = 0;
        const release = await holdTransaction<PgQueryable>((fn) => db.transaction(fn), async (tx) => {
          pid = Number((await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
          await tx.query(MIGRATION_LOCK_SQL);
        }, () => db.close());
        const waiters = async () => Number((await admin.query<{ n: number }>(
          'SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [pid])).rows[0]!.n);
        return { release, waiters, get session() { return pid; } };
      },
      runStatements: (id, n) => admin.transaction(async (tx) => {
        for (const s of statementsOf(pgMigrations, id, splitStatements).slice(0, n)) await tx.query(s);
      }),
      async drop() {
        await admin.query(`DROP SCHEMA ${schema} CASCADE`).catch(() => {});
        await admin.close();
      },
    };
  },
};

/** MySQL / MariaDB: a database of its own per test (the migration lock's name is the database's). */
export const mysqlMigrations: MigrationCapability = {
  schemaSql: MYSQL_SCHEMA_SQL,
  migrations: counts(myMigrations, splitStatements),
  statementCommits: true,
  async create() {
    const name = scratchName();
    const pool = (max: number, database?: string) =>
      openMysqlPool({ url: MYSQL_TEST_URL, max, statementTimeoutMs: MIGRATOR_TIMEOUT_MS, database: database ?? name });
    const bootstrap = openMysqlPool({ url: MYSQL_TEST_URL, max: 1, statementTimeoutMs: MIGRATOR_TIMEOUT_MS });
    await bootstrap.query(`CREATE DATABASE ${name} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`).finally(() => bootstrap.close());
    const admin = pool(2);
    return {
      migrate: (id) => onOwnPool(() => pool(1), async (db) => (await migrateMysqlIfNeeded(db, undefined, upTo(myMigrations, id), { lockTimeoutMs: MIGRATOR_TIMEOUT_MS })).applied),
      openStores: async () => createMysqlStores(pool(2)),
      async sql(text, params) {
        const p = positional(text, params);
        return (await admin.query(p.text, p.params)).rows as never[];
      },
      async holdMigrationLock(): Promise<HeldLock> {
        const db = pool(1);
        let id = 0;
        const release = await holdTransaction<MyQueryable>((fn) => db.session(fn), async (s) => {
          id = Number((await s.query<{ id: number }>('SELECT CONNECTION_ID() AS id')).rows[0]!.id);
          const got = await s.query<{ ok: number }>(`SELECT GET_LOCK(${MIGRATION_LOCK}, 10) AS ok`);
          if (Number(got.rows[0]?.ok) !== 1) throw new Error('holdMigrationLock: GET_LOCK refused');
        }, () => db.close());
        // Sessions of this database waiting in GET_LOCK (processlist state 'User lock'; this query's own text is excluded).
        const waiters = async () => Number((await admin.query<{ n: number }>(`SELECT COUNT(*) AS n FROM information_schema.processlist
          WHERE db = DATABASE() AND id NOT IN (CONNECTION_ID(), ?) AND info LIKE '%GET\\_LOCK(%'`, [id])).rows[0]!.n);
        return { release, waiters, get session() { return id; } };
      },
      runStatements: (id, n) => admin.session(async (s) => {
        for (const stmt of statementsOf(myMigrations, id, splitStatements).slice(0, n)) await s.query(stmt);
      }),
      async drop() {
        await admin.query(`DROP DATABASE IF EXISTS ${name}`).catch(() => {});
        await admin.close();
      },
    };
  },
};

/** SQL Server (where MSSQL_TEST_URL points): a database of its own per test (sp_getapplock is database-scoped). */
export const mssqlMigrations: MigrationCapability = {
  schemaSql: MSSQL_SCHEMA_SQL,
  migrations: counts(msMigrations, splitBatches),
  statementCommits: false,
  async create() {
    const target = testTarget();
    if (!target) throw new Error('SQL Server not configured');
    const name = scratchName();
    const pool = (max: number) => openMssql(target, max, name, MIGRATOR_TIMEOUT_MS);
    await adminBatch(target, `CREATE DATABASE [${name}];`);
    // READ_COMMITTED_SNAPSHOT as the contract suites run it (on, like Azure SQL, unless MSSQL_TEST_RCSI=off).
    const rcsi = (process.env.MSSQL_TEST_RCSI ?? 'on').toLowerCase() !== 'off';
    const admin = await (rcsi ? adminBatch(target, `ALTER DATABASE [${name}] SET READ_COMMITTED_SNAPSHOT ON;`) : Promise.resolve())
      .then(() => pool(2))
      .catch(async (e: unknown) => {
        await dropTestDatabase(target, name);
        throw e;
      });
    return {
      migrate: (id) => onOwnPool(() => pool(1), async (db) => (await migrateMssqlIfNeeded(db, undefined, upTo(msMigrations, id), { lockTimeoutMs: MIGRATOR_TIMEOUT_MS })).applied),
      openStores: async () => createMssqlStores(await pool(2)),
      sql: (text, params) => rawSql(admin, text, params),
      async holdMigrationLock(): Promise<HeldLock> {
        const db = await pool(1);
        let spid = 0;
        const release = await holdTransaction<MssqlRunner>((fn) => db.transaction(fn), async (tx) => {
          const [rows = []] = await tx.run<{ spid: number }>({ text: 'SELECT @@SPID AS spid;', params: [] });
          spid = Number(rows[0]!.spid);
          await tx.run(migrateQueries.lock(10_000));
        }, () => db.close());
        const waiters = async () => Number((await rawSql<{ n: number }>(admin, `SELECT COUNT(*) AS n FROM sys.dm_tran_locks
          WHERE resource_type = N'APPLICATION' AND request_status = N'WAIT' AND resource_database_id = DB_ID();`))[0]!.n);
        return { release, waiters, get session() { return spid; } };
      },
      runStatements: (id, n) => admin.transaction(async (tx) => {
        for (const batch of statementsOf(msMigrations, id, splitBatches).slice(0, n)) await tx.runBatch(batch);
      }),
      async drop() {
        await admin.close().catch(() => {});
        await dropTestDatabase(target, name);
      },
    };
  },
};
