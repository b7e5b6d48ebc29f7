// Migrations: idempotent, and safe with concurrent migrators (they serialise on the schema's lock).
import { randomBytes } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { newPglite } from '../support/pgliteTemplate.js';
import { fromPglite, openPgPool, type PgDatabase } from '../../src/store/postgres/db.js';
import { createPostgresStores } from '../../src/store/postgres/index.js';
import { migratePostgres, migratePostgresIfNeeded, schemaVersion } from '../../src/store/postgres/migrate.js';
import { migrations } from '../../src/store/postgres/migrations/index.js';
import { PG_TEST_URL } from '../support/pgServer.js';
import { LOAD_SCHEDULED } from '../../src/store/postgres/executionStore.js';
import { NIL_UUID } from '../../src/store/rowMapping.js';

const TABLES = ['submission_manager_leases', 'submission_manager_lease_events', 'submission_intents',
  'submission_attempts', 'submission_execution_audit', 'submission_manager_migrations', 'submission_manager_execution_control',
  'submission_manager_redrives', 'submission_manager_redriven_intents',
  'submission_manager_handover_requests', 'submission_manager_provider_state', 'submission_manager_maintenance_state',
  'submission_manager_partition_count', 'submission_manager_instances', 'submission_manager_partition_changes'];

/** The spec's data model, column by column: (table, column) → PostgreSQL type as information_schema names it. */
const SPEC_COLUMNS: [string, string, string][] = [
  ['submission_manager_leases', 'lease_name', 'character varying(64)'],
  ['submission_manager_leases', 'holder_id', 'character varying(128)'],
  ['submission_manager_leases', 'lease_epoch', 'bigint'],
  ['submission_manager_leases', 'acquired_at', 'timestamp with time zone'],
  ['submission_manager_leases', 'renewed_at', 'timestamp with time zone'],
  ['submission_manager_leases', 'expires_at', 'timestamp with time zone'],
  ['submission_intents', 'last_modified_at', 'timestamp with time zone'],
];

async function columnTypes(db: { query<R>(t: string, p?: unknown[]): Promise<{ rows: R[] }> }) {
  const r = await db.query<{ t: string; c: string; type: string; nullable: string }>(
    `SELECT table_name AS t, column_name AS c, is_nullable AS nullable,
            data_type || COALESCE('(' || character_maximum_length || ')', '') AS type
       FROM information_schema.columns WHERE table_schema = current_schema()`);
  return new Map(r.rows.map((x) => [`${x.t}.${x.c}`, `${x.type} ${x.nullable === 'NO' ? 'NOT NULL' : 'NULL'}`]));
}

