// Row ↔ domain mapping for the PostgreSQL dialect (int8 arrives as string from pg, number from PGlite).
import type { AttemptRow, IntentContract, IntentRow, IntentStatus, ScheduleRow } from '../intentPorts.js';

/** last_modified_at as full-precision database text (microseconds, UTC): the refresh cursor/version. */
export const MODIFIED_TEXT = `to_char(last_modified_at AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')`;

export const INTENT_COLS = `intent_id, idempotency_key, request_hash, contract, status, attempt_count, max_attempts,
  next_attempt_at, created_at, last_modified_at, last_error, last_epoch`;

export const SCHEDULE_COLS = `intent_id, status, next_attempt_at, attempt_count, max_attempts, ${MODIFIED_TEXT} AS version`;

export interface IntentDbRow {
  intent_id: string;
  idempotency_key: string | null;
  request_hash: string;
  contract: IntentContract | string;
  status: IntentStatus;
  attempt_count: number;
  max_attempts: number;
  next_attempt_at: Date;
  created_at: Date;
  last_modified_at: Date;
  last_error: string | null;
  last_epoch: string | number | null;
}

export const toIntent = (r: IntentDbRow): IntentRow => ({
  intentId: r.intent_id,
  idempotencyKey: r.idempotency_key,
  requestHash: r.request_hash.trim(),
  contract: typeof r.contract === 'string' ? (JSON.parse(r.contract) as IntentContract) : r.contract,
  status: r.status,
  attemptCount: Number(r.attempt_count),
  maxAttempts: Number(r.max_attempts),
  nextAttemptAt: r.next_attempt_at,
  createdAt: r.created_at,
  lastModifiedAt: r.last_modified_at,
  lastError: r.last_error,
  lastEpoch: r.last_epoch === null ? null : Number(r.last_epoch),
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
  attemptCount: Number(r.attempt_count),
  maxAttempts: Number(r.max_attempts),
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
  attemptNo: Number(r.attempt_no),
  leaseEpoch: Number(r.lease_epoch),
  holderId: r.holder_id,
  startedAt: r.started_at,
  finishedAt: r.finished_at,
  outcome: r.outcome,
  httpStatus: r.http_status,
  error: r.error,
  durationMs: r.duration_ms,
});
