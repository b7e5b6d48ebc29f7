// The layout generation migration (PostgreSQL m014, MySQL m009): additive. A count row recorded before it gets
// generation 0; the previous release's statements (which never name the column) keep working on the new schema;
// running the migration again changes nothing (a raised generation stays). Run on PGlite, the PostgreSQL server and
// MariaDB/MySQL; SQL Server's twin is checked without a server (test/unit/mssqlMigrations.test.ts).
import { randomBytes } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { PGlite } from '@electric-sql/pglite';
import { fromPglite, openPgPool } from '../../src/store/postgres/db.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { migrations as pgMigrations } from '../../src/store/postgres/migrations/index.js';
import { m014LayoutGeneration } from '../../src/store/postgres/migrations/m014LayoutGeneration.js';
import { openMysqlPool } from '../../src/store/mysql/db.js';
import { migrateMysql } from '../../src/store/mysql/migrate.js';
import { migrations as myMigrations } from '../../src/store/mysql/migrations/index.js';
import { m009LayoutGeneration } from '../../src/store/mysql/migrations/m009LayoutGeneration.js';
import { splitStatements } from '../../src/store/sqlScript.js';
import { PG_TEST_URL } from '../support/pgServer.js';
import { MYSQL_TEST_URL } from '../support/mysqlServer.js';

/** What one dialect needs here: plain statements, its migrations up to an id, and the new migration's text. */
interface Db {
  query(sql: string): Promise<{ rows: Record<string, unknown>[] }>;
  migrateTo(id: number | null): Promise<number[]>;
  rerun(): Promise<void>;
  close(): Promise<void>;
}

const pgDb = (db: ReturnType<typeof fromPglite>, close: () => Promise<void>): Db => ({
  query: (sql) => db.query(sql),
  migrateTo: async (id) => (await migratePostgres(db, id === null ? pgMigrations : pgMigrations.filter((m) => m.id <= id))).applied,
  rerun: async () => void (await db.query(m014LayoutGeneration)),
  close,
});

async function open(where: string): Promise<Db | string> {
  if (where === 'pglite') {
    const db = fromPglite(await PGlite.create());
    return pgDb(db, () => db.close());
  }
  if (where === 'postgres') {
    const skip = inject('pgUnavailable');
    if (skip) return skip;
    const schema = `m_${randomBytes(6).toString('hex')}`;
    const admin = openPgPool({ url: PG_TEST_URL, max: 1, statementTimeoutMs: 10_000 });
    await admin.query(`CREATE SCHEMA ${schema}`);
    const db = openPgPool({ url: PG_TEST_URL, max: 1, statementTimeoutMs: 10_000, schema });
    return pgDb(db, async () => {
      await db.close();
      await admin.query(`DROP SCHEMA ${schema} CASCADE`);
      await admin.close();
    });
  }
  const skip = inject('mysqlUnavailable');
  if (skip) return skip;
  const name = `m_${randomBytes(6).toString('hex')}`;
  const admin = openMysqlPool({ url: MYSQL_TEST_URL, max: 1, statementTimeoutMs: 10_000 });
  await admin.query(`CREATE DATABASE ${name}`);
  const db = openMysqlPool({ url: MYSQL_TEST_URL, database: name, max: 2, statementTimeoutMs: 10_000 });
  return {
    query: (sql) => db.query(sql),
    migrateTo: async (id) => (await migrateMysql(db, id === null ? myMigrations : myMigrations.filter((m) => m.id <= id))).applied,
    rerun: async () => {
      for (const stmt of splitStatements(m009LayoutGeneration)) await db.query(stmt);
    },
    close: async () => {
      await db.close();
      await admin.query(`DROP DATABASE IF EXISTS ${name}`);
      await admin.close();
    },
  };
}

describe('the layout generation migration', () => {
  it.each([['pglite', 13, 14], ['postgres', 13, 14], ['mysql', 8, 9]])('%s: additive, and running it again changes nothing', async (where, before, id, t) => {
    const db = await open(where);
    if (typeof db === 'string') return t.skip(db);
    try {
      const gen = async () => (await db.query('SELECT partition_count AS c, layout_generation AS g FROM submission_manager_partition_count'))
        .rows.map((r) => [Number(r.c), Number(r.g)]);
      await db.migrateTo(before);
      // The previous release recorded a count.
      await db.query("INSERT INTO submission_manager_partition_count (id, partition_count, recorded_at, recorded_by) VALUES (1, 2, CURRENT_TIMESTAMP, 'old')");
      expect(await db.migrateTo(null)).toEqual([id]);
      expect(await gen()).toEqual([[2, 0]]);
      // The previous release's switch (it never names the column) still works, and leaves the generation as it is.
      await db.query("UPDATE submission_manager_partition_count SET partition_count = 4, recorded_by = 'old-changer' WHERE id = 1");
      expect(await gen()).toEqual([[4, 0]]);
      await db.query('UPDATE submission_manager_partition_count SET layout_generation = 5 WHERE id = 1');
      await db.rerun();
      expect(await db.migrateTo(null)).toEqual([]);
      expect(await gen()).toEqual([[4, 5]]);
      // A row inserted by the previous release's first start gets the default.
      await db.query('DELETE FROM submission_manager_partition_count');
      await db.query("INSERT INTO submission_manager_partition_count (id, partition_count, recorded_at, recorded_by) VALUES (1, 3, CURRENT_TIMESTAMP, 'old')");
      expect(await gen()).toEqual([[3, 0]]);
    } finally {
      await db.close();
    }
  });
});
