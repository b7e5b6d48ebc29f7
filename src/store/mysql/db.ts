// One small interface over a mysql2 pool, for MySQL 8 and MariaDB 10.6+. Every session is pinned when first
// used (session.ts): time_zone '+00:00', a fixed sql_mode, READ COMMITTED, innodb_lock_wait_timeout and the server-side
// statement timeout (MariaDB max_statement_time; MySQL max_execution_time, which bounds SELECTs only). The
// server (MariaDB or MySQL, version) is detected once, on the first connection. Timestamps never meet a JS
// Date on the way in or out in the local zone: the driver returns DATETIME as text (dateStrings), parsed here
// as UTC; parameters are sent as UTC text (dbTime). Driver errors are mapped once (errors.ts).
// Pipelined transactions and batches (several statements per round trip) run on a second pool of their own, opened on
// first use with multipleStatements: nothing else is sent on it, and its values are escaped by mysql2 (`?`) as everywhere.
import mysql from 'mysql2/promise';
import type { PoolConnection, Pool } from 'mysql2/promise';
import { CLIENT_DEADLINE_MARGIN_MS } from '../../limits.js';
import { withDeadline } from '../deadline.js';
import { isStatementError, mapMysqlError } from './errors.js';
import { isStoreError } from '../ports.js';
import { connectionConfig, parseServer, sessionInit, typeCast, type MysqlServer } from './session.js';

export { connectionConfig, dbTime, dbTimeOrNull, parseServer, utcDate, type MysqlServer } from './session.js';

/** Runs of a transaction chosen as a deadlock victim, in all. */
const DEADLOCK_TRIES = 3;

export type Row = Record<string, unknown>;

export interface MyResult<R = Row> {
  rows: R[];
  affectedRows: number;
  insertId: number;
}

export interface MyQueryable {
  /** One statement; `?` placeholders are escaped client-side by mysql2. SELECT → rows; otherwise rows is
   *  empty and affectedRows is the server's count (found rows: informational only, never an outcome). */
  query<R = Row>(text: string, params?: unknown[]): Promise<MyResult<R>>;
}

/** One statement of a pipelined batch: its text (no `;`) and the values of its `?` placeholders (one each). */
export interface MyStatement {
  text: string;
  params?: unknown[];
  /** It may wait for a row lock (a locking read): its batch's client deadline grows by one statement timeout. */
  waits?: boolean;
}

/** A transaction whose statements travel in batches, each batch ONE round trip on the transaction's connection. The
 *  server runs a batch's statements in order and stops at the first that fails (none after it runs); the call then
 *  fails with that error and the transaction is rolled back. */
export interface MyPipeline {
  /** `statements` in one round trip (the first batch has START TRANSACTION in front); one result per statement. */
  send(statements: MyStatement[]): Promise<MyResult[]>;
  /** `statements`, then COMMIT, in one round trip: the transaction's last batch. */
  commit(statements: MyStatement[]): Promise<MyResult[]>;
}

export interface MyDatabase extends MyQueryable {
  /** Several statements on one connection, outside any transaction (session locks: migrations). */
  session<T>(fn: (s: MyQueryable) => Promise<T>): Promise<T>;
  /** START TRANSACTION … COMMIT on one connection (READ COMMITTED, the session default); ROLLBACK if fn throws.
   *  A deadlock victim (1213: the server rolled the whole transaction back) runs again, at most DEADLOCK_TRIES
   *  times in all, so `fn` must do nothing but database work. */
  transaction<T>(fn: (tx: MyQueryable) => Promise<T>): Promise<T>;
  /** As `transaction`, pipelined (MyPipeline), on the pipelining pool. `fn` returning without `commit` (or throwing)
   *  rolls back. A deadlock victim runs again as in `transaction`. A batch's client-side deadline is one call's, plus
   *  one statement timeout for each statement after the first that `waits` (each may wait its own timeout). */
  pipelined<T>(fn: (tx: MyPipeline) => Promise<T>): Promise<T>;
  /** `statements` in ONE round trip on the pipelining pool, outside any transaction: each commits as it completes
   *  (autocommit), so a later one sees what an earlier one wrote. The server runs them in order and stops at the first
   *  that fails (none after it runs; those before it stay committed): the call fails with that error. One call's
   *  client deadline, plus one statement timeout for each statement after the first that `waits`. */
  batch(statements: MyStatement[]): Promise<MyResult[]>;
  /** The server, detected on the first connection. */
  server(): Promise<MysqlServer>;
  close(): Promise<void>;
}

