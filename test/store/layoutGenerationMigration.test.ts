// Additive migrations, each run on PGlite, the PostgreSQL server and MariaDB/MySQL (SQL Server's twins are checked
// without a server: test/unit/mssqlMigrations.test.ts):
// - the layout generation (PostgreSQL m014, MySQL m009): a count row recorded before it gets generation 0; the
//   previous release's statements (which never name the column) keep working on the new schema; running the
//   migration again changes nothing (a raised generation stays);
// - the large-table change (PostgreSQL m015, MySQL m010): a change row the previous release recorded gets no catch-up
//   cursor, and its statements keep working; PostgreSQL gets the partial index of the failed rows; running it again
//   changes nothing;
// - the change reports (PostgreSQL m016, MySQL m011): a change row the previous release recorded gets failed_steps 0
//   and no cancel; its statements keep working; a change cancelled by this release is state 'completed' to them (not
//   active: their requests and layout reads pass it by); running it again changes nothing;
// - the prepare guard (PostgreSQL m020, MySQL m014): a change requested before it (requested_release set, no copies)
//   the previous release's preparing batch still writes; one requested with the copies it refuses; running it again
//   changes nothing and keeps the constraint.
import { randomBytes } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { newPglite } from '../support/pgliteTemplate.js';
import { fromPglite, openPgPool } from '../../src/store/postgres/db.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { migrations as pgMigrations } from '../../src/store/postgres/migrations/index.js';
import { m014LayoutGeneration } from '../../src/store/postgres/migrations/m014LayoutGeneration.js';
import { m015LargeTableChange } from '../../src/store/postgres/migrations/m015LargeTableChange.js';
import { m016ChangeReports } from '../../src/store/postgres/migrations/m016ChangeReports.js';
import { m020PrepareGuard } from '../../src/store/postgres/migrations/m020PrepareGuard.js';
import { openMysqlPool } from '../../src/store/mysql/db.js';
import { migrateMysql } from '../../src/store/mysql/migrate.js';
import { migrations as myMigrations } from '../../src/store/mysql/migrations/index.js';
import { m009LayoutGeneration } from '../../src/store/mysql/migrations/m009LayoutGeneration.js';
import { m010LargeTableChange } from '../../src/store/mysql/migrations/m010LargeTableChange.js';
import { m011ChangeReports } from '../../src/store/mysql/migrations/m011ChangeReports.js';
import { m014PrepareGuard } from '../../src/store/mysql/migrations/m014PrepareGuard.js';
import { splitStatements } from '../../src/store/sqlScript.js';
import { PG_TEST_URL } from '../support/pgServer.js';
import { MYSQL_TEST_URL } from '../support/mysqlServer.js';

/** What one dialect needs here: plain statements, its migrations up to an id, and a migration's text run again. */
interface Db {
  query(sql: string): Promise<{ rows: Record<string, unknown>[] }>;
  migrateTo(id: number | null): Promise<number[]>;
  rerun(migration: 'layout' | 'large' | 'reports' | 'guard'): Promise<void>;
  close(): Promise<void>;
}

const pgDb = (db: ReturnType<typeof fromPglite>, close: () => Promise<void>): Db => ({
  query: (sql) => db.query(sql),
  migrateTo: async (id) => (await migratePostgres(db, id === null ? pgMigrations : pgMigrations.filter((m) => m.id <= id))).applied,
  rerun: async (m) => void (await db.exec({ layout: m014LayoutGeneration, large: m015LargeTableChange, reports: m016ChangeReports, guard: m020PrepareGuard }[m])),
  close,
});

async function open(where: string): Promise<Db | string> {
  if (where === 'pglite') {
    const db = fromPglite(await newPglite());
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
    rerun: async (m) => {
      for (const stmt of splitStatements({ layout: m009LayoutGeneration, large: m010LargeTableChange, reports: m011ChangeReports, guard: m014PrepareGuard }[m])) await db.query(stmt);
    },
    close: async () => {
      await db.close();
      await admin.query(`DROP DATABASE IF EXISTS ${name}`);
      await admin.close();
    },
  };
}

