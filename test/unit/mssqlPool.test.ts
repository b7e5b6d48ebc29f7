// The SQL Server pool glue (src/store/mssql/db.ts, errors.ts) against the real mssql driver objects — ConnectionPool,
// Transaction, Request and the tarn pool inside — with only the tedious connection scripted (no SQL Server can run
// here): a connection that never answers stands for a frozen server or a blackholed network. Issue 21 items 2, 3.
import { createRequire } from 'node:module';
import { EventEmitter } from 'node:events';
import { describe, expect, it } from 'vitest';
import sql from 'mssql';
import { fromMssqlPool } from '../../src/store/mssql/db.js';
import { mapMssqlError } from '../../src/store/mssql/errors.js';
import { StoreError } from '../../src/store/ports.js';

// tarn is mssql's own pool (resolved from mssql, not a dependency of ours).
const tarn = createRequire(createRequire(import.meta.url).resolve('mssql'))('tarn') as {
  Pool: new (o: Record<string, unknown>) => { numUsed(): number; numFree(): number; destroy(): Promise<unknown> };
};

/** A tedious connection that begins transactions but never answers a request (cancel included). */
class SilentConnection extends EventEmitter {
  closed = false;
  hasError = false;
  beginTransaction(cb: (err?: Error) => void) {
    setImmediate(cb);
  }
  execSql() {}
  execSqlBatch() {}
  cancel() {}
  rollbackTransaction(cb: (err?: Error) => void) {
    setImmediate(cb);
  }
  close() {
    this.closed = true;
  }
}

/** A real mssql ConnectionPool whose tarn pool hands out SilentConnections (max `max`). */
function silentPool(max: number, acquireTimeoutMillis = 100) {
  const pool = new sql.ConnectionPool({ server: 'unused.invalid', requestTimeout: 1 });
  const created: SilentConnection[] = [];
  const destroyed: SilentConnection[] = [];
  const inner = new tarn.Pool({
    create: async () => {
      const c = new SilentConnection();
      created.push(c);
      return c;
    },
    destroy: (c: SilentConnection) => void destroyed.push(c),
    validate: (c: SilentConnection) => !c.closed,
    min: 0, max, acquireTimeoutMillis,
  });
  Object.assign(pool, { pool: inner, _connected: true });
  return { pool, inner, created, destroyed };
}

describe('mssql pool glue against the driver objects', () => {
  it('a pool acquire timeout ("Failed to acquire a connection from the pool") is transient', async () => {
    const { pool, inner } = silentPool(1);
    const tx = new sql.Transaction(pool);
    await tx.begin(); // holds the only connection
    const err = await pool.request().query('SELECT 1').then(() => null, (e: unknown) => e);
    expect(String((err as Error).message)).toMatch(/^Failed to acquire a connection from the pool/);
    const mapped = mapMssqlError(err);
    expect(mapped).toBeInstanceOf(StoreError);
    expect(mapped.kind).toBe('transient');
    await tx.rollback();
    await inner.destroy();
  });

  it('transaction(): when the client deadline fires first, the pooled connection is not leaked (closed and returned)', async () => {
    const { pool, inner, created, destroyed } = silentPool(1);
    const db = fromMssqlPool(pool);
    // The request never answers: the client deadline (requestTimeout + 2 × margin) rejects it; rollback() then
    // finds the request still in progress.
    const out = await db.transaction((tx) => tx.run({ text: 'SELECT 1', params: [] })).then(() => null, (e: unknown) => e);
    expect(out).toMatchObject({ kind: 'transient', code: 'CLIENT_DEADLINE' });
    await new Promise((r) => setImmediate(r));
    expect(created).toHaveLength(1);
    expect(created[0]!.closed).toBe(true); // the server ends the session's transaction with it
    expect(inner.numUsed()).toBe(0); // back in the pool (before the fix: still checked out, for good)
    // The next transaction gets a fresh connection: the closed one fails validation and is destroyed.
    const tx = new sql.Transaction(pool);
    await tx.begin();
    expect(created).toHaveLength(2);
    expect(destroyed).toEqual([created[0]]);
    await tx.rollback();
    await inner.destroy();
  }, 10_000);
});
