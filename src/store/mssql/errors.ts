// SQL Server driver errors (mssql/tedious) → StoreError, once. Transient = worth retrying on a fresh
// connection / next tick (deadlock victim, Azure SQL throttling and failover, connection loss, timeouts);
// conflict = a unique key was taken; data = a value refused (DATA_NUMBERS); everything else is fatal. Any StoreError from a lease renew or a fenced
// write drops leadership in the lease manager, whatever its kind.
import { StoreError, type StoreErrorKind } from '../ports.js';

/** SQL Server error numbers worth a retry. */
export const TRANSIENT_NUMBERS: ReadonlySet<number> = new Set([
  1205, // chosen as deadlock victim
  1222, // lock request time out period exceeded (SET LOCK_TIMEOUT)
  3960, // snapshot isolation update conflict
  40001, // serialization failure (SQLSTATE-style code some layers report)
  40197, // Azure SQL: service error processing the request (failover)
  40501, // Azure SQL: service busy (throttling)
  40613, // Azure SQL: database not currently available
  40143, 40540, // Azure SQL: service encountered an error / connection terminated
  49918, 49919, 49920, // Azure SQL: not enough resources / too many operations
  4060, // cannot open database requested by the login (failover, database resuming)
  10928, 10929, // Azure SQL: resource limit reached / server too busy
  233, 64, 10053, 10054, 10060, // transport-level errors reported by the server
]);

/** Unique key violations. */
export const CONFLICT_NUMBERS: ReadonlySet<number> = new Set([2627, 2601]);

/** A value the server refuses, every time (SQLSTATE classes 22/23 in other dialects). */
export const DATA_NUMBERS: ReadonlySet<number> = new Set([
  547, // a CHECK or FOREIGN KEY constraint conflict
  515, // NULL into a NOT NULL column
  2628, 8152, // string or binary data would be truncated
  220, 8115, // arithmetic overflow
  245, 8114, 241, 242, // conversion failed / out of range
]);

/** Driver / socket codes meaning the connection or the request was lost or timed out. */
export const TRANSIENT_CODES: ReadonlySet<string> = new Set([
  'ECONNRESET', 'ESOCKET', 'ETIMEOUT', 'ECONNCLOSED', 'ENOTOPEN', 'ENOCONN',
  'ECONNREFUSED', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND',
]);

interface DriverError {
  number?: unknown;
  code?: unknown;
  message?: unknown;
  info?: { number?: unknown };
  originalError?: DriverError;
}

function numberOf(e: DriverError | undefined): number | undefined {
  for (let cur = e, depth = 0; cur && depth < 4; cur = cur.originalError, depth++) {
    const n = typeof cur.number === 'number' ? cur.number : typeof cur.info?.number === 'number' ? cur.info.number : undefined;
    if (n !== undefined) return n;
  }
  return undefined;
}

function codesOf(e: DriverError | undefined): string[] {
  const out: string[] = [];
  for (let cur = e, depth = 0; cur && depth < 4; cur = cur.originalError, depth++) {
    if (typeof cur.code === 'string') out.push(cur.code);
  }
  return out;
}

export function mapMssqlError(e: unknown): StoreError {
  if (e instanceof StoreError) return e;
  const err = (typeof e === 'object' && e !== null ? e : {}) as DriverError;
  const message = typeof err.message === 'string' ? err.message : String(e);
  const num = numberOf(err);
  const codes = codesOf(err);
  let kind: StoreErrorKind = 'fatal';
  if (num !== undefined && CONFLICT_NUMBERS.has(num)) kind = 'conflict';
  else if (num !== undefined && DATA_NUMBERS.has(num)) kind = 'data';
  else if (num !== undefined && TRANSIENT_NUMBERS.has(num)) kind = 'transient';
  else if (codes.some((c) => TRANSIENT_CODES.has(c))) kind = 'transient';
  else if (/connection (is )?closed|connection lost|socket hang up|Failed to connect/i.test(message)) kind = 'transient';
  // Every pooled connection busy for the pool's acquire timeout (mssql's tarn TimeoutError, no number or code):
  // transient, like PostgreSQL's pool timeout — the next tick has its connections back.
  else if (/^Failed to acquire a connection from the pool/.test(message)) kind = 'transient';
  const code = num !== undefined ? String(num) : codes[0];
  return new StoreError(kind, message, code, { cause: e });
}
