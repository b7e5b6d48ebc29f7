// PostgreSQL-family harnesses for the shared suites: PGlite (embedded, one session) and the PostgreSQL server.
// Each context is its own schema, migrated, dropped at close. Listed in test/support/dialects.ts.
import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import type { PGlite } from '@electric-sql/pglite';
import { newPglite } from './pgliteTemplate.js';
import type { Stores } from '../../src/store/stores.js';
import type { IntentStatus } from '../../src/store/intentPorts.js';
import {
  INTENT_COLS, toAttempt as toPgAttempt, toIntent as toPgIntent,
  type AttemptDbRow as PgAttemptDbRow, type IntentDbRow as PgIntentDbRow,
} from '../../src/store/postgres/rows.js';
import { pgExamined, pgSeedSettledSql } from './largeTable.js';
import { fromPglite, openPgPool, type PgDatabase, type PgQueryable } from '../../src/store/postgres/db.js';
import { holdTransaction } from './heldLock.js';
import { createPostgresStores } from '../../src/store/postgres/index.js';
import { PgIntentStore } from '../../src/store/postgres/intentStore.js';
import { fencedTransaction } from '../../src/store/postgres/fence.js';
import type { DialectContext, DialectHarness, SqlFaults } from './dialects.js';
import { createPgDatabase } from './localHostProcess.js';
import { PG_TEST_URL } from './pgServer.js';
import { pgliteMigrations, postgresMigrations } from './migrationTargets.js';

const schemaName = () => `t_${randomBytes(6).toString('hex')}`;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** Full-precision UTC text of a timestamptz expression: 'YYYY-MM-DD HH24:MI:SS.US' (26 characters). */
const UTC_US = (expr: string) => `to_char((${expr}) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')`;

interface PgContextOptions {
  name: 'pglite' | 'postgres';
  admin: PgDatabase;
  open: (max: number, statementTimeoutMs?: number) => PgDatabase;
  cleanup: () => Promise<void>;
  /** A dedicated connection that can hold a transaction open while others commit (null: PGlite). */
  separateConnection: (() => PgDatabase) | null;
}

