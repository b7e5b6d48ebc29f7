// Row ↔ domain mapping shared by the SQL dialects: column names are identical in both; drivers differ only
// in how they deliver bigint (string) and JSON (text or object), which these mappers absorb.
import type {
  AttemptRow, CompletedAttempt, IntentContract, IntentRow, IntentStatus, ScheduleRow, StartedAttempt,
} from './intentPorts.js';
import type { LeaseRow } from './ports.js';
import { SETTLED_COUNT_CAP, type ClusterOverview, type ExecutionControl, type HandoverRequest, type MaintenanceRecord, type ProviderHold } from './opsPorts.js';

/** The smallest uuid: the start of an id-ordered scan and the intent id of a rebuild's first cursor. */
export const NIL_UUID = '00000000-0000-0000-0000-000000000000';

export const num = (v: unknown): number => Number(v);
export const numOrNull = (v: unknown): number | null => (v === null || v === undefined ? null : Number(v));

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
  contract: string | IntentContract;
  status: IntentStatus;
  attempt_count: number;
  max_attempts: number;
  next_attempt_at: Date;
  created_at: Date;
  last_modified_at: Date;
  last_error: string | null;
  last_epoch: string | number | null;
  partition_no: string | number;
  partition_key: string | null;
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
  partition: num(r.partition_no),
  partitionKey: r.partition_key,
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

/** A row the fenced start returns: the intent as it is now in flight, with its new attempt number. */
export interface StartedDbRow {
  intent_id: string;
  attempt_count: number;
  max_attempts: number;
  contract: string | IntentContract;
  version: string;
  /** Aborted (never sent) attempts before this one: they do not count toward max_attempts. */
  aborted_before: number;
}

export const toStartedAttempt = (x: StartedDbRow): StartedAttempt => ({
  intentId: x.intent_id,
  attemptNo: num(x.attempt_count),
  maxAttempts: num(x.max_attempts),
  abortedBefore: num(x.aborted_before),
  contract: parseContract(x.contract),
  version: x.version,
});

/** A row the fenced completion returns per request: `intent_id` is null when the intent had moved on. */
export type CompletedDbRow = Partial<ScheduleDbRow> & { req_id: string };

export const toCompletedAttempt = (x: CompletedDbRow): CompletedAttempt => ({
  intentId: x.req_id,
  applied: x.intent_id != null,
  row: x.intent_id != null ? toScheduleRow(x as ScheduleDbRow) : null,
});

/** The execution-control (pause) row; an absent row reads as not paused. */
export interface ControlDbRow {
  lease_name: string | null;
  paused: boolean | null;
  changed_at: Date | null;
  changed_by: string | null;
  reason: string | null;
  db_now: Date;
  pending_handover_id?: string | null;
  breaker?: string | null;
  breaker_changed_at?: Date | null;
  breaker_holder_id?: string | null;
  /** The cluster-scope row's columns (getExecutionControl with a clusterName). */
  cluster_paused?: boolean | null;
  cluster_changed_at?: Date | null;
  cluster_changed_by?: string | null;
  cluster_reason?: string | null;
}

export interface MaintenanceDbRow {
  task: string;
  failures: number | string;
  last_error: string | null;
  changed_at: Date;
  holder_id: string;
}

export const toMaintenance = (r: MaintenanceDbRow): MaintenanceRecord => ({
  task: r.task, failures: Number(r.failures), lastError: r.last_error, changedAt: r.changed_at, holderId: r.holder_id,
});

/** Maintenance record arguments as stored (holder and error cut to their columns). */
export const maintenanceArgs = (holderId: string, lastError: string | null) => ({
  holder: holderId.slice(0, 128), error: lastError === null ? null : lastError.slice(0, 1000),
});

