// One small interface over a mysql2 pool, for MySQL 8 and MariaDB 10.6+. Every session is pinned when first
// used: time_zone '+00:00', a fixed sql_mode, READ COMMITTED, innodb_lock_wait_timeout and the server-side
// statement timeout (MariaDB max_statement_time; MySQL max_execution_time, which bounds SELECTs only). The
// server (MariaDB or MySQL, version) is detected once, on the first connection. Timestamps never meet a JS
// Date on the way in or out in the local zone: the driver returns DATETIME as text (dateStrings), parsed here
// as UTC; parameters are sent as UTC text (dbTime). Driver errors are mapped once (errors.ts).
import mysql from 'mysql2/promise';
import type { PoolConnection, Pool, TypeCastField, TypeCastNext } from 'mysql2/promise';
import { CLIENT_DEADLINE_MARGIN_MS } from '../../limits.js';
import { withDeadline } from '../deadline.js';
import { isStatementError, mapMysqlError } from './errors.js';
import { isStoreError } from '../ports.js';

/** Runs of a transaction chosen as a deadlock victim, in all. */
const DEADLOCK_TRIES = 3;

export type Row = Record<string, unknown>;

export interface MysqlServer {
  flavor: 'mariadb' | 'mysql';
  /** VERSION() as the server reports it, e.g. `10.11.19-MariaDB-0+deb12u1`, `8.0.39`. */
  version: string;
}

export interface MyQueryable {
  /** One statement; `?` placeholders are escaped client-side by mysql2. SELECT → rows; otherwise rows is
   *  empty and affectedRows is the server's count (found rows: informational only, never an outcome). */
  query<R = Row>(text: string, params?: unknown[]): Promise<{ rows: R[]; affectedRows: number; insertId: number }>;
}

export interface MyDatabase extends MyQueryable {
  /** Several statements on one connection, outside any transaction (session locks: migrations). */
  session<T>(fn: (s: MyQueryable) => Promise<T>): Promise<T>;
  /** START TRANSACTION … COMMIT on one connection (READ COMMITTED, the session default); ROLLBACK if fn throws.
   *  A deadlock victim (1213: the server rolled the whole transaction back) runs again, at most DEADLOCK_TRIES
   *  times in all, so `fn` must do nothing but database work. */
  transaction<T>(fn: (tx: MyQueryable) => Promise<T>): Promise<T>;
  /** The server, detected on the first connection. */
  server(): Promise<MysqlServer>;
  close(): Promise<void>;
}

/** Where to connect: a mysql:// / mariadb:// URL, or ready connection options (Entra: src/store/mysql/entraOptions.ts)
 *  with a hook that gets the pool once created (bindTokenPassword). */
export type MysqlConnection = { url: string } | { connection: mysql.PoolOptions; onPool?: (pool: Pool) => void };

export type MysqlPoolOptions = MysqlConnection & {
  max: number;
  statementTimeoutMs: number;
  /** Overrides the URL's database (tests give each context its own). */
  database?: string;
  /** Client-side deadline per statement (default statementTimeoutMs + CLIENT_DEADLINE_MARGIN_MS). */
  clientDeadlineMs?: number;
};

/** Session sql_mode: strict, and without NO_BACKSLASH_ESCAPES / ANSI_QUOTES, which mysql2's escaping relies on. */
const SQL_MODE = 'ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION';

/** 'YYYY-MM-DD hh:mm:ss[.ffffff]' (database text, UTC) → Date (milliseconds; sub-millisecond digits dropped). */
export function utcDate(text: string): Date {
  const d = new Date(`${text.slice(0, 23).replace(' ', 'T')}Z`);
  if (Number.isNaN(d.getTime())) throw new Error(`not a database time: ${text}`);
  return d;
}

/** A Date as DATETIME(6) text in UTC, for parameters (never the driver's own Date formatting). */
export const dbTime = (d: Date): string => d.toISOString().slice(0, 23).replace('T', ' ');
export const dbTimeOrNull = (d: Date | null | undefined): string | null => (d ? dbTime(d) : null);

