// MySQL / MariaDB driver errors (mysql2) → StoreError, once. Transient = worth a retry on a fresh connection or
// the next tick (deadlock victim, lock wait timeout, statement timeout, connection loss, server shutdown);
// conflict = a unique key was taken; data = a value refused (SQLSTATE class 22/23); everything else is fatal. Any StoreError from a lease renew or a fenced
// write drops leadership in the lease manager, whatever its kind.
import { StoreError, type StoreErrorKind } from '../ports.js';

/** Server error numbers worth a retry. */
export const TRANSIENT_ERRNOS: ReadonlySet<number> = new Set([
  1213, // ER_LOCK_DEADLOCK: chosen as deadlock victim (the whole transaction was rolled back)
  1205, // ER_LOCK_WAIT_TIMEOUT (innodb_lock_wait_timeout)
  1969, // MariaDB ER_STATEMENT_TIMEOUT (max_statement_time)
  3024, // MySQL ER_QUERY_TIMEOUT (max_execution_time, SELECT only)
  1317, // ER_QUERY_INTERRUPTED (KILL QUERY)
  1053, // ER_SERVER_SHUTDOWN
  1040, // ER_CON_COUNT_ERROR: too many connections
  1927, // MariaDB ER_CONNECTION_KILLED
  4031, // MySQL: disconnected by the server (wait_timeout)
  2006, 2013, // client: server has gone away / lost connection during query
  1180, 1181, // ER_ERROR_DURING_COMMIT / ROLLBACK
]);

/** Unique key violations. */
export const CONFLICT_ERRNOS: ReadonlySet<number> = new Set([1062, 1586]);

/** Driver / socket codes meaning the connection or the request was lost or timed out. */
const TRANSIENT_CODES: ReadonlySet<string> = new Set([
  'ECONNRESET', 'ECONNREFUSED', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND', 'ECONNABORTED',
  'PROTOCOL_CONNECTION_LOST', 'PROTOCOL_SEQUENCE_TIMEOUT', 'PROTOCOL_ENQUEUE_AFTER_FATAL_ERROR', 'PROTOCOL_ENQUEUE_AFTER_QUIT',
]);

interface DriverError {
  sqlState?: unknown;
  errno?: unknown;
  code?: unknown;
  message?: unknown;
  fatal?: unknown;
}

/** A server-side error of one statement (the connection stays usable), as opposed to a fatal / client one. */
export function isStatementError(e: unknown): boolean {
  const err = e as DriverError;
  return typeof err?.errno === 'number' && err.fatal !== true && !(e instanceof StoreError) && !TRANSIENT_CODES.has(String(err.code));
}

export function mapMysqlError(e: unknown): StoreError {
  if (e instanceof StoreError) return e;
  const err = (typeof e === 'object' && e !== null ? e : {}) as DriverError;
  const message = typeof err.message === 'string' ? err.message : String(e);
  const errno = typeof err.errno === 'number' ? err.errno : undefined;
  const code = typeof err.code === 'string' ? err.code : undefined;
  let kind: StoreErrorKind = 'fatal';
  if (errno !== undefined && CONFLICT_ERRNOS.has(errno)) kind = 'conflict';
  // SQLSTATE class 22 (data exception: too long, out of range, bad value) or 23 (a CHECK, NOT NULL or foreign key
  // constraint; unique keys are conflicts above): the server refuses this value, every time.
  else if (errno !== undefined && /^(22|23)/.test(String(err.sqlState ?? ''))) kind = 'data';
  else if (errno !== undefined && TRANSIENT_ERRNOS.has(errno)) kind = 'transient';
  else if (code !== undefined && TRANSIENT_CODES.has(code)) kind = 'transient';
  else if (err.fatal === true) kind = 'transient'; // the connection broke: a fresh one may work
  else if (/connection (is )?(closed|lost)|Pool is closed|Can't add new command when connection is in closed state/i.test(message)) kind = 'transient';
  return new StoreError(kind, message, errno !== undefined ? String(errno) : code, { cause: e });
}