export const toControl = (leaseName: string, r: ControlDbRow, clusterName: string | null = null): ExecutionControl => ({
  leaseName,
  cluster: clusterName === null ? null
    : { paused: r.cluster_paused === true, changedAt: r.cluster_changed_at ?? null, changedBy: r.cluster_changed_by ?? null, reason: r.cluster_reason ?? null },
  paused: r.paused === true,
  changedAt: r.changed_at,
  changedBy: r.changed_by,
  reason: r.reason,
  dbNow: r.db_now,
  pendingHandoverId: r.pending_handover_id ?? null,
  providerBreaker: r.breaker && r.breaker_changed_at && r.breaker_holder_id
    ? { state: r.breaker, changedAt: r.breaker_changed_at, holderId: r.breaker_holder_id } : null,
});

/** A handover request row (both dialects select the same column names). */
export interface HandoverDbRow {
  request_id: string;
  lease_name: string;
  status: string;
  requested_at: Date;
  requested_by: string;
  reason: string | null;
  requested_epoch: string | number | null;
  completed_at: Date | null;
  completed_epoch: string | number | null;
  completed_by: string | null;
}

export const HANDOVER_COLS = 'request_id, lease_name, status, requested_at, requested_by, reason, requested_epoch, completed_at, completed_epoch, completed_by';

export const toHandover = (r: HandoverDbRow): HandoverRequest => ({
  requestId: String(r.request_id).toLowerCase(),
  leaseName: r.lease_name,
  status: r.status === 'completed' ? 'completed' : 'pending',
  requestedAt: r.requested_at,
  requestedBy: r.requested_by,
  reason: r.reason,
  requestedEpoch: r.requested_epoch === null ? null : Number(r.requested_epoch),
  completedAt: r.completed_at,
  completedEpoch: r.completed_epoch === null ? null : Number(r.completed_epoch),
  completedBy: r.completed_by,
});

/** The one-row cluster overview (both dialects alias the same columns; counts may arrive as bigint text). */
export interface OverviewDbRow {
  db_now: Date;
  holder_id: string | null;
  lease_epoch: string | number | null;
  acquired_at: Date | null;
  renewed_at: Date | null;
  expires_at: Date | null;
  n_scheduled: string | number;
  n_in_flight: string | number;
  n_succeeded: string | number;
  n_failed: string | number;
  n_cancelled: string | number;
  due_now: string | number;
  oldest_due_at: Date | null;
  last_attempt_at: Date | null;
}

export const toOverview = (leaseName: string, r: OverviewDbRow): ClusterOverview => ({
  leaseName,
  dbNow: r.db_now,
  lease: r.holder_id === null ? null : {
    holderId: r.holder_id, leaseEpoch: num(r.lease_epoch), acquiredAt: r.acquired_at!, renewedAt: r.renewed_at!, expiresAt: r.expires_at!,
  },
  intentsByStatus: {
    scheduled: num(r.n_scheduled), in_flight: num(r.n_in_flight), succeeded: num(r.n_succeeded),
    failed: num(r.n_failed), cancelled: num(r.n_cancelled),
  },
  intentsCapped: (['succeeded', 'cancelled'] as const).filter((s) => num(r[`n_${s}`]) >= SETTLED_COUNT_CAP),
  dueNow: num(r.due_now),
  oldestDueAt: r.oldest_due_at,
  oldestDueAgeMs: r.oldest_due_at === null ? 0 : Math.max(0, r.db_now.getTime() - r.oldest_due_at.getTime()),
  lastAttemptAt: r.last_attempt_at,
});

/** A provider_state row with database now (every dialect's getProviderHold). */
export interface ProviderHoldDbRow {
  breaker: string;
  changed_at: Date;
  holder_id: string;
  open_until: Date | null;
  paused_until: Date | null;
  db_now: Date;
}

export function toProviderHold(r: ProviderHoldDbRow): ProviderHold {
  const left = (until: Date | null) => (until ? Math.max(0, until.getTime() - r.db_now.getTime()) : 0);
  return { breaker: r.breaker, holderId: r.holder_id, changedAt: r.changed_at, openForMs: left(r.open_until), pausedForMs: left(r.paused_until) };
}