function pgContext(o: PgContextOptions): DialectContext {
  const { admin, open } = o;
  const opened = new Map<Stores, PgDatabase>();
  let logged: string | null = null;
  const q = async <R>(text: string, params?: unknown[]) => (await admin.query<R>(text, params)).rows;
  return {
    name: o.name,
    timeTextWidth: 26,
    snapshotReads: true,
    async openStores(opts) {
      const db = open(opts?.poolMax ?? 4, opts?.statementTimeoutMs);
      const stores = createPostgresStores(db, o.name);
      opened.set(stores, db);
      return stores;
    },
    async fencedHold(stores, token, hold, onFenced) {
      const db = opened.get(stores) ?? admin;
      return fencedTransaction(db, token, 'probe', async (tx) => {
        onFenced?.();
        await hold;
        const r = await tx.query<{ seq: string }>(
          `INSERT INTO submission_execution_audit (lease_name, lease_epoch, holder_id, action, rows_written, at)
           VALUES ($1, $2, $3, 'probe', 1, clock_timestamp()) RETURNING seq`,
          [token.leaseName, token.leaseEpoch, token.holderId],
        );
        return { value: Number(r.rows[0]!.seq), rowsWritten: 0 };
      });
    },
    async auditLog() {
      const rows = await q<{ seq: string; lease_epoch: string; action: string }>(
        'SELECT seq, lease_epoch, action FROM submission_execution_audit ORDER BY seq');
      return rows.map((x) => ({ seq: Number(x.seq), leaseEpoch: Number(x.lease_epoch), action: x.action }));
    },
    async dbNowText() {
      return (await q<{ t: string }>(`SELECT ${UTC_US('clock_timestamp()')} AS t`))[0]!.t;
    },
    async modifiedAtText(intentId) {
      const [r] = await q<{ m: string }>(`SELECT ${UTC_US('last_modified_at')} AS m FROM submission_intents WHERE intent_id = $1`, [intentId]);
      if (!r) throw new Error(`modifiedAtText: no intent ${intentId}`);
      return r.m;
    },
    async setIntentStatus(intentId, status, ageMs = 0) {
      const r = await admin.query(`UPDATE submission_intents SET status = $2, last_modified_at = last_modified_at - $3::int * interval '1 millisecond'
        WHERE intent_id = $1`, [intentId, status, ageMs]);
      if (r.rowCount !== 1) throw new Error(`setIntentStatus: no intent ${intentId}`);
    },
    async countIntents(status) {
      const [r] = await q<{ n: string | number }>(
        'SELECT count(*) AS n FROM submission_intents WHERE $1::text IS NULL OR status = $1', [status ?? null]);
      return Number(r!.n);
    },
    async statusCounts() {
      const rows = await q<{ status: IntentStatus; n: string | number }>('SELECT status, count(*) AS n FROM submission_intents GROUP BY status');
      return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
    },
    async intentRows() {
      const rows = await q<PgIntentDbRow & { last_modified_text: string }>(
        `SELECT ${INTENT_COLS}, ${UTC_US('last_modified_at')} AS last_modified_text FROM submission_intents ORDER BY intent_id`);
      return rows.map((r) => ({ ...toPgIntent(r), lastModifiedText: r.last_modified_text }));
    },
    async attemptRows() {
      const rows = await q<PgAttemptDbRow>(
        `SELECT intent_id, attempt_no, lease_epoch, holder_id, started_at, finished_at, outcome, http_status, error, duration_ms
           FROM submission_attempts ORDER BY intent_id, attempt_no`);
      return rows.map(toPgAttempt);
    },
    async insertAttempts(rows) {
      const values = rows.map((_, i) => `($${i * 5 + 1}, $${i * 5 + 2}, $${i * 5 + 3}, $${i * 5 + 4}, clock_timestamp(), $${i * 5 + 5})`);
      await admin.query(
        `INSERT INTO submission_attempts (intent_id, attempt_no, lease_epoch, holder_id, started_at, outcome) VALUES ${values.join(', ')}`,
        rows.flatMap((r) => [r.intentId, r.attemptNo, r.leaseEpoch, r.holderId, r.outcome]));
    },
    async insertIntentsOneStatement(n, contract) {
      const r = await admin.query(
        `INSERT INTO submission_intents (intent_id, request_hash, contract, status, attempt_count, max_attempts,
           next_attempt_at, created_at, last_modified_at)
         SELECT gen_random_uuid(), repeat('0', 64), $2::jsonb, 'scheduled', 0, $3, now(), now(), now() FROM generate_series(1, $1::int)`,
        [n, JSON.stringify(contract), contract.retry.maxAttempts]);
      if (r.rowCount !== n) throw new Error(`insertIntentsOneStatement: inserted ${r.rowCount} of ${n}`);
    },
    async expireLeases() {
      await admin.query(`UPDATE submission_manager_leases SET expires_at = clock_timestamp() - interval '1 second'`);
    },
    async stealLease(leaseName, holderId) {
      const r = await admin.query(
        `WITH s AS (UPDATE submission_manager_leases SET holder_id = $2, lease_epoch = lease_epoch + 1,
             acquired_at = clock_timestamp(), renewed_at = clock_timestamp(), expires_at = clock_timestamp() + interval '1 hour'
            WHERE lease_name = $1
           RETURNING lease_name, lease_epoch, holder_id, acquired_at)
         INSERT INTO submission_manager_lease_events (lease_name, lease_epoch, holder_id, event, at)
         SELECT lease_name, lease_epoch, holder_id, 'acquired', acquired_at FROM s`, [leaseName, holderId]);
      if (r.rowCount !== 1) throw new Error(`stealLease: no lease ${leaseName}`);
    },
    async holdLateReschedule(intentId, holdMs) {
      if (!o.separateConnection) throw new Error(`${o.name}: one session only; it cannot hold a transaction open while others commit`);
      const db = o.separateConnection();
      try {
        await db.transaction(async (tx) => {
          const r = await tx.query(
            `UPDATE submission_intents SET next_attempt_at = clock_timestamp(), last_modified_at = clock_timestamp()
              WHERE intent_id = $1`, [intentId]);
          if (r.rowCount !== 1) throw new Error(`holdLateReschedule: no intent ${intentId}`);
          await sleep(holdMs);
        });
      } finally {
        await db.close();
      }
    },
    async lockIntentRow(intentId) {
      if (!o.separateConnection) throw new Error(`${o.name}: one session only; it cannot hold a lock while others wait`);
      const db = o.separateConnection();
      return holdTransaction<PgQueryable>((fn) => db.transaction(fn), async (tx) => {
        const r = await tx.query('SELECT intent_id FROM submission_intents WHERE intent_id = $1 FOR UPDATE', [intentId]);
        if (r.rowCount !== 1) throw new Error(`lockIntentRow: no intent ${intentId}`);
      }, () => db.close());
    },
    async lockAttemptRow(intentId, attemptNo) {
      if (!o.separateConnection) throw new Error(`${o.name}: one session only; it cannot hold a lock while others wait`);
      const db = o.separateConnection();
      return holdTransaction<PgQueryable>((fn) => db.transaction(fn), async (tx) => {
        const r = await tx.query('SELECT 1 FROM submission_attempts WHERE intent_id = $1 AND attempt_no = $2 FOR UPDATE', [intentId, attemptNo]);
        if (r.rowCount !== 1) throw new Error(`lockAttemptRow: no attempt ${intentId} #${attemptNo}`);
      }, () => db.close());
    },
    async insertHeldOpen(n) {
      if (!o.separateConnection) throw new Error(`${o.name}: one session only; it cannot hold a transaction open while others wait`);
      const db = o.separateConnection();
      let partition = -1;
      const commit = await holdTransaction<PgQueryable>((fn) => db.transaction(fn), async (tx) => {
        partition = (await new PgIntentStore(tx).insert(n)).intent.partition;
      }, () => db.close());
      return { partition, commit };
    },
    async startVersionLog(intentId) {
      // A test-only trigger records every version the row takes, so nothing slows the updates down.
      await admin.exec(`
        CREATE TABLE t_modlog (seq serial PRIMARY KEY, intent_id uuid NOT NULL, m text NOT NULL);
        CREATE FUNCTION t_log_modified() RETURNS trigger LANGUAGE plpgsql AS $$
          BEGIN INSERT INTO t_modlog (intent_id, m) VALUES (NEW.intent_id, ${UTC_US('NEW.last_modified_at')}); RETURN NEW; END $$;
        CREATE TRIGGER t_modlog AFTER UPDATE ON submission_intents FOR EACH ROW EXECUTE FUNCTION t_log_modified();`);
      logged = intentId;
    },
    async versionLog() {
      if (!logged) throw new Error('versionLog: startVersionLog first');
      return (await q<{ m: string }>('SELECT m FROM t_modlog WHERE intent_id = $1 ORDER BY seq', [logged])).map((r) => r.m);
    },
    async seedSettled(n, opts) {
      for (const text of pgSeedSettledSql(n, opts)) await admin.query(text);
    },
    examined: pgExamined(() => open(1), o.name),
    async sql(text, params) {
      return (await admin.query(text, params)).rows as never[];
    },
    transaction: (fn) => admin.transaction((tx) => fn(async (text, params) => (await tx.query(text, params)).rows as never[])),
    async close() {
      for (const s of opened.keys()) await s.close().catch(() => {});
      await o.cleanup();
    },
  };
}