/** One test per dialect: a fresh database handed to `body`, which applies `before`, then the migration `id`. */
function additive(cases: [string, number, number][], body: (db: Db, before: number, id: number, where: string) => Promise<void>): void {
  it.for<[string, number, number]>(cases)('%s: additive, and running it again changes nothing', async ([where, before, id], t) => {
    const db = await open(where);
    if (typeof db === 'string') return t.skip(db);
    try {
      await body(db, before, id, where);
    } finally {
      await db.close();
    }
  });
}

/** The previous release's insert of change `n` in `state`, with the `extra` columns and their values. */
const changeSql = (n: number, state: string, extra: [string, string][] = []) =>
  `INSERT INTO submission_manager_partition_changes (change_id, from_count, to_count, state, requested_at, requested_by${extra.map(([c]) => `, ${c}`).join('')})
    VALUES ('0190a5b2-7c3d-7abc-8def-0123456789a${n}', 2, 4, '${state}', CURRENT_TIMESTAMP, 'old'${extra.map(([, v]) => `, ${v}`).join('')})`;

describe('the layout generation migration', () => {
  additive([['pglite', 13, 14], ['postgres', 13, 14], ['mysql', 8, 9]], async (db, before, id) => {
    const gen = async () => (await db.query('SELECT partition_count AS c, layout_generation AS g FROM submission_manager_partition_count'))
      .rows.map((r) => [Number(r.c), Number(r.g)]);
    await db.migrateTo(before);
    // The previous release recorded a count.
    await db.query("INSERT INTO submission_manager_partition_count (id, partition_count, recorded_at, recorded_by) VALUES (1, 2, CURRENT_TIMESTAMP, 'old')");
    expect(await db.migrateTo(id)).toEqual([id]);
    expect(await gen()).toEqual([[2, 0]]);
    // The previous release's switch (it never names the column) still works, and leaves the generation as it is.
    await db.query("UPDATE submission_manager_partition_count SET partition_count = 4, recorded_by = 'old-changer' WHERE id = 1");
    expect(await gen()).toEqual([[4, 0]]);
    await db.query('UPDATE submission_manager_partition_count SET layout_generation = 5 WHERE id = 1');
    await db.rerun('layout');
    expect(await db.migrateTo(id)).toEqual([]);
    expect(await gen()).toEqual([[4, 5]]);
    // A row inserted by the previous release's first start gets the default.
    await db.query('DELETE FROM submission_manager_partition_count');
    await db.query("INSERT INTO submission_manager_partition_count (id, partition_count, recorded_at, recorded_by) VALUES (1, 3, CURRENT_TIMESTAMP, 'old')");
    expect(await gen()).toEqual([[3, 0]]);
  });
});

