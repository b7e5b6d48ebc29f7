// Insight port: the read-only queries behind the operator dashboard (any instance; SQL only, never in-memory
// state). Every query is bounded (LIMIT / TOP) and reads an index: lease events by their sequence, attempts by
// ix_attempts_started_at, intents by primary key, idempotency key, ix_intents_status_partition_due, or each
// partition's range of ix_intents_partition_modified merged (recent failures: partition-first since issue 25).
import type { IntentRow, IntentStatus } from './intentPorts.js';
import type { LeaseEvent } from './ports.js';

/** One minute of attempts (by started_at, database time). */
export interface AttemptMinute {
  /** Start of the minute (UTC). */
  minute: Date;
  started: number;
  /** retryable_error, permanent_error or abandoned. */
  errors: number;
  succeeded: number;
}

export interface IntentSearch {
  intentId: string | null;
  idempotencyKey: string | null;
  status: IntentStatus | null;
  /** created_at ≥ from / < to; null = unbounded. */
  createdFrom: Date | null;
  createdTo: Date | null;
  /** Exclusive intent-id cursor: results are newest first (intent_id descending). */
  before: string | null;
  limit: number;
}

/** A redrive that moved this intent. */
export interface IntentRedrive {
  redriveId: string;
  requestedAt: Date;
  requestedBy: string;
  reason: string | null;
  attemptsBefore: number;
}

/** How many of the newest attempts (all partitions, by started_at on ix_attempts_started_at) `partitionStates` reads
 *  to find each partition's latest start: a bounded read however large the attempts table is. A partition without
 *  an attempt among them shows none (idle, or far behind the others). */
export const PARTITION_ATTEMPT_SCAN = 10_000;

/** A partition to read: its number and its lease row's name (src/limits.ts partitionLeaseName). */
export interface PartitionRef {
  partition: number;
  leaseName: string;
}

/** One partition's lease row and work as the database holds them (GET /api/leases). */
export interface PartitionState extends PartitionRef {
  /** The lease row (null: never acquired); whether it is held is judged against `dbNow`. */
  lease: { holderId: string; leaseEpoch: number; acquiredAt: Date; renewedAt: Date; expiresAt: Date } | null;
  /** Scheduled intents of the partition, and those of them due (next_attempt_at ≤ database now). */
  scheduled: number;
  due: number;
  /** The latest attempt start of the partition among the newest PARTITION_ATTEMPT_SCAN attempts (null: none there). */
  lastAttemptAt: Date | null;
}

/** One partition's operator controls as the database holds them (the dashboard's Partitions card). */
export interface PartitionControl extends PartitionRef {
  /** The partition's execution control row (no row: running, never paused). */
  paused: boolean;
  changedAt: Date | null;
  changedBy: string | null;
  reason: string | null;
  /** The partition's pending handover (drain) request, which its leader completes at its next refresh (null: none). */
  pendingHandover: { requestId: string; requestedAt: Date; requestedBy: string } | null;
  /** The partition's failing maintenance task (retention) as its leader recorded it: the one with the most failures
   *  in a row (null: none failing). */
  failingMaintenance: { task: string; failures: number; lastError: string | null; changedAt: Date; holderId: string } | null;
}

export interface InsightStore {
  /** Each of `partitions` (at least one) in the given order, read in one statement with database now: the lease rows
   *  by primary key, the backlog grouped by partition_no (each partition's scheduled range of
   *  ix_intents_status_partition_due), the latest starts grouped by partition_no over the newest
   *  PARTITION_ATTEMPT_SCAN attempts. Never one query per partition. */
  partitionStates(partitions: readonly PartitionRef[]): Promise<{ dbNow: Date; partitions: PartitionState[] }>;
  /** Each of `partitions` (at least one) in the given order, read in one statement: its execution control row by
   *  primary key, its pending handover request (by the one-pending-per-lease unique index; the oldest on SQL
   *  Server) and its failing maintenance task (the maintenance rows' primary key range). Never one query per partition. */
  partitionControls(partitions: readonly PartitionRef[]): Promise<PartitionControl[]>;
  /** The newest `limit` lease events of `leaseName`, newest first. */
  recentLeaseEvents(leaseName: string, limit: number): Promise<LeaseEvent[]>;
  /** Attempts per minute over the last `windowMs` of database time (minutes without attempts are absent), oldest first, with database now. */
  attemptsPerMinute(windowMs: number): Promise<{ dbNow: Date; minutes: AttemptMinute[] }>;
  /** The `limit` most recently failed intents (status failed, newest last_modified_at first). */
  recentFailures(limit: number): Promise<IntentRow[]>;
  /** Intents matching every given criterion, newest first (by intent id, which is time-ordered). */
  searchIntents(q: IntentSearch): Promise<IntentRow[]>;
  /** The redrives that moved `intentId`, oldest first (at most 100). */
  redrivesOf(intentId: string): Promise<IntentRedrive[]>;
}