/** A statement that fails every DELETE on submission_intents with a real SQL error (42501, as a revoked privilege). */
const refuseDelete: SqlFaults['refuseDelete'] = {
  statements: [`CREATE FUNCTION t_refuse_delete() RETURNS trigger LANGUAGE plpgsql AS $$
    BEGIN RAISE EXCEPTION 'permission denied: retention disabled by the test' USING ERRCODE = '42501'; END $$`,
  'CREATE TRIGGER t_refuse_delete BEFORE DELETE ON submission_intents FOR EACH STATEMENT EXECUTE FUNCTION t_refuse_delete()'],
  code: '42501',
};

// PGlite: one embedded database per test file (from the run's template: pgliteTemplate.ts), one schema per context.
let sharedPglite: Promise<PGlite> | null = null;
export const pglite: DialectHarness = {
  name: 'pglite',
  notices: true,
  manySessions: false,
  unavailable: () => null,
  migrations: pgliteMigrations,
  // No slow delete: a pg_sleep in PGlite's one session stalls everything, by design.
  sqlFaults: { refuseDelete },
  async createContext() {
    sharedPglite ??= newPglite();
    const lite = await sharedPglite;
    const schema = schemaName();
    await lite.exec(`CREATE SCHEMA ${schema}; SET search_path TO ${schema};`);
    const db = fromPglite(lite, { closeOnClose: false });
    const ctx = pgContext({
      name: 'pglite', admin: db, open: () => db, separateConnection: null,
      cleanup: async () => {
        await lite.exec(`SET search_path TO public; DROP SCHEMA ${schema} CASCADE;`);
      },
    });
    await createPostgresStores(db, 'pglite').migrate();
    return ctx;
  },
};

