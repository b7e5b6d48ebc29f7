// PostgreSQL driver errors → StoreError, once for both pg and PGlite.
import { StoreError, type StoreErrorKind } from '../ports.js';

const TRANSIENT_SQLSTATE = /^(08|53|57P0|40001|40P01|55P03|57014|25P03)/; // connection, resources, shutdown, serialization, deadlock, lock timeout, cancel, idle-in-tx timeout
const CONFLICT_SQLSTATE = /^23505$/; // unique_violation
const DATA_SQLSTATE = /^(22|23)/; // data exception, integrity constraint violation (other than unique_violation)
const TRANSIENT_ERRNO = new Set(['ECONNRESET', 'ECONNREFUSED', 'ETIMEDOUT', 'EPIPE', 'EHOSTUNREACH', 'ENOTFOUND']);

export function mapPgError(e: unknown): StoreError {
  if (e instanceof StoreError) return e;
  const err = e as { code?: unknown; message?: unknown };
  const code = typeof err?.code === 'string' ? err.code : undefined;
  const message = typeof err?.message === 'string' ? err.message : String(e);
  let kind: StoreErrorKind = 'fatal';
  if (code && CONFLICT_SQLSTATE.test(code)) kind = 'conflict';
  else if (code && DATA_SQLSTATE.test(code)) kind = 'data';
  else if (code && (TRANSIENT_SQLSTATE.test(code) || TRANSIENT_ERRNO.has(code))) kind = 'transient';
  else if (/Connection terminated|connection.*(closed|ended)|timeout exceeded when trying to connect|Client has encountered a connection error/i.test(message)) kind = 'transient';
  return new StoreError(kind, message, code, { cause: e });
}
