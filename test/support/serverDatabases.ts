// The database servers the process-level system tests run against, one line each: a fresh database per test
// (the hosts migrate it concurrently at start), its URL for DATABASE_URL, raw SQL (`$n` placeholders, neutral
// SQL) for the test's own checks, and the dialect's stores on a pool of the test's own (through a proxy, say).
// Reachable → they run; unreachable → skipped locally, FAIL under CI=true.
import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { openMysqlPool } from '../../src/store/mysql/db.js';
import { createMysqlStores } from '../../src/store/mysql/index.js';
import { openPgPool } from '../../src/store/postgres/db.js';
import { createPostgresStores } from '../../src/store/postgres/index.js';
import type { Stores } from '../../src/store/stores.js';
import { createPgDatabase, type PgTestDatabase } from './localHostProcess.js';
import { MYSQL_TEST_URL } from './mysqlServer.js';
import { positional } from './mysqlHarness.js';

export interface ServerDatabase {
  name: 'postgres' | 'mysql';
  /** null = usable; otherwise why the suite is skipped. */
  unavailable(): string | null;
  create(): Promise<PgTestDatabase>;
  /** The dialect's stores on a new pool of two connections to `url` (not migrated; stores.close() ends the pool). */
  openStores(url: string, statementTimeoutMs: number): Stores;
}

/** A fresh database on the MySQL / MariaDB test server. */
export async function createMysqlDatabase(): Promise<PgTestDatabase> {
  const name = `sm_proc_${randomBytes(5).toString('hex')}`;
  const admin = openMysqlPool({ url: MYSQL_TEST_URL, max: 1, statementTimeoutMs: 10_000 });
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(MYSQL_TEST_URL);
  url.pathname = `/${name}`;
  const db = openMysqlPool({ url: url.toString(), max: 2, statementTimeoutMs: 10_000 });
  return {
    url: url.toString(),
    sql: async (text, params) => {
      const p = positional(text, params);
      return (await db.query(p.text, p.params)).rows as never[];
    },
    async drop() {
      await db.close().catch(() => {});
      await admin.query(`DROP DATABASE IF EXISTS ${name}`).catch(() => {});
      await admin.close();
    },
  };
}

export const serverDatabases: ServerDatabase[] = [
  { name: 'postgres', unavailable: () => inject('pgUnavailable') || null, create: createPgDatabase,
    openStores: (url, statementTimeoutMs) => createPostgresStores(openPgPool({ url, max: 2, statementTimeoutMs }, () => {}), 'postgres') },
  { name: 'mysql', unavailable: () => inject('mysqlUnavailable') || null, create: createMysqlDatabase,
    openStores: (url, statementTimeoutMs) => createMysqlStores(openMysqlPool({ url, max: 2, statementTimeoutMs }, () => {})) },
];
