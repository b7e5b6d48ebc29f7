// Every migration is safe to run again and to run twice at once, on every dialect with a server here (and PGlite):
// - `npm run migrate` processes started together on a fresh database all exit 0, and each migration is recorded once
//   (they serialise on the dialect's migration lock);
// - with the ledger emptied (as if no migration had been recorded), rerunning every migration's body — by two
//   processes at once — changes nothing: the same columns, indexes, constraints and the same rows.
// The schema is read by the harness's own description query (ServerCapability.schemaSql).
import { spawn } from 'node:child_process';
import { describe, expect, it } from 'vitest';
import { newPglite } from '../support/pgliteTemplate.js';
import { serverDatabases } from '../support/dialects.js';
import { PG_SCHEMA_SQL } from '../support/pgHarness.js';
import { submit } from '../support/instances.js';
import { fromPglite, type PgDatabase } from '../../src/store/postgres/db.js';
import { createPostgresStores } from '../../src/store/postgres/index.js';
import { migratePostgres } from '../../src/store/postgres/migrate.js';
import { migrations } from '../../src/store/postgres/migrations/index.js';
import type { Stores } from '../../src/store/stores.js';

/** Tables whose rows a rerun must leave as they are (the ledger itself is refilled). */
const DATA_TABLES = ['submission_intents', 'submission_manager_partition_count', 'submission_manager_leases', 'submission_manager_lease_events',
  'submission_manager_execution_control', 'submission_manager_instances'];

type Sql = <R = Record<string, unknown>>(text: string, params?: unknown[]) => Promise<R[]>;

const describeSchema = async (sql: Sql, schemaSql: string) => (await sql<{ d: string }>(schemaSql)).map((r) => r.d);
const rowCounts = async (sql: Sql) => Object.fromEntries(await Promise.all(DATA_TABLES.map(async (t) =>
  [t, Number((await sql<{ n: number | string }>(`SELECT COUNT(*) AS n FROM ${t}`))[0]!.n)] as const)));
const ledger = async (sql: Sql) => (await sql<{ id: number | string }>('SELECT id FROM submission_manager_migrations ORDER BY id')).map((r) => Number(r.id));

/** Rows of several kinds: intents (one with a key), the recorded partition count, a lease, a pause flag. */
async function arrange(stores: Stores): Promise<void> {
  await stores.partitions.recordPartitionCount(2, 'rerun-test');
  for (let i = 0; i < 5; i++) await submit(stores, { i }, i === 0 ? { key: 'rerun-key' } : {});
  await stores.lease.tryAcquire('rerun-lease', 'rerun-holder', 60_000);
  await stores.ops.setPaused('rerun-lease', true, 'rerun-test', 'kept across a rerun');
}

function migrateCli(url: string): Promise<{ code: number | null; out: string }> {
  return new Promise((resolve) => {
    const p = spawn(process.execPath, ['dist/src/store/migrateCli.js'], { env: { ...process.env, DATABASE_URL: url } });
    let out = '';
    p.stdout.on('data', (d) => (out += d));
    p.stderr.on('data', (d) => (out += d));
    p.on('exit', (code) => resolve({ code, out }));
  });
}

describe.each(serverDatabases)('migrations run again and at once: $name', (server) => {
  it('three migrators on a fresh database all exit 0, each migration recorded once; with the ledger emptied, two reruns at once change nothing', async (t) => {
    const skip = server.unavailable();
    if (skip) return t.skip(skip);
    const db = await server.create();
    try {
      const first = await Promise.all([migrateCli(db.url), migrateCli(db.url), migrateCli(db.url)]);
      expect(first.map((r) => r.code), first.map((r) => r.out).join('\n')).toEqual([0, 0, 0]);
      const ids = await ledger(db.sql);
      expect(ids.length).toBeGreaterThan(0);
      expect(new Set(ids).size).toBe(ids.length);
      const stores = server.openStores(db.url, 10_000);
      try {
        await arrange(stores);
      } finally {
        await stores.close();
      }
      const schema = await describeSchema(db.sql, server.schemaSql);
      const rows = await rowCounts(db.sql);
      await db.sql('DELETE FROM submission_manager_migrations');
      const again = await Promise.all([migrateCli(db.url), migrateCli(db.url)]);
      expect(again.map((r) => r.code), again.map((r) => r.out).join('\n')).toEqual([0, 0]);
      // One of the two reran every migration (the other found them recorded once the lock was its own).
      expect(again.map((r) => r.out).join('\n')).toContain(`applied migrations: ${ids.join(', ')}`);
      expect(await ledger(db.sql)).toEqual(ids);
      expect(await describeSchema(db.sql, server.schemaSql)).toEqual(schema);
      expect(await rowCounts(db.sql)).toEqual(rows);
    } finally {
      await db.drop();
    }
  }, 120_000);
});

describe('migrations run again: pglite', () => {
  it('with the ledger emptied, rerunning every migration changes nothing', async () => {
    const db: PgDatabase = fromPglite(await newPglite());
    const sql: Sql = async (text, params) => (await db.query(text, params)).rows as never;
    try {
      expect((await migratePostgres(db)).applied).toEqual(migrations.map((m) => m.id));
      await arrange(createPostgresStores(db, 'pglite'));
      const schema = await describeSchema(sql, PG_SCHEMA_SQL);
      const rows = await rowCounts(sql);
      await db.query('DELETE FROM submission_manager_migrations');
      expect((await migratePostgres(db)).applied).toEqual(migrations.map((m) => m.id));
      expect(await describeSchema(sql, PG_SCHEMA_SQL)).toEqual(schema);
      expect(await rowCounts(sql)).toEqual(rows);
    } finally {
      await db.close();
    }
  });
});
