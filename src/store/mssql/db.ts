// One small runner over an mssql ConnectionPool: binds every param of a built query with its explicit type,
// returns all result sets, and maps driver errors into StoreError once (errors.ts).
import type { EventEmitter } from 'node:events';
import sql from 'mssql';
import type { SqlQuery } from './params.js';
import { mapMssqlError } from './errors.js';
import { CLIENT_DEADLINE_MARGIN_MS } from '../../limits.js';
import { withDeadline } from '../deadline.js';

export type Row = Record<string, unknown>;

export interface MssqlRunner {
  /** Run one parameterised batch (sp_executesql); returns its result sets in order. */
  run<R = Row>(q: SqlQuery): Promise<R[][]>;
  /** Run one unparameterised batch as is (like sqlcmd between two GO lines): migrations only. */
  runBatch(text: string): Promise<void>;
}

export interface MssqlDatabase extends MssqlRunner {
  /** BEGIN TRAN … COMMIT on one connection (READ COMMITTED, or RCSI when the database has it on);
   *  ROLLBACK if fn throws. With XACT_ABORT ON, any error inside already rolled the transaction back. */
  transaction<T>(fn: (tx: MssqlRunner) => Promise<T>): Promise<T>;
  close(): Promise<void>;
  readonly pool: sql.ConnectionPool;
}

/** Bind every param of a built query with its explicit type (never the driver's type inference). */
export function bindParams(request: sql.Request, q: SqlQuery): sql.Request {
  for (const param of q.params) request.input(param.name, param.type, param.value);
  return request;
}

/** Outer client-side deadline over tedious' own (requestTimeout + cancelTimeout, which closes the connection):
 *  defence in depth, the request is cancelled if it still has not settled. */
function deadlineOf(pool: sql.ConnectionPool): number {
  const c = (pool as unknown as { config?: { requestTimeout?: number } }).config;
  return (c?.requestTimeout ?? 15_000) + 2 * CLIENT_DEADLINE_MARGIN_MS;
}

function runner(newRequest: () => sql.Request, deadlineMs: number): MssqlRunner {
  return {
    async run<R>(q: SqlQuery): Promise<R[][]> {
      try {
        const request = bindParams(newRequest(), q);
        const r = await withDeadline(request.query(q.text), deadlineMs, () => request.cancel());
        return (r.recordsets ?? []) as unknown as R[][];
      } catch (e) {
        throw mapMssqlError(e);
      }
    },
    async runBatch(text: string): Promise<void> {
      try {
        await newRequest().batch(text);
      } catch (e) {
        throw mapMssqlError(e);
      }
    },
  };
}

/** mssql's Transaction internals this module relies on (mssql 12: base/transaction.js, tedious/transaction.js). */
interface TransactionInternals {
  _acquiredConnection: (EventEmitter & { close(): void }) | null;
  _acquiredConfig: unknown;
  _activeRequest: unknown;
  _abort: () => void;
}

/** A transaction whose rollback was refused ("There is a request in progress": the client deadline fired before the
 *  request settled) keeps its pooled connection checked out for good. Close it — the server rolls the transaction
 *  back when the session ends — and hand it back, as mssql does after a failed BEGIN: the pool's validation then
 *  destroys it instead of lending it out. */
function discardConnection(tx: sql.Transaction, pool: sql.ConnectionPool): void {
  const t = tx as unknown as TransactionInternals;
  const conn = t._acquiredConnection;
  if (!conn) return; // already released (rolled back by the server, or the rollback went through)
  conn.removeListener('rollbackTransaction', t._abort);
  t._acquiredConnection = null;
  t._acquiredConfig = null;
  t._activeRequest = null;
  conn.close();
  (pool as unknown as { release(c: unknown): void }).release(conn);
}

export function fromMssqlPool(pool: sql.ConnectionPool): MssqlDatabase {
  const deadlineMs = deadlineOf(pool);
  const base = runner(() => pool.request(), deadlineMs);
  return {
    ...base,
    pool,
    async transaction<T>(fn: (tx: MssqlRunner) => Promise<T>): Promise<T> {
      const tx = new sql.Transaction(pool);
      try {
        await tx.begin(sql.ISOLATION_LEVEL.READ_COMMITTED);
      } catch (e) {
        throw mapMssqlError(e);
      }
      let value: T;
      try {
        value = await fn(runner(() => tx.request(), deadlineMs));
      } catch (e) {
        // Already rolled back by the server when XACT_ABORT fired; then rollback() reports EABORT: ignore. A request
        // still in progress (its client deadline fired first) makes rollback() refuse: the connection is discarded.
        await tx.rollback().catch(() => discardConnection(tx, pool));
        throw e;
      }
      try {
        await tx.commit();
      } catch (e) {
        await tx.rollback().catch(() => {});
        throw mapMssqlError(e);
      }
      return value;
    },
    async close() {
      await pool.close();
    },
  };
}