/** Where to connect: a mysql:// / mariadb:// URL, or ready connection options (Entra: src/store/mysql/entraOptions.ts)
 *  with a hook that gets each pool once created (bindTokenPassword). */
export type MysqlConnection = { url: string } | { connection: mysql.PoolOptions; onPool?: (pool: Pool) => void };

export type MysqlPoolOptions = MysqlConnection & {
  /** Connections of each pool (the pipelining pool opens only as many as pipelined transactions run at once). */
  max: number;
  statementTimeoutMs: number;
  /** Overrides the URL's database (tests give each context its own). */
  database?: string;
  /** Client-side deadline per call (default statementTimeoutMs + CLIENT_DEADLINE_MARGIN_MS). */
  clientDeadlineMs?: number;
};

function shape(r: unknown): MyResult<never> {
  if (Array.isArray(r)) return { rows: r as never[], affectedRows: 0, insertId: 0 };
  const h = r as { affectedRows?: number; insertId?: number };
  return { rows: [], affectedRows: h.affectedRows ?? 0, insertId: Number(h.insertId ?? 0) };
}

/** Runs `once` again while it fails as a deadlock victim, DEADLOCK_TRIES runs in all. */
async function retryDeadlock<T>(once: () => Promise<T>): Promise<T> {
  for (let attempt = 1; ; attempt++) {
    try {
      return await once();
    } catch (e) {
      if (attempt >= DEADLOCK_TRIES || !(isStoreError(e) && e.code === '1213')) throw e;
    }
  }
}

/** `?` placeholders of a statement as mysql2 counts them (`?` a value, `??` an identifier; quotes are not parsed). */
const placeholders = (text: string) => (text.match(/\?+/g) ?? []).filter((m) => m.length <= 2).length;

/** The statements as one text and one list of values. The texts are joined and the values flattened: a miscount
 *  would shift every later statement's values, so it throws. */
function joined(all: MyStatement[]): { text: string; params: unknown[] } {
  for (const x of all) {
    if (placeholders(x.text) !== (x.params?.length ?? 0)) {
      throw new Error(`pipelined statement with ${placeholders(x.text)} placeholders and ${x.params?.length ?? 0} values: ${x.text.slice(0, 80)}`);
    }
  }
  return { text: all.map((x) => x.text).join(';\n'), params: all.flatMap((x) => x.params ?? []) };
}

/** The driver's reply to `count` statements sent as one text: one result each (mysql2 nests them when several). */
const results = (r: unknown, count: number): unknown[] => (count === 1 ? [r] : (r as unknown[]));

/** A pool with bounded statements (COMMIT_GRACE_MS relies on that bound) and a client-side deadline on every call.
 *  Late commits: a pipelined transaction stamps its rows (last_modified_at) and commits in its last batch, whose
 *  statements wait for no lock (every row it writes was locked by an earlier batch), so that batch keeps one call's
 *  deadline and a late COMMIT stays within the bound COMMIT_GRACE_MS relies on; only the locking reads' batch waits
 *  longer, and it writes nothing. */