describe('postgres migrations', () => {
  it('pglite: the spec column types (varchar(64), varchar(128), bigint, timestamptz), all NOT NULL; lease_name the key', async () => {
    const lite = await newPglite();
    const db = fromPglite(lite);
    await migratePostgres(db);
    const types = await columnTypes(db);
    for (const [t, c, type] of SPEC_COLUMNS) expect(types.get(`${t}.${c}`), `${t}.${c}`).toBe(`${type} NOT NULL`);
    const pk = await db.query<{ c: string }>(`SELECT a.attname AS c FROM pg_index i
      JOIN pg_attribute a ON a.attrelid = i.indrelid AND a.attnum = ANY(i.indkey)
     WHERE i.indrelid = 'submission_manager_leases'::regclass AND i.indisprimary`);
    expect(pk.rows.map((x) => x.c)).toEqual(['lease_name']);
    await db.close();
  });

  it('postgres server: the spec column types', async (t) => {
    const skip = inject('pgUnavailable');
    if (skip) return t.skip(skip);
    const schema = `m_${randomBytes(6).toString('hex')}`;
    const admin = openPgPool({ url: PG_TEST_URL, max: 1, statementTimeoutMs: 10_000 });
    await admin.query(`CREATE SCHEMA ${schema}`);
    const db = openPgPool({ url: PG_TEST_URL, max: 1, statementTimeoutMs: 10_000, schema });
    try {
      await migratePostgres(db);
      const types = await columnTypes(db);
      for (const [tb, c, type] of SPEC_COLUMNS) expect(types.get(`${tb}.${c}`), `${tb}.${c}`).toBe(`${type} NOT NULL`);
    } finally {
      await db.close();
      await admin.query(`DROP SCHEMA ${schema} CASCADE`);
      await admin.close();
    }
  });

  it('pglite: applies once, then is a no-op', async () => {
    const lite = await newPglite();
    const db = fromPglite(lite);
    expect((await migratePostgres(db)).applied).toEqual(migrations.map((m) => m.id));
    expect((await migratePostgres(db)).applied).toEqual([]);
    const r = await db.query<{ table_name: string }>(
      `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema()`);
    expect(r.rows.map((x) => x.table_name).sort()).toEqual([...TABLES].sort());
    await db.close();
  });

  it('postgres server: 4 concurrent migrators on a fresh schema all succeed, each migration applied once', async (t) => {
    const skip = inject('pgUnavailable');
    if (skip) return t.skip(skip);
    const schema = `m_${randomBytes(6).toString('hex')}`;
    const admin = openPgPool({ url: PG_TEST_URL, max: 1, statementTimeoutMs: 10_000 });
    await admin.query(`CREATE SCHEMA ${schema}`);
    const pools = Array.from({ length: 4 }, () => openPgPool({ url: PG_TEST_URL, max: 1, statementTimeoutMs: 10_000, schema }));
    try {
      const results = await Promise.all(pools.map((p) => migratePostgres(p)));
      const all = results.flatMap((r) => r.applied);
      expect(all.sort()).toEqual(migrations.map((m) => m.id).sort());
      const rows = await pools[0]!.query<{ n: number }>('SELECT count(*)::int AS n FROM submission_manager_migrations');
      expect(rows.rows[0]!.n).toBe(migrations.length);
    } finally {
      for (const p of pools) await p.close();
      await admin.query(`DROP SCHEMA ${schema} CASCADE`);
      await admin.close();
    }
  });
});

