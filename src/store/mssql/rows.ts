// Row ↔ domain mapping for the SQL Server dialect. tedious returns bigint as string, bit as boolean,
// datetime2 as a JS Date (UTC, truncated to the millisecond), so full-precision times travel as text.
import type { AttemptRow, IntentContract, IntentRow, IntentStatus, ScheduleRow } from '../intentPorts.js';
import type { LeaseRow } from '../ports.js';

/** last_modified_at as full-precision database text (100 ns, UTC): the refresh cursor / row version. */
export const modifiedText = (col: string) => `CONVERT(char(27), ${col}, 121)`;

const INTENT_COL_NAMES = ['intent_id', 'idempotency_key', 'request_hash', 'contract', 'status', 'attempt_count', 'max_attempts',
  'next_attempt_at', 'created_at', 'last_modified_at', 'last_error', 'last_epoch'] as const;

/** Intent columns, optionally qualified (`inserted.` in an OUTPUT clause, `i.` in a join). */
export const intentCols = (prefix = '') => INTENT_COL_NAMES.map((c) => `${prefix}${c}`).join(', ');

export const scheduleCols = (prefix = '') =>
  `${prefix}intent_id, ${prefix}status, ${prefix}next_attempt_at, ${prefix}attempt_count, ${prefix}max_attempts, ` +
  `${modifiedText(`${prefix}last_modified_at`)} AS version`;

export const LEASE_COLS = 'lease_name, holder_id, lease_epoch, acquired_at, renewed_at, expires_at';
export const leaseCols = (prefix = '') => LEASE_COLS.split(', ').map((c) => `${prefix}${c}`).join(', ');

export const ATTEMPT_COLS = 'intent_id, attempt_no, lease_epoch, holder_id, started_at, finished_at, outcome, http_status, error, duration_ms';

const num = (v: unknown): number => Number(v);
const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

export interface LeaseDbRow {
  lease_name: string;
  holder_id: string;
  lease_epoch: string | number;
  acquired_at: Date;
  renewed_at: Date;
  expires_at: Date;
  db_now: Date;
}

export const toLease = (r: LeaseDbRow): LeaseRow => ({
  leaseName: r.lease_name,
  holderId: r.holder_id,
  leaseEpoch: num(r.lease_epoch),
  acquiredAt: r.acquired_at,
  renewedAt: r.renewed_at,
  expiresAt: r.expires_at,
  dbNow: r.db_now,
});

export interface IntentDbRow {
  intent_id: string;
  idempotency_key: string | null;
  request_hash: string;
  contract: string;
  status: IntentStatus;
  attempt_count: number;
  max_attempts: number;
  next_attempt_at: Date;
  created_at: Date;
  last_modified_at: Date;
  last_error: string | null;
  last_epoch: string | number | null;
}

export const parseContract = (c: unknown): IntentContract => (typeof c === 'string' ? JSON.parse(c) : c) as IntentContract;

export const toIntent = (r: IntentDbRow): IntentRow => ({
  intentId: r.intent_id,
  idempotencyKey: r.idempotency_key,
  requestHash: r.request_hash.trim(),
  contract: parseContract(r.contract),
  status: r.status,
  attemptCount: num(r.attempt_count),
  maxAttempts: num(r.max_attempts),
  nextAttemptAt: r.next_attempt_at,
  createdAt: r.created_at,
  lastModifiedAt: r.last_modified_at,
  lastError: r.last_error,
  lastEpoch: numOrNull(r.last_epoch),
});

export interface ScheduleDbRow {
  intent_id: string;
  status: IntentStatus;
  next_attempt_at: Date;
  attempt_count: number;
  max_attempts: number;
  version: string;
}

export const toScheduleRow = (r: ScheduleDbRow): ScheduleRow => ({
  intentId: r.intent_id,
  status: r.status,
  nextAttemptAt: r.next_attempt_at,
  attemptCount: num(r.attempt_count),
  maxAttempts: num(r.max_attempts),
  version: r.version,
});

export interface AttemptDbRow {
  intent_id: string;
  attempt_no: number;
  lease_epoch: string | number;
  holder_id: string;
  started_at: Date;
  finished_at: Date | null;
  outcome: AttemptRow['outcome'];
  http_status: number | null;
  error: string | null;
  duration_ms: number | null;
}

export const toAttempt = (r: AttemptDbRow): AttemptRow => ({
  intentId: r.intent_id,
  attemptNo: num(r.attempt_no),
  leaseEpoch: num(r.lease_epoch),
  holderId: r.holder_id,
  startedAt: r.started_at,
  finishedAt: r.finished_at,
  outcome: r.outcome,
  httpStatus: numOrNull(r.http_status),
  error: r.error,
  durationMs: numOrNull(r.duration_ms),
});
