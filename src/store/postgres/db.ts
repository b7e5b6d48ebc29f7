// One small interface over both PostgreSQL drivers: a `pg` Pool (real servers) and PGlite (embedded).
// Every call maps driver errors into StoreError once (see errors.ts).
import pg from 'pg';
import type { PGlite } from '@electric-sql/pglite';
import { mapPgError } from './errors.js';

export interface PgQueryable {
  query<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<{ rows: R[]; rowCount: number }>;
}

export interface PgDatabase extends PgQueryable {
  /** BEGIN … COMMIT on one connection; ROLLBACK if fn throws. */
  transaction<T>(fn: (tx: PgQueryable) => Promise<T>): Promise<T>;
  /** Multi-statement script (migrations). */
  exec(sql: string): Promise<void>;
  close(): Promise<void>;
}

export interface PgPoolOptions {
  url: string;
  max: number;
  statementTimeoutMs: number;
  /** search_path for this pool (tests give each test its own schema). */
  schema?: string;
  applicationName?: string;
}

/** A pg Pool with bounded statements and transactions (COMMIT_GRACE_MS relies on that bound). */
export function openPgPool(opts: PgPoolOptions, onIdleError?: (e: Error) => void): PgDatabase {
  // Keep any `options` the URL carries (e.g. `?options=-c search_path=tenant`); ours are appended.
  // (pg lets the URL's `options` override the config's, so it is moved out of the URL.)
  const url = new URL(opts.url);
  const fromUrl = url.searchParams.get('options');
  url.searchParams.delete('options');
  const settings = [
    ...(fromUrl ? [fromUrl] : []),
    `-c statement_timeout=${opts.statementTimeoutMs}`,
    `-c idle_in_transaction_session_timeout=${opts.statementTimeoutMs}`,
    ...(opts.schema ? [`-c search_path=${opts.schema}`] : []),
  ];
  const pool = new pg.Pool({
    connectionString: url.toString(),
    max: opts.max,
    options: settings.join(' '),
    application_name: opts.applicationName ?? 'submission-manager',
    connectionTimeoutMillis: Math.max(1_000, opts.statementTimeoutMs),
    keepAlive: true,
  });
  // An idle client whose backend is killed emits 'error' on the pool; without a listener the process dies.
  pool.on('error', (e) => onIdleError?.(e));
  return fromPgPool(pool);
}

export function fromPgPool(pool: pg.Pool): PgDatabase {
  return {
    async query(text, params) {
      try {
        const r = await pool.query(text, params as unknown[]);
        return { rows: r.rows, rowCount: r.rowCount ?? 0 };
      } catch (e) {
        throw mapPgError(e);
      }
    },
    async transaction(fn) {
      let client: pg.PoolClient;
      try {
        client = await pool.connect();
      } catch (e) {
        throw mapPgError(e);
      }
      let broken = false;
      // A borrowed client has no 'error' listener of its own: if the server ends the session while we hold
      // it (idle-in-transaction timeout after a long pause), the error must not crash the process.
      const onError = () => {
        broken = true;
      };
      client.on('error', onError);
      const tx: PgQueryable = {
        async query(text, params) {
          try {
            const r = await client.query(text, params as unknown[]);
            return { rows: r.rows as never[], rowCount: r.rowCount ?? 0 };
          } catch (e) {
            broken = true;
            throw mapPgError(e);
          }
        },
      };
      try {
        await tx.query('BEGIN');
        const value = await fn(tx);
        await tx.query('COMMIT');
        return value;
      } catch (e) {
        await client.query('ROLLBACK').catch(() => { broken = true; });
        throw e;
      } finally {
        // A connection that failed mid-transaction is discarded rather than reused.
        client.removeListener('error', onError);
        client.release(broken ? true : undefined);
      }
    },
    async exec(sql) {
      try {
        await pool.query(sql);
      } catch (e) {
        throw mapPgError(e);
      }
    },
    close: async () => {
      if (!pool.ended && !pool.ending) await pool.end(); // idempotent: shutdown paths may overlap
    },
  };
}

/** PGlite is one session: its transaction() serialises every other query until commit. */
export function fromPglite(db: PGlite, opts: { closeOnClose: boolean } = { closeOnClose: true }): PgDatabase {
  const wrap = (q: { query: PGlite['query'] }): PgQueryable => ({
    async query(text, params) {
      try {
        const r = await q.query(text, params as unknown[]);
        return { rows: r.rows as never[], rowCount: r.affectedRows ?? r.rows.length };
      } catch (e) {
        throw mapPgError(e);
      }
    },
  });
  const base = wrap(db);
  return {
    query: base.query,
    async transaction(fn) {
      try {
        return await db.transaction(async (tx) => fn(wrap(tx)));
      } catch (e) {
        // Errors from fn (already mapped, or the caller's own) pass through; BEGIN/COMMIT failures are mapped.
        throw typeof (e as { code?: unknown })?.code === 'string' ? mapPgError(e) : e;
      }
    },
    async exec(sql) {
      try {
        await db.exec(sql);
      } catch (e) {
        throw mapPgError(e);
      }
    },
    async close() {
      if (opts.closeOnClose && !db.closed) await db.close();
    },
  };
}

/** Open an embedded PGlite (in memory when dataDir is null). */
export async function openPglite(dataDir: string | null): Promise<PgDatabase> {
  const { PGlite } = await import('@electric-sql/pglite');
  const db = dataDir ? new PGlite(dataDir) : new PGlite();
  await db.waitReady;
  return fromPglite(db);
}