describe('npm run migrate (CLI)', () => {
  it('two migrate processes at once against a fresh database both exit 0', async (t) => {
    const skip = inject('pgUnavailable');
    if (skip) return t.skip(skip);
    const { spawn } = await import('node:child_process');
    const pg = (await import('pg')).default;
    const dbName = `m_${randomBytes(6).toString('hex')}`;
    const admin = new pg.Client({ connectionString: PG_TEST_URL });
    await admin.connect();
    await admin.query(`CREATE DATABASE ${dbName}`);
    const url = PG_TEST_URL.replace(/\/[^/?]*(\?|$)/, `/${dbName}$1`);
    try {
      const run = () => new Promise<{ code: number | null; out: string }>((resolve) => {
        const p = spawn(process.execPath, ['dist/src/store/migrateCli.js'], { env: { ...process.env, DATABASE_URL: url } });
        let out = '';
        p.stdout.on('data', (d) => (out += d));
        p.stderr.on('data', (d) => (out += d));
        p.on('exit', (code) => resolve({ code, out }));
      });
      const [a, b] = await Promise.all([run(), run()]);
      expect([a.code, b.code]).toEqual([0, 0]);
      expect([a.out, b.out].join('\n')).toMatch(/applied migrations: 1/);
      const bad = await new Promise<{ code: number | null; out: string }>((resolve) => {
        const p = spawn(process.execPath, ['dist/src/store/migrateCli.js'], { env: { ...process.env, DATABASE_URL: url, LEASE_DURATION_MS: 'soon' } });
        let out = '';
        p.stderr.on('data', (d) => (out += d));
        p.on('exit', (code) => resolve({ code, out }));
      });
      expect(bad.code).toBe(2);
      expect(bad.out).toMatch(/LEASE_DURATION_MS/);
    } finally {
      await admin.query(`DROP DATABASE IF EXISTS ${dbName} WITH (FORCE)`);
      await admin.end();
    }
  });

  it('pglite: a cold start on a current schema costs one version check; a fresh one reports 0', async () => {
    const db = fromPglite(await newPglite());
    expect(await schemaVersion(db)).toBe(0);
    await migratePostgresIfNeeded(db);
    expect(await schemaVersion(db)).toBe(Math.max(...migrations.map((m) => m.id)));
    let opened = 0;
    const out = await migratePostgresIfNeeded(db, async () => {
      opened++;
      return db;
    });
    expect(out.applied).toEqual([]);
    expect(opened).toBe(0); // no dedicated connection when nothing is missing
    await db.close();
  });

  it('postgres server: a migration longer than the request timeout completes on its dedicated connection', async (t) => {
    const skip = inject('pgUnavailable');
    if (skip) return t.skip(skip);
    const schema = `m_${randomBytes(6).toString('hex')}`;
    const admin = openPgPool({ url: PG_TEST_URL, max: 1, statementTimeoutMs: 10_000 });
    await admin.query(`CREATE SCHEMA ${schema}`);
    const requestPool = openPgPool({ url: PG_TEST_URL, max: 2, statementTimeoutMs: 300, schema });
    const slow = [...migrations, { id: 99, name: 'slow', sql: 'SELECT pg_sleep(1);' }];
    try {
      // Under the request timeout it could never complete…
      await expect(migratePostgres(requestPool, slow)).rejects.toMatchObject({ code: '57014' });
      // …on the dedicated connection (its own timeout) it does; the ordinary pool only ran the version check.
      const out = await migratePostgresIfNeeded(requestPool, async () => openPgPool({ url: PG_TEST_URL, max: 1, statementTimeoutMs: 10_000, schema }), slow);
      expect(out.applied).toEqual(slow.map((m) => m.id));
      expect(await schemaVersion(requestPool)).toBe(99);
    } finally {
      await requestPool.close();
      await admin.query(`DROP SCHEMA ${schema} CASCADE`);
      await admin.close();
    }
  });

  // The store's own statement: every column it reads is in the index (status as a constant), so a page is an
  // index-only scan — no heap read per row once the visibility map is set (1 M pending: 16.5 s → 5.8 s of reads).
  it('pglite: loadScheduled pages are an index-only range scan on ix_intents_partition_scheduled with no sort', async () => {
    const db = fromPglite(await newPglite());
    await migratePostgres(db);
    await db.exec(`INSERT INTO submission_intents (intent_id, request_hash, contract, status, attempt_count, max_attempts, next_attempt_at, created_at, last_modified_at)
      SELECT gen_random_uuid(), repeat('0', 64), '{}'::jsonb, CASE WHEN g % 10 = 0 THEN 'scheduled' ELSE 'succeeded' END, 0, 3, now(), now(), now()
        FROM generate_series(1, 2000) g`);
    await db.exec('UPDATE submission_intents SET partition_no = 1 WHERE intent_id < \'80000000-0000-0000-0000-000000000000\'');
    await db.exec('VACUUM ANALYZE submission_intents');
    const plan = await db.transaction(async (tx) => {
      await tx.query('SET LOCAL enable_seqscan = off');
      const r = await tx.query<{ 'QUERY PLAN': string }>(`EXPLAIN ${LOAD_SCHEDULED}`, [NIL_UUID, 1000, 1]);
      return r.rows.map((x) => x['QUERY PLAN']).join('\n');
    });
    expect(plan).toMatch(/Index Only Scan using ix_intents_partition_scheduled/);
    expect(plan).toMatch(/Index Cond: \(\(partition_no = '?1'?(::smallint)?\) AND \(intent_id >/);
    expect(plan).not.toMatch(/\bSort\b/);
    await db.close();
  });
});

describe('migration 9 (partitions, issue 25): on a database that already holds intents', () => {
  const before = migrations.filter((m) => m.id < 9);

  /** A fresh schema on the PostgreSQL server; closing the database drops it. */
  async function serverSchema(): Promise<PgDatabase> {
    const schema = `m_${randomBytes(6).toString('hex')}`;
    const admin = openPgPool({ url: PG_TEST_URL, max: 1, statementTimeoutMs: 10_000 });
    await admin.query(`CREATE SCHEMA ${schema}`);
    const db = openPgPool({ url: PG_TEST_URL, max: 1, statementTimeoutMs: 10_000, schema });
    return Object.assign(Object.create(db) as PgDatabase, {
      close: async () => {
        await db.close();
        await admin.query(`DROP SCHEMA ${schema} CASCADE`);
        await admin.close();
      },
    });
  }

  /** Migrate to 8, add `n` intents, migrate to the end: what the partitions migration did to them. */
  async function upgrade(db: PgDatabase, n: number) {
    await migratePostgres(db, before);
    if (n > 0) {
      await db.query(`INSERT INTO submission_intents (intent_id, request_hash, contract, status, attempt_count, max_attempts,
          next_attempt_at, created_at, last_modified_at)
        SELECT gen_random_uuid(), repeat('0', 64), '{}'::jsonb, 'scheduled', 0, 3, now(), now(), now() FROM generate_series(1, $1::int)`, [n]);
    }
    expect((await migratePostgres(db, migrations.filter((m) => m.id <= 9))).applied).toEqual([9]);
    const rows = await db.query<{ p: number; k: string | null; n: number }>(
      'SELECT partition_no AS p, partition_key AS k, count(*)::int AS n FROM submission_intents GROUP BY 1, 2');
    const count = await db.query<{ c: number; by: string }>('SELECT partition_count AS c, recorded_by AS by FROM submission_manager_partition_count');
    const indexes = await db.query<{ name: string; def: string }>(
      `SELECT indexname AS name, indexdef AS def FROM pg_indexes WHERE schemaname = current_schema() AND indexname LIKE 'ix_intents_partition_%' ORDER BY 1`);
    return { rows: rows.rows, count: count.rows, indexes: indexes.rows };
  }

  // No partition-first index yet: migration 10 brings them (m009's header says why).
  const EXPECTED_INDEXES: unknown[] = [];

  it('pglite: on a database without intents no count is recorded (the first process records its own)', async () => {
    const db = fromPglite(await newPglite());
    try {
      expect((await upgrade(db, 0)).count).toEqual([]);
      expect((await createPostgresStores(db, 'pglite').partitions.recordPartitionCount(4, 'first')).count).toBe(4);
    } finally {
      await db.close();
    }
  });

  it.for(['pglite', 'postgres server'])('%s: existing intents become partition 0; the count 1', async (where, t) => {
    const skip = where === 'pglite' ? undefined : inject('pgUnavailable');
    if (skip) return t.skip(skip);
    const db = where === 'pglite' ? fromPglite(await newPglite()) : await serverSchema();
    try {
      const out = await upgrade(db, 20);
      expect(out.rows).toEqual([{ p: 0, k: null, n: 20 }]);
      expect(out.count).toEqual([{ c: 1, by: 'migration' }]);
      expect(out.indexes).toEqual(EXPECTED_INDEXES);
      expect((await createPostgresStores(db, 'postgres').partitions.recordPartitionCount(4, 'new-process')).count).toBe(1);
    } finally {
      await db.close();
    }
  });
});

describe('migration 10 (partition indexes, issue 25)', () => {
  it('pglite: replaces the refresh, rebuild and due indexes (no twins beside them)', async () => {
    const db = fromPglite(await newPglite());
    try {
      const indexes = async () => (await db.query<{ name: string; def: string }>(
        `SELECT indexname AS name, regexp_replace(indexdef, '^.* USING btree ', '') AS def FROM pg_indexes
          WHERE schemaname = current_schema() AND tablename = 'submission_intents' AND indexname LIKE 'ix_intents%' ORDER BY 1`)).rows;
      await migratePostgres(db, migrations.filter((m) => m.id < 10));
      expect((await indexes()).map((r) => r.name)).toEqual(['ix_intents_due', 'ix_intents_modified', 'ix_intents_scheduled']);
      expect((await migratePostgres(db, migrations.filter((m) => m.id <= 10))).applied).toEqual([10]);
      expect(await indexes()).toEqual([
        { name: 'ix_intents_partition_modified', def: '(partition_no, last_modified_at, intent_id)' },
        { name: 'ix_intents_partition_scheduled',
          def: "(partition_no, intent_id) INCLUDE (next_attempt_at, attempt_count, max_attempts, last_modified_at) WHERE ((status)::text = 'scheduled'::text)" },
        { name: 'ix_intents_status_partition_due', def: '(status, partition_no, next_attempt_at)' },
      ]);
    } finally {
      await db.close();
    }
  });
});
