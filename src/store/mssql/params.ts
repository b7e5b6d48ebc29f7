// Typed query parameters for the SQL Server dialect. Every query is built by a small pure function that
// returns { text, params } and a runner binds each param with its explicit mssql type, so tests can inspect
// what would be sent without a server. Never let the driver infer a type: an untyped JS Date is sent as
// `datetime` (1/300 s, rounded), which compares wrongly with datetime2(7) columns and skips rows.
import sql from 'mssql';
import type { ISqlType } from 'mssql';
import { StoreError } from '../ports.js';

export type SqlValue = string | number | boolean | Date | null;

export interface SqlParam {
  /** Name without the leading `@`. */
  name: string;
  type: ISqlType;
  value: SqlValue;
}

export interface SqlQuery {
  text: string;
  params: SqlParam[];
}

/** Canonical 8-4-4-4-12 UUID text. */
const UUID_RE = /^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$/i;
/** The refresh cursor as SQL Server writes it: CONVERT(char(27), datetime2(7), 121) = 'yyyy-mm-dd hh:mi:ss.fffffff'
 *  (fewer fraction digits parse the same way; an ISO 'T…Z' string from a JS Date never does). */
export const CURSOR_TEXT_RE = /^\d{4}-\d{2}-\d{2} \d{2}:\d{2}:\d{2}(\.\d{1,7})?$/;
export { NIL_UUID } from '../rowMapping.js';

/** Identifier columns compare byte-wise (case-sensitive, plain string order), like PostgreSQL. */
export const BIN2 = 'Latin1_General_100_BIN2';

/** The opening of a write batch: any error rolls its whole transaction back (XACT_ABORT), no row counts sent back,
 *  `@now` the database's UTC time. */
export const BATCH_START = 'SET XACT_ABORT ON;\nSET NOCOUNT ON;\nDECLARE @now datetime2(7) = SYSUTCDATETIME();';

const invalid = (message: string) => new StoreError('fatal', message, 'EARGS');

/** Is `value` UUID text (any case)? For reads that answer "no such row" to any other id instead of failing. */
export const isUuidText = (value: unknown): boolean => typeof value === 'string' && UUID_RE.test(value);

/** Canonical lower-case UUID text, or a fatal StoreError (as PostgreSQL's uuid input would raise). */
export function uuidText(name: string, value: string): string {
  if (typeof value !== 'string' || !UUID_RE.test(value)) throw invalid(`@${name}: invalid input syntax for a UUID: "${String(value).slice(0, 64)}"`);
  return value.toLowerCase();
}

function text(name: string, value: string | null, max: number): string | null {
  if (value === null) return null;
  if (typeof value !== 'string') throw invalid(`@${name}: expected a string`);
  if (value.length > max) throw invalid(`@${name}: value longer than ${max} characters`);
  return value;
}

function integer(name: string, value: number | null, min: number, max: number): number | null {
  if (value === null) return null;
  if (!Number.isInteger(value) || value < min || value > max) throw invalid(`@${name}: expected an integer in [${min}, ${max}], got ${value}`);
  return value;
}

/** Builders for typed parameters; each validates its value the way the column would. */
export const p = {
  varchar: (name: string, length: number, value: string | null): SqlParam =>
    ({ name, type: sql.VarChar(length), value: text(name, value, length) }),
  nvarchar: (name: string, length: number, value: string | null): SqlParam =>
    ({ name, type: sql.NVarChar(length), value: text(name, value, length) }),
  nvarcharMax: (name: string, value: string | null): SqlParam =>
    ({ name, type: sql.NVarChar(sql.MAX), value: text(name, value, Number.MAX_SAFE_INTEGER) }),
  char: (name: string, length: number, value: string | null): SqlParam =>
    ({ name, type: sql.Char(length), value: text(name, value, length) }),
  /** intent_id: char(36), lower case (what PostgreSQL's uuid type prints), so order is plain string order. */
  uuid: (name: string, value: string | null): SqlParam =>
    ({ name, type: sql.Char(36), value: value === null ? null : uuidText(name, value) }),
  int: (name: string, value: number | null): SqlParam =>
    ({ name, type: sql.Int(), value: integer(name, value, -2_147_483_648, 2_147_483_647) }),
  /** partition_no (smallint): typed as the column, so a comparison with it stays an index seek. */
  smallint: (name: string, value: number | null): SqlParam =>
    ({ name, type: sql.SmallInt(), value: integer(name, value, -32_768, 32_767) }),
  /** An unsigned 32-bit hash (partitionHash), sent as bigint so its modulo stays in bigint arithmetic. */
  uint32: (name: string, value: number | null): SqlParam =>
    ({ name, type: sql.BigInt(), value: integer(name, value, 0, 4_294_967_295) }),
  bigint: (name: string, value: number | null): SqlParam =>
    ({ name, type: sql.BigInt(), value: integer(name, value, Number.MIN_SAFE_INTEGER, Number.MAX_SAFE_INTEGER) }),
  datetime2: (name: string, value: Date | null): SqlParam => {
    if (value !== null && (!(value instanceof Date) || Number.isNaN(value.getTime()))) throw invalid(`@${name}: expected a valid Date`);
    return { name, type: sql.DateTime2(7), value };
  },
  /** A full-precision timestamp as the database's own text; only ever cast back with CONVERT(datetime2(7), @x, 121). */
  cursorText: (name: string, value: string): SqlParam => {
    if (!CURSOR_TEXT_RE.test(value)) throw invalid(`@${name}: not a SQL Server cursor (yyyy-mm-dd hh:mi:ss.fffffff): "${value.slice(0, 40)}"`);
    return { name, type: sql.VarChar(27), value };
  },
};