export function openMysqlPool(opts: MysqlPoolOptions, onIdleError?: (e: Error) => void): MyDatabase {
  const deadlineMs = opts.clientDeadlineMs ?? opts.statementTimeoutMs + CLIENT_DEADLINE_MARGIN_MS;
  const createPool = (multipleStatements: boolean): Pool => {
    const created: Pool = mysql.createPool({
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
      multipleStatements,
      typeCast,
      // No stack captured on every call (mysql2's `trace`): a failure is mapped where the call is awaited (send), so
      // its StoreError carries the caller's async stack; the driver's own error stays its cause.
      trace: false,
    });
    if ('onPool' in opts) opts.onPool?.(created);
    // A pooled connection the server drops while idle emits 'error'; without a listener the process would die.
    created.on('connection', (c) => (c as unknown as { on(ev: string, f: (e: Error) => void): void }).on('error', (e) => onIdleError?.(e)));
    return created;
  };
  const pool = createPool(false);
  let pipelining: Pool | null = null;
  let closed = false;
  let detected: Promise<MysqlServer> | null = null;
  const ready = new WeakSet<object>();

  /** Destroy the socket under a connection (a blackholed one would otherwise wait for TCP, minutes). */
  const destroy = (c: PoolConnection) => {
    try {
      c.destroy();
    } catch { /* already gone */ }
  };

  /** A pooled connection whose session is pinned; bounded by the deadline (a late one is released). */
  const acquire = async (from: Pool = pool): Promise<PoolConnection> => {
    let late = false;
    const pending = from.getConnection();
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

  /** Send `text` (one statement, or several on the pipelining pool) on `c`: the driver's result(s). A client-side
   *  failure (socket, deadline) marks the connection broken. */
  const send = async (c: PoolConnection, text: string, params: unknown[] | undefined, onBroken: () => void, ms = deadlineMs): Promise<unknown> => {
    try {
      const [r] = await withDeadline(c.query(text, params), ms, () => {
        onBroken();
        destroy(c);
      });
      return r;
    } catch (e) {
      if (!isStatementError(e)) onBroken();
      throw mapMysqlError(e);
    }
  };

  const run = async (c: PoolConnection, text: string, params: unknown[] | undefined, onBroken: () => void) =>
    shape(await send(c, text, params, onBroken));

  const finish = (c: PoolConnection, broken: boolean) => (broken ? destroy(c) : c.release());

  /** One run of a transaction on one connection. */
  const once = async <T>(fn: (tx: MyQueryable) => Promise<T>): Promise<T> => {
    const c = await acquire();
    let broken = false;
    const tx: MyQueryable = {
      query: async <R>(text: string, params?: unknown[]) =>
        (await run(c, text, params, () => (broken = true))) as MyResult<R>,
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

  /** A connection of the pipelining pool (opened on first use). */
  const acquirePipelining = async (): Promise<PoolConnection> => {
    if (closed) throw mapMysqlError(new Error('Pool is closed'));
    pipelining ??= createPool(true);
    return acquire(pipelining);
  };

  /** One call's deadline, plus one statement timeout for each statement after the first that may wait for a lock. */
  const batchDeadline = (statements: MyStatement[]) =>
    deadlineMs + Math.max(0, statements.filter((x) => x.waits).length - 1) * opts.statementTimeoutMs;

  /** One run of a pipelined transaction on a connection of the pipelining pool. */
  const oncePipelined = async <T>(fn: (tx: MyPipeline) => Promise<T>): Promise<T> => {
    const c = await acquirePipelining();
    let broken = false;
    let state = 'new' as 'new' | 'open' | 'committed';
    const batch = async (statements: MyStatement[], commit: boolean): Promise<MyResult[]> => {
      if (state === 'committed') throw new Error('pipelined transaction: a batch after COMMIT');
      const begin = state === 'new';
      const all = [...(begin ? [{ text: 'START TRANSACTION' }] : []), ...statements, ...(commit ? [{ text: 'COMMIT' }] : [])];
      const { text, params } = joined(all);
      state = 'open';
      const r = await send(c, text, params, () => (broken = true), batchDeadline(statements));
      if (commit) state = 'committed';
      return results(r, all.length).slice(begin ? 1 : 0, begin ? 1 + statements.length : statements.length).map(shape);
    };
    try {
      const value = await fn({ send: (x) => batch(x, false), commit: (x) => batch(x, true) });
      if (state === 'open' && !broken) await run(c, 'ROLLBACK', undefined, () => (broken = true)).catch(() => (broken = true));
      return value;
    } catch (e) {
      // No ROLLBACK on a dead or timed-out connection: the server rolls back when the session ends.
      if (!broken && state === 'open') await run(c, 'ROLLBACK', undefined, () => (broken = true)).catch(() => (broken = true));
      throw e;
    } finally {
      finish(c, broken);
    }
  };

  // Ending a pool ends each connection; one already dead (closed, its connect timed out, reset) reports a fatal
  // error that says only that it is gone: close() resolves. Other errors are the caller's.
  const end = (p: Pool) => p.end().catch((e: unknown) => {
    if ((e as { fatal?: unknown })?.fatal !== true && !/closed/i.test(String((e as Error)?.message))) throw mapMysqlError(e);
  });

  return {
    async query<R>(text: string, params?: unknown[]) {
      const c = await acquire();
      let broken = false;
      try {
        return (await run(c, text, params, () => (broken = true))) as MyResult<R>;
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
            (await run(c, text, params, () => (broken = true))) as MyResult<R>,
        });
      } finally {
        finish(c, broken);
      }
    },
    transaction: (fn) => retryDeadlock(() => once(fn)),
    pipelined: (fn) => retryDeadlock(() => oncePipelined(fn)),
    async batch(statements) {
      const { text, params } = joined(statements);
      const c = await acquirePipelining();
      let broken = false;
      try {
        return results(await send(c, text, params, () => (broken = true), batchDeadline(statements)), statements.length).map(shape);
      } finally {
        finish(c, broken);
      }
    },
    async server() {
      const c = await acquire();
      c.release();
      return detected!;
    },
    async close() {
      closed = true;
      await Promise.all([end(pool), ...(pipelining ? [end(pipelining)] : [])]);
    },
  };
}
