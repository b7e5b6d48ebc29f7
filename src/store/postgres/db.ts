// One small interface over both PostgreSQL drivers: a `pg` Pool (real servers) and PGlite (embedded).
// Every call maps driver errors into StoreError once (see errors.ts).
import pg from 'pg';
import type { ConnectionOptions } from 'node:tls';
import type { PGlite } from '@electric-sql/pglite';
import { StoreError } from '../ports.js';
import { CLIENT_DEADLINE_MARGIN_MS } from '../../limits.js';
import { withDeadline } from '../deadline.js';
import { mapPgError } from './errors.js';
import { listenOnOwnConnection, type ListenFn } from './listen.js';

/** Destroy the socket under a pg client (a blackholed connection would otherwise wait for TCP, minutes). */
function destroyClient(client: pg.PoolClient | pg.Client): void {
  (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
}

/** A statement's own error (SQLSTATE) leaves the connection usable; a connection exception (08…), an
 *  administrator/crash shutdown (57P…) or anything client-side (socket, deadline) does not. */
const isServerError = (e: unknown) => {
  const code = String((e as { code?: unknown })?.code ?? '');
  return /^[0-9A-Z]{5}$/.test(code) && !/^(08|57P)/.test(code) && !(e instanceof StoreError);
};

export interface PgQueryable {
  /** `name`: a prepared statement, parsed once per connection (the pg driver); one name must always carry
   *  the same text. Drivers without per-connection statements (PGlite) ignore it. */
  query<R = Record<string, unknown>>(text: string, params?: unknown[], name?: string): Promise<{ rows: R[]; rowCount: number }>;
}

export interface PgDatabase extends PgQueryable {
  /** BEGIN … COMMIT on one connection; ROLLBACK if fn throws. */
  transaction<T>(fn: (tx: PgQueryable) => Promise<T>): Promise<T>;
  /** Multi-statement script (migrations). */
  exec(sql: string): Promise<void>;
  close(): Promise<void>;
  /** LISTEN on `channel` (a connection of its own on a server; the session itself on PGlite); the returned
   *  function stops. Absent: notices are not available. */
  listen?: ListenFn;
}

export interface PgPoolOptions {
  url: string;
  max: number;
  statementTimeoutMs: number;
  /** search_path for this pool (tests give each test its own schema). */
  schema?: string;
  applicationName?: string;
  /** Client-side deadline per statement (default statementTimeoutMs + CLIENT_DEADLINE_MARGIN_MS). */
  clientDeadlineMs?: number;
  /** Asked for by each new connection (Entra: a cached access token, src/store/entraToken.ts); overrides the URL's. */
  password?: () => Promise<string>;
  /** TLS for every connection (Entra: verified, TLS 1.2+); absent: as the URL says. */
  ssl?: ConnectionOptions;
}

/** `text` on `client`, as a prepared statement when `name` is given. A Query object built from the text:
 *  pg copies a config object ({ name, text, values }) property by property on every call, a string it does not. */
function send(client: pg.PoolClient, text: string, params: unknown[] | undefined, name: string | undefined): Promise<pg.QueryResult> {
  if (name === undefined) return client.query(text, params);
  return new Promise((resolve, reject) => {
    const q = new pg.Query(text, params, (err: Error | undefined, res: pg.QueryResult) => (err ? reject(err) : resolve(res)));
    (q as unknown as { name: string }).name = name;
    client.query(q);
  });
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
    // READ COMMITTED whatever the database's default: a statement's snapshot follows its locks, which a partition
    // change's switch relies on (partitionChangeStore.ts), as the refresh cursor relies on per-statement snapshots.
    '-c default_transaction_isolation=read\\ committed',
    // No JIT: every statement of the product is a bounded index read or write, and JIT is chosen from cost
    // estimates — one misestimate (a time range on a large table) compiles for tens of ms a statement reading rows.
    '-c jit=off',
    ...(opts.schema ? [`-c search_path=${opts.schema}`] : []),
  ];
  // pg lets a connection string's (empty) password override a password function, so with one the URL's parts
  // are passed one by one (an Entra URL carries nothing else).
  const server = opts.password
    ? { host: url.hostname, port: Number(url.port || 5432), user: decodeURIComponent(url.username),
      database: decodeURIComponent(url.pathname.slice(1)), password: opts.password }
    : { connectionString: url.toString() };
  const connection = {
    ...server,
    options: settings.join(' '),
    application_name: opts.applicationName ?? 'submission-manager',
    connectionTimeoutMillis: Math.max(1_000, opts.statementTimeoutMs),
    keepAlive: true,
    ...(opts.ssl ? { ssl: opts.ssl } : {}),
  };
  const pool = new pg.Pool({ ...connection, max: opts.max });
  // An idle client whose backend is killed emits 'error' on the pool; without a listener the process dies.
  pool.on('error', (e) => onIdleError?.(e));
  // Every client keeps a listener of its own for life: a FATAL read together with the ReadyForQuery that hands a new
  // client out arrives after pg-pool removed its idle listener and before ours is attached (a microtask later). The
  // statement then sees a client that is not queryable and fails as transient; the process lives.
  pool.on('connect', (client) => client.on('error', () => {}));
  const deadlineMs = opts.clientDeadlineMs ?? opts.statementTimeoutMs + CLIENT_DEADLINE_MARGIN_MS;
  return { ...fromPgPool(pool, deadlineMs), listen: listenOnOwnConnection(connection, deadlineMs) };
}