/** DATETIME/TIMESTAMP → Date (UTC text parsed by us); BOOLEAN (TINYINT(1)) → boolean; the rest as mysql2 does. */
function typeCast(field: TypeCastField, next: TypeCastNext): unknown {
  if (field.type === 'DATETIME' || field.type === 'TIMESTAMP') {
    const text = field.string();
    return text === null ? null : utcDate(text);
  }
  if (field.type === 'TINY' && field.length === 1) {
    const text = field.string();
    return text === null ? null : text !== '0';
  }
  return next();
}

/** Connection settings from a mysql:// or mariadb:// URL: `?ssl=true|false` (default: on unless the host is local). */
export function connectionConfig(url: string, database?: string): mysql.PoolOptions {
  const u = new URL(url);
  const local = ['127.0.0.1', 'localhost', '::1', '[::1]'].includes(u.hostname);
  const ssl = u.searchParams.get('ssl');
  const tls = ssl === null ? !local : ssl === 'true' || ssl === '1';
  return {
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port: u.port ? Number(u.port) : 3306,
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
    database: database ?? (decodeURIComponent(u.pathname.replace(/^\//, '')) || undefined),
    ...(tls ? { ssl: { rejectUnauthorized: true } } : {}),
  };
}

/** The session settings. The statement timeout bounds each statement; on MariaDB, idle_transaction_timeout (as
 *  PostgreSQL's idle_in_transaction_session_timeout) ends a session left idle inside a transaction — a paused or
 *  cut-off leader holding the lease row's S lock — so an acquire waits at most that long. MySQL has no such
 *  setting (docs/mysql.md). */
function sessionInit(server: MysqlServer, statementTimeoutMs: number): string[] {
  const seconds = Math.max(1, Math.ceil(statementTimeoutMs / 1000));
  const timeout = server.flavor === 'mariadb'
    ? `max_statement_time = ${statementTimeoutMs / 1000}, idle_transaction_timeout = ${seconds}`
    : `max_execution_time = ${Math.round(statementTimeoutMs)}`;
  return [
    `SET time_zone = '+00:00', sql_mode = '${SQL_MODE}', innodb_lock_wait_timeout = ${seconds}, ${timeout}`,
    'SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED',
  ];
}

export function parseServer(version: string): MysqlServer {
  return { flavor: /mariadb/i.test(version) ? 'mariadb' : 'mysql', version };
}

type Result = { rows: never[]; affectedRows: number; insertId: number };

function shape(r: unknown): Result {
  if (Array.isArray(r)) return { rows: r as never[], affectedRows: 0, insertId: 0 };
  const h = r as { affectedRows?: number; insertId?: number };
  return { rows: [], affectedRows: h.affectedRows ?? 0, insertId: Number(h.insertId ?? 0) };
}

/** A pool with bounded statements (COMMIT_GRACE_MS relies on that bound) and a client-side deadline on every call. */
export function openMysqlPool(opts: MysqlPoolOptions, onIdleError?: (e: Error) => void): MyDatabase {
  const deadlineMs = opts.clientDeadlineMs ?? opts.statementTimeoutMs + CLIENT_DEADLINE_MARGIN_MS;
  const pool: Pool = mysql.createPool({
    ...('url' in opts ? connectionConfig(opts.url, opts.database) : { ...opts.connection, ...(opts.database ? { database: opts.database } : {}) }),
    connectionLimit: opts.max,
    maxIdle: opts.max,
    waitForConnections: true,
    connectTimeout: Math.max(1_000, opts.statementTimeoutMs),
    enableKeepAlive: true,
    keepAliveInitialDelay: 10_000,
    dateStrings: true,
    supportBigNumbers: true,
    bigNumberStrings: true,
    multipleStatements: false,
    typeCast,
  });
  if ('onPool' in opts) opts.onPool?.(pool);
  // A pooled connection the server drops while idle emits 'error'; without a listener the process would die.
  pool.on('connection', (c) => (c as unknown as { on(ev: string, f: (e: Error) => void): void }).on('error', (e) => onIdleError?.(e)));
  let detected: Promise<MysqlServer> | null = null;
  const ready = new WeakSet<object>();

  /** Destroy the socket under a connection (a blackholed one would otherwise wait for TCP, minutes). */
  const destroy = (c: PoolConnection) => {
    try {
      c.destroy();
    } catch { /* already gone */ }
  };

  /** A pooled connection whose session is pinned; bounded by the deadline (a late one is released). */
  const acquire = async (): Promise<PoolConnection> => {
    let late = false;
    const pending = pool.getConnection();
    pending.then((c) => late && c.release(), () => {});
    let c: PoolConnection;
    try {
      c = await withDeadline(pending, deadlineMs, () => (late = true));
    } catch (e) {
      throw mapMysqlError(e);
    }
    const core = (c as unknown as { connection: object }).connection;
    if (ready.has(core)) return c;
    try {
      detected ??= withDeadline(c.query('SELECT VERSION() AS v'), deadlineMs, () => destroy(c))
        .then(([rows]) => parseServer(String((rows as Row[])[0]!.v)));
      const server = await detected.catch((e: unknown) => {
        detected = null; // detect again on the next connection
        throw e;
      });
      for (const stmt of sessionInit(server, opts.statementTimeoutMs)) {
        await withDeadline(c.query(stmt), deadlineMs, () => destroy(c));
      }
      ready.add(core);
      return c;
    } catch (e) {
      destroy(c);
      throw mapMysqlError(e);
    }
  };

  /** Run one statement on `c`; a client-side failure (socket, deadline) marks the connection broken. */
  const run = async (c: PoolConnection, text: string, params: unknown[] | undefined, onBroken: () => void): Promise<Result> => {
    try {
      const [r] = await withDeadline(c.query(text, params), deadlineMs, () => {
        onBroken();
        destroy(c);
      });
      return shape(r);
    } catch (e) {
      if (!isStatementError(e)) onBroken();
      throw mapMysqlError(e);
    }
  };

  const finish = (c: PoolConnection, broken: boolean) => (broken ? destroy(c) : c.release());

  /** One run of a transaction on one connection. */
  const once = async <T>(fn: (tx: MyQueryable) => Promise<T>): Promise<T> => {
    const c = await acquire();
    let broken = false;
    const tx: MyQueryable = {
      query: async <R>(text: string, params?: unknown[]) =>
        (await run(c, text, params, () => (broken = true))) as unknown as { rows: R[]; affectedRows: number; insertId: number },
    };
    try {
      await tx.query('START TRANSACTION');
      const value = await fn(tx);
      await tx.query('COMMIT');
      return value;
    } catch (e) {
      // No ROLLBACK on a dead or timed-out connection: the server rolls back when the session ends.
      if (!broken) await run(c, 'ROLLBACK', undefined, () => (broken = true)).catch(() => (broken = true));
      throw e;
    } finally {
      finish(c, broken);
    }
  };

  return {
    async query<R>(text: string, params?: unknown[]) {
      const c = await acquire();
      let broken = false;
      try {
        return (await run(c, text, params, () => (broken = true))) as unknown as { rows: R[]; affectedRows: number; insertId: number };
      } finally {
        finish(c, broken);
      }
    },
    async session(fn) {
      const c = await acquire();
      let broken = false;
      try {
        return await fn({
          query: async <R>(text: string, params?: unknown[]) =>
            (await run(c, text, params, () => (broken = true))) as unknown as { rows: R[]; affectedRows: number; insertId: number },
        });
      } finally {
        finish(c, broken);
      }
    },
    async transaction(fn) {
      for (let attempt = 1; ; attempt++) {
        try {
          return await once(fn);
        } catch (e) {
          if (attempt >= DEADLOCK_TRIES || !(isStoreError(e) && e.code === '1213')) throw e;
        }
      }
    },
    async server() {
      const c = await acquire();
      c.release();
      return detected!;
    },
    async close() {
      await pool.end().catch((e: unknown) => {
        if (!/closed/i.test(String((e as Error)?.message))) throw mapMysqlError(e);
      });
    },
  };
}
