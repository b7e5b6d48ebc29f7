// One harness per SQL dialect, so the contract suites run unchanged against each (describe.each).
// Every context gets its own schema (PostgreSQL) or database (SQL Server), migrated.
import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import { PGlite } from '@electric-sql/pglite';
import type { Fenced, LeaseToken } from '../../src/store/ports.js';
import type { Stores } from '../../src/store/stores.js';
import { fromPglite, openPgPool, type PgDatabase } from '../../src/store/postgres/db.js';
import { createPostgresStores } from '../../src/store/postgres/index.js';
import { fencedTransaction } from '../../src/store/postgres/fence.js';
import { PG_TEST_URL } from './pgServer.js';
import { mssql } from './mssqlHarness.js';

export interface DialectContext {
  name: string;
  /** A new set of stores on its own connection(s) in this context (one per simulated instance). */
  openStores(opts?: { poolMax?: number }): Promise<Stores>;
  /** Run a fenced transaction for `token` that writes an audit row, waits for `hold`, then commits.
   *  Resolves with the audit row's sequence number, or leaseLost. */
  fencedHold(stores: Stores, token: LeaseToken, hold: Promise<void>, onFenced?: () => void): Promise<Fenced<number>>;
  /** Audit sequence numbers with their epochs (fenced writes), oldest first. */
  auditLog(): Promise<{ seq: number; leaseEpoch: number; action: string }[]>;
  /** Raw SQL in this context (dialect-specific text: only for tests that arrange or inspect state). */
  sql<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
  close(): Promise<void>;
}

export interface DialectHarness {
  name: 'pglite' | 'postgres' | 'mssql';
  /** null = usable; otherwise the reason the suite is skipped. */
  unavailable(): string | null;
  createContext(): Promise<DialectContext>;
}

const schemaName = () => `t_${randomBytes(6).toString('hex')}`;

function pgContext(name: string, admin: PgDatabase, open: (max: number) => PgDatabase, cleanup: () => Promise<void>, dialect: 'postgres' | 'pglite'): DialectContext {
  const opened = new Map<Stores, PgDatabase>();
  return {
    name,
    async openStores(opts) {
      const db = open(opts?.poolMax ?? 4);
      const stores = createPostgresStores(db, dialect);
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
      const r = await admin.query<{ seq: string; lease_epoch: string; action: string }>(
        'SELECT seq, lease_epoch, action FROM submission_execution_audit ORDER BY seq');
      return r.rows.map((x) => ({ seq: Number(x.seq), leaseEpoch: Number(x.lease_epoch), action: x.action }));
    },
    async sql(text, params) {
      return (await admin.query(text, params)).rows as never[];
    },
    async close() {
      for (const s of opened.keys()) await s.close().catch(() => {});
      await cleanup();
    },
  };
}

// PGlite: one embedded database per test file (startup is ~3 s of CPU), one schema per context.
let sharedPglite: Promise<PGlite> | null = null;
const pglite: DialectHarness = {
  name: 'pglite',
  unavailable: () => null,
  async createContext() {
    sharedPglite ??= PGlite.create();
    const lite = await sharedPglite;
    const schema = schemaName();
    await lite.exec(`CREATE SCHEMA ${schema}; SET search_path TO ${schema};`);
    const db = fromPglite(lite, { closeOnClose: false });
    const ctx = pgContext('pglite', db, () => db, async () => {
      await lite.exec(`SET search_path TO public; DROP SCHEMA ${schema} CASCADE;`);
    }, 'pglite');
    await createPostgresStores(db, 'pglite').migrate();
    return ctx;
  },
};

const postgres: DialectHarness = {
  name: 'postgres',
  unavailable: () => inject('pgUnavailable') || null,
  async createContext() {
    const schema = schemaName();
    const open = (max: number, s?: string) =>
      openPgPool({ url: PG_TEST_URL, max, statementTimeoutMs: 10_000, schema: s ?? schema }, () => {});
    const bootstrap = open(1, 'public');
    await bootstrap.query(`CREATE SCHEMA ${schema}`);
    await bootstrap.close();
    const admin = open(4);
    await createPostgresStores(admin, 'postgres').migrate();
    return pgContext('postgres', admin, (max) => open(max), async () => {
      await admin.query(`DROP SCHEMA ${schema} CASCADE`).catch(() => {});
      await admin.close();
    }, 'postgres');
  },
};

/** Every dialect the contract suites run against. SQL Server joins when configured (test/support/mssqlHarness.ts). */
export const dialects: DialectHarness[] = [pglite, postgres, mssql];