/** Every statement is bounded by `deadlineMs` on the client side (connect by connectionTimeoutMillis). */
export function fromPgPool(pool: pg.Pool, deadlineMs = 30_000): PgDatabase {
  const connect = async (): Promise<pg.PoolClient> => {
    try {
      return await pool.connect();
    } catch (e) {
      throw mapPgError(e);
    }
  };
  return {
    async query(text, params, name) {
      const client = await connect();
      let broken: unknown = undefined;
      const onError = () => (broken = true);
      client.on('error', onError);
      try {
        const r = await withDeadline(send(client, text, params, name), deadlineMs, () => {
          broken = true;
          destroyClient(client);
        });
        return { rows: r.rows, rowCount: r.rowCount ?? 0 };
      } catch (e) {
        // A server error leaves the connection usable; a client-side one (socket, deadline) does not.
        if (!isServerError(e)) broken = true;
        throw e instanceof StoreError ? e : mapPgError(e);
      } finally {
        client.removeListener('error', onError);
        client.release(broken ? true : undefined);
      }
    },
    async transaction(fn) {
      const client = await connect();
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
            const r = await withDeadline(client.query(text, params as unknown[]), deadlineMs, () => destroyClient(client));
            return { rows: r.rows as never[], rowCount: r.rowCount ?? 0 };
          } catch (e) {
            broken = true;
            throw e instanceof StoreError ? e : mapPgError(e);
          }
        },
      };
      try {
        await tx.query('BEGIN');
        const value = await fn(tx);
        await tx.query('COMMIT');
        return value;
      } catch (e) {
        if (broken) destroyClient(client); // no ROLLBACK on a dead or timed-out connection: the server rolls back
        else await withDeadline(client.query('ROLLBACK'), deadlineMs, () => destroyClient(client)).catch(() => { broken = true; });
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

/** One turn of the event loop: its timers and I/O (setImmediate runs after the poll phase). */
const eventLoopTurn = () => new Promise<void>((resolve) => setImmediate(resolve));

/** PGlite is one session: its transaction() serialises every other query until commit. It runs on this thread, and a
 *  statement queued behind another starts in a microtask as that one ends: while statements keep coming, no timer and
 *  no socket would run (a provider's answer read, a call's timeout, the lease's deadline). So every statement and
 *  transaction first lets the event loop take a turn; statements inside a transaction do not (the session is theirs). */
export function fromPglite(db: PGlite, opts: { closeOnClose: boolean } = { closeOnClose: true }): PgDatabase {
  const wrap = (q: { query: PGlite['query'] }, turn: boolean): PgQueryable => ({
    async query(text, params) {
      if (turn) await eventLoopTurn();
      try {
        const r = await q.query(text, params as unknown[]);
        return { rows: r.rows as never[], rowCount: r.affectedRows ?? r.rows.length };
      } catch (e) {
        throw mapPgError(e);
      }
    },
  });
  const base = wrap(db, true);
  return {
    query: base.query,
    async transaction(fn) {
      await eventLoopTurn();
      try {
        return await db.transaction(async (tx) => fn(wrap(tx, false)));
      } catch (e) {
        // Errors from fn (already mapped, or the caller's own) pass through; BEGIN/COMMIT failures are mapped, and so
        // is BEGIN on a closed PGlite (an error without a code: the store is gone, as for a single statement).
        throw typeof (e as { code?: unknown })?.code === 'string' || db.closed ? mapPgError(e) : e;
      }
    },
    async exec(sql) {
      await eventLoopTurn();
      try {
        await db.exec(sql);
      } catch (e) {
        throw mapPgError(e);
      }
    },
    async close() {
      if (opts.closeOnClose && !db.closed) await db.close();
    },
    async listen(channel, onNotice) {
      const unlisten = await db.listen(channel, () => onNotice());
      return {
        async stop() {
          if (!db.closed) await unlisten().catch(() => {});
        },
        check: async () => {}, // in-process: nothing can drop
      };
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