describe('the large-table change migration', () => {
  const change = (n: number, state: string) => changeSql(n, state, [['prepare_cursor', "'0190a5b2-7c3d-7abc-8def-000000000001'"], ['rows_moved', '7']]);
  additive([['pglite', 14, 15], ['postgres', 14, 15], ['mysql', 9, 10]], async (db, before, id, where) => {
    await db.migrateTo(before);
    await db.query(change(1, 'completed')); // the previous release recorded a change
    expect(await db.migrateTo(id)).toEqual([id]);
    const rows = async () => (await db.query('SELECT change_id, prepare_cursor, rows_moved, catch_up_cursor FROM submission_manager_partition_changes ORDER BY change_id'))
      .rows.map((r) => [String(r.change_id).slice(-1), String(r.prepare_cursor).slice(-1), Number(r.rows_moved), r.catch_up_cursor]);
    expect(await rows()).toEqual([['1', '1', 7, null]]);
    // The previous release's statements (which never name the column) keep working.
    await db.query(change(2, 'preparing'));
    await db.query("UPDATE submission_manager_partition_changes SET state = 'pending', rows_moved = rows_moved + 1 WHERE state = 'preparing'");
    expect(await rows()).toEqual([['1', '1', 7, null], ['2', '1', 8, null]]);
    await db.rerun('large');
    expect(await db.migrateTo(id)).toEqual([]);
    expect(await rows()).toEqual([['1', '1', 7, null], ['2', '1', 8, null]]);
    if (where !== 'mysql') {
      const ix = await db.query("SELECT indexdef FROM pg_indexes WHERE indexname = 'ix_intents_failed' AND schemaname = current_schema()");
      expect(ix.rows.map((r) => r.indexdef)).toEqual([expect.stringMatching(/\(intent_id\) WHERE \(\(status\)::text = 'failed'/)]);
    }
  });
});

describe('the change-reports migration', () => {
  const change = (n: number, state: string) => changeSql(n, state);
  additive([['pglite', 15, 16], ['postgres', 15, 16], ['mysql', 10, 11]], async (db, before, id) => {
    await db.migrateTo(before);
    await db.query(change(1, 'completed')); // the previous release recorded a change
    expect(await db.migrateTo(id)).toEqual([id]);
    const rows = async () => (await db.query('SELECT change_id, state, failed_steps, last_step_error, cancelled_at FROM submission_manager_partition_changes ORDER BY change_id'))
      .rows.map((r) => [String(r.change_id).slice(-1), r.state, Number(r.failed_steps), r.last_step_error, r.cancelled_at]);
    expect(await rows()).toEqual([['1', 'completed', 0, null, null]]);
    // The previous release's statements (which never name the columns) keep working.
    await db.query(change(2, 'preparing'));
    await db.query("UPDATE submission_manager_partition_changes SET state = 'pending' WHERE state = 'preparing'");
    expect(await rows()).toEqual([['1', 'completed', 0, null, null], ['2', 'pending', 0, null, null]]);
    // This release's cancel: state completed with cancelled_at, so the previous release's active read passes it by.
    await db.query("UPDATE submission_manager_partition_changes SET state = 'completed', cancelled_at = CURRENT_TIMESTAMP WHERE state = 'pending'");
    expect((await db.query("SELECT change_id FROM submission_manager_partition_changes WHERE state <> 'completed'")).rows).toEqual([]);
    await db.query(change(3, 'preparing')); // and it may record the next change (one active at most)
    await db.rerun('reports');
    expect(await db.migrateTo(id)).toEqual([]);
    expect((await rows()).map((r) => r.slice(0, 3))).toEqual([['1', 'completed', 0], ['2', 'completed', 0], ['3', 'preparing', 0]]);
  });
});

describe('the prepare-guard migration', () => {
  const CURSOR = "'0190a5b2-7c3d-7abc-8def-000000000001'";
  // The previous release's preparing batch: its moves counted, its cursor forward, the pass ended (no copy named).
  const oldBatch = (n: number) => `UPDATE submission_manager_partition_changes SET rows_moved = rows_moved + 1,
    prepare_cursor = '0190a5b2-7c3d-7abc-8def-000000000002', state = 'pending', prepared_at = CURRENT_TIMESTAMP
    WHERE change_id = '0190a5b2-7c3d-7abc-8def-0123456789a${n}'`;
  additive([['pglite', 19, 20], ['postgres', 19, 20], ['mysql', 13, 14]], async (db, before, id) => {
    await db.migrateTo(before);
    // A change requested before the migration by a release that set requested_release (m018's guard only).
    await db.query(changeSql(1, 'preparing', [['requested_release', "'0.2.0'"], ['prepare_cursor', CURSOR], ['rows_moved', '7']]));
    expect(await db.migrateTo(id)).toEqual([id]);
    const rows = async () => (await db.query(`SELECT change_id, state, rows_moved, release_rows_moved, release_prepare_cursor, release_prepared_at
      FROM submission_manager_partition_changes ORDER BY change_id`)).rows
      .map((r) => [String(r.change_id).slice(-1), r.state, Number(r.rows_moved), r.release_rows_moved === null ? null : Number(r.release_rows_moved), r.release_prepare_cursor, r.release_prepared_at]);
    expect(await rows()).toEqual([['1', 'preparing', 7, null, null, null]]);
    await db.query(oldBatch(1));
    await db.query("UPDATE submission_manager_partition_changes SET state = 'completed' WHERE state = 'pending'");
    // Requested with the copies (as this release's request writes them): the previous release's batch is refused.
    await db.query(changeSql(2, 'preparing', [['requested_release', "'0.2.0'"], ['release_rows_moved', '0']]));
    await expect(db.query(oldBatch(2))).rejects.toThrow(/ck_partition_changes_prepare_guard/);
    const after = [['1', 'completed', 8, null, null, null], ['2', 'preparing', 0, 0, null, null]];
    expect(await rows()).toEqual(after);
    await db.rerun('guard');
    expect(await db.migrateTo(id)).toEqual([]);
    await expect(db.query(oldBatch(2))).rejects.toThrow(/ck_partition_changes_prepare_guard/);
    expect(await rows()).toEqual(after);
  });
});