export const postgres: DialectHarness = {
  name: 'postgres',
  notices: true,
  manySessions: true,
  unavailable: () => inject('pgUnavailable') || null,
  migrations: postgresMigrations,
  server: {
    create: createPgDatabase,
    openStores: async (url, statementTimeoutMs) => createPostgresStores(openPgPool({ url, max: 2, statementTimeoutMs }, () => {}), 'postgres'),
    dbTimeSql: (secondsAgo = 0) => (secondsAgo ? `clock_timestamp() - interval '${secondsAgo} seconds'` : 'clock_timestamp()'),
    seedSettledSql: pgSeedSettledSql,
    async holdRowLock(db, table, column, keys, mode = 'exclusive') {
      const pool = openPgPool({ url: db.url, max: 1, statementTimeoutMs: 300_000 }, () => {});
      let pid = 0;
      const release = await holdTransaction<PgQueryable>((fn) => pool.transaction(fn), async (tx) => {
        pid = Number((await tx.query<{ pid: number }>('SELECT pg_backend_pid() AS pid')).rows[0]!.pid);
        const r = await tx.query(`SELECT 1 FROM ${table} WHERE ${column}::text = ANY($1::text[]) ${mode === 'shared' ? 'FOR SHARE' : 'FOR UPDATE'}`, [keys.map(String)]);
        if (r.rows.length !== keys.length) throw new Error(`holdRowLock: ${r.rows.length} of ${keys.length} rows of ${table} found`);
      }, () => pool.close());
      const waiters = async () => Number((await db.sql<{ n: number }>('SELECT count(*)::int AS n FROM pg_stat_activity WHERE $1 = ANY(pg_blocking_pids(pid))', [pid]))[0]!.n);
      return { release, waiters, get session() { return pid; } };
    },
  },
  sqlFaults: {
    slowDelete: (seconds) => [`CREATE FUNCTION t_slow_delete() RETURNS trigger LANGUAGE plpgsql AS $$
      BEGIN PERFORM pg_sleep(${seconds}); RETURN NULL; END $$`,
    'CREATE TRIGGER t_slow_delete BEFORE DELETE ON submission_intents FOR EACH STATEMENT EXECUTE FUNCTION t_slow_delete()'],
    refuseDelete,
  },
  async createContext() {
    const schema = schemaName();
    const open = (max: number, s?: string, statementTimeoutMs = 10_000) =>
      openPgPool({ url: PG_TEST_URL, max, statementTimeoutMs, schema: s ?? schema }, () => {});
    const bootstrap = open(1, 'public');
    await bootstrap.query(`CREATE SCHEMA ${schema}`);
    await bootstrap.close();
    const admin = open(4);
    await createPostgresStores(admin, 'postgres').migrate();
    return pgContext({
      name: 'postgres', admin, open: (max, statementTimeoutMs) => open(max, undefined, statementTimeoutMs), separateConnection: () => open(1),
      cleanup: async () => {
        await admin.query(`DROP SCHEMA ${schema} CASCADE`).catch(() => {});
        await admin.close();
      },
    });
  },
};
