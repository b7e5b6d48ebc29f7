// Operations port: the execution control rows (pause/resume of the cluster and of each partition) and retention purge. Every dialect
// implements all of it (postgres/opsStore.ts, mssql/opsStore.ts). Same rules as ports.ts: database time
// only; ordinary outcomes are values; failures throw StoreError.
import type { Fenced, LeaseToken } from './ports.js';
import type { IntentStatus } from './intentPorts.js';

/** One pause flag of the execution-control table. No row = running (never paused). */
export interface PauseFlag {
  paused: boolean;
  /** When the flag last changed (database time); null when it never did. */
  changedAt: Date | null;
  /** Who changed it (the admin caller's description, e.g. the instance that served the request). */
  changedBy: string | null;
  reason: string | null;
}

/** The execution control row of one lease name (a partition's, or the cluster's: limits.ts clusterControlName), with
 *  the cluster-scope flag read in the same statement when asked for. */
export interface ExecutionControl extends PauseFlag {
  leaseName: string;
  /** The cluster-scope pause (the row `clusterName` names), read with this row; null when no clusterName was given. */
  cluster: PauseFlag | null;
  /** Database time when the row was read. */
  dbNow: Date;
  /** The oldest pending handover request of this lease name (read in the same round trip), or null. */
  pendingHandoverId: string | null;
  /** The provider circuit breaker as the leader last recorded it (null: never recorded). */
  providerBreaker: { state: string; changedAt: Date; holderId: string } | null;
}

/** A request that the leader hand over (drain, release, let any instance acquire), recorded by any instance. */
export interface HandoverRequest {
  requestId: string;
  leaseName: string;
  status: 'pending' | 'completed';
  requestedAt: Date;
  /** Who asked (the admin caller and the instance that served the request). */
  requestedBy: string;
  reason: string | null;
  /** The epoch that was leading when it was recorded (null: no live leader then). */
  requestedEpoch: number | null;
  /** Set when the leader finished its in-flight work and was about to release the lease. */
  completedAt: Date | null;
  completedEpoch: number | null;
  completedBy: string | null;
}

/** The last state a leader recorded for one maintenance task (retention): any instance shows it (the dashboard). */
export interface MaintenanceRecord {
  task: string;
  /** Consecutive failures when recorded (0: it succeeded again). */
  failures: number;
  /** The SQL error of the last failure (null once it succeeded again). */
  lastError: string | null;
  /** Database time of the record. */
  changedAt: Date;
  holderId: string;
}

/** The provider holds recorded for a cluster (issue 25): a breaker some leader opened and a Retry-After pause, which
 *  every process respects, as remaining ms by database time (so no process's clock matters). */
export interface ProviderHold {
  /** The breaker state last recorded, by whom, when. */
  breaker: string;
  holderId: string;
  changedAt: Date;
  /** Ms left before the recorded open breaker's cool-down ends (0: not open, or over). */
  openForMs: number;
  /** Ms left of the latest-ending recorded Retry-After pause (0: none, or over). */
  pausedForMs: number;
}

export interface PurgeResult {
  /** Terminal intents deleted. */
  intents: number;
  /** Their attempt rows deleted. */
  attempts: number;
}

/** The lease row of a cluster as the database holds it (null when no instance ever acquired it). */
export interface OverviewLease {
  holderId: string;
  leaseEpoch: number;
  acquiredAt: Date;
  renewedAt: Date;
  expiresAt: Date;
}

/**
 * A cluster's state from one statement (one snapshot, one database instant): what /api/metrics, /api/readyz
 * and the dashboard show. Every figure comes from an index: the lease primary key, per-status counts on
 * ix_intents_status_partition_due (status, partition_no, next_attempt_at), the due figures over every partition
 * (each partition's due range of that index, summed), the newest attempt on ix_attempts_started_at.
 */
/** The most settled (succeeded, cancelled) intents the overview counts per status: an exact count of every finished
 *  intent would read the whole table at each scrape; the open statuses and failed are counted exactly. */
export const SETTLED_COUNT_CAP = 100_000;

export interface ClusterOverview {
  leaseName: string;
  /** Database time when the statement ran; compare expiresAt etc. with this, never with a local clock. */
  dbNow: Date;
  lease: OverviewLease | null;
  /** Intents per status (every status present, 0 when none). Exact for the open statuses and failed; succeeded and
   *  cancelled are counted up to SETTLED_COUNT_CAP (a bounded index range), so at the cap the number is a lower bound. */
  intentsByStatus: Record<IntentStatus, number>;
  /** The statuses whose number in intentsByStatus reached SETTLED_COUNT_CAP: there are at least that many. */
  intentsCapped: IntentStatus[];
  /** Scheduled intents whose next_attempt_at ≤ dbNow (due now, waiting for the leader). */
  dueNow: number;
  /** next_attempt_at of the oldest due scheduled intent; null when nothing is due. */
  oldestDueAt: Date | null;
  /** dbNow − oldestDueAt in ms (0 when nothing is due). */
  oldestDueAgeMs: number;
  /** started_at of the newest attempt row (any outcome); null when there is none. */
  lastAttemptAt: Date | null;
}

export interface OpsStore {
  /** Read-only: the cluster overview of `leaseName` in one statement (see ClusterOverview). */
  getClusterOverview(leaseName: string): Promise<ClusterOverview>;
  /** One statement of primary-key reads (cheap enough for every refresh interval): the row of `leaseName` and, when
   *  `clusterName` is given, the cluster-scope row beside it (a partition runs only when neither is paused). */
  getExecutionControl(leaseName: string, clusterName?: string | null): Promise<ExecutionControl>;
  /** Upsert a maintenance task's state as the leader saw it: a failure (failures > 0, lastError) or its recovery
   *  (0, null). Informational, database time; `lastError` is cut to 1000 characters. */
  recordMaintenance(leaseName: string, task: string, holderId: string, failures: number, lastError: string | null): Promise<void>;
  /** Every recorded maintenance task of `leaseName`, by task name. */
  listMaintenance(leaseName: string): Promise<MaintenanceRecord[]>;
  /** Upsert the provider circuit-breaker state the leader observed (database time): for `open`, `openForMs` (its
   *  cool-down) sets when it closes again, which the other processes respect (getProviderHold); any other state clears it. */
  recordProviderBreaker(leaseName: string, state: string, holderId: string, openForMs?: number): Promise<void>;
  /** Record a Retry-After pause of the whole provider for `pauseMs` from database now: only ever moves the recorded end
   *  later. Creates the row (breaker `closed`) when there is none. */
  recordProviderPause(leaseName: string, pauseMs: number, holderId: string): Promise<void>;
  /** One primary-key read: the provider holds of `leaseName` (null: nothing ever recorded). */
  getProviderHold(leaseName: string): Promise<ProviderHold | null>;
  /** Upsert the flag of `leaseName`, a partition's or the cluster's (idempotent: pausing a paused one keeps the
   *  original changedAt). The row as it is then (cluster: null). */
  setPaused(leaseName: string, paused: boolean, changedBy: string, reason: string | null): Promise<ExecutionControl>;
  /**
   * Fenced by `token` (lease row locked to commit, audited as `purge_retention`): delete up to `limit`
   * intents of executor partition `partition` whose status is terminal (succeeded, failed, cancelled) and whose
   * last_modified_at is older than database now − `olderThanMs`, oldest first, with their attempts, in one
   * statement. Retention is per partition (issue 25): `token` is that partition's lease, and another partition's
   * rows are never touched (each partition's leader purges its own). Never touches a scheduled or in_flight intent. `timeoutMs` (default: the session's statement timeout) caps each statement of
   * the transaction, lock waits included, so a purge never holds its connection and the fence's lock longer than
   * the maintenance slice (the server cancels it: a failure, rolled back).
   */
  fencedPurgeTerminal(token: LeaseToken, partition: number, olderThanMs: number, limit: number, timeoutMs?: number): Promise<Fenced<PurgeResult>>;
  /**
   * Record a handover request for `leaseName` (database time). At most one is pending per lease name: while one
   * is, this returns it (`created` false) instead of adding another.
   */
  requestHandover(leaseName: string, requestId: string, requestedBy: string, reason: string | null): Promise<{ request: HandoverRequest; created: boolean }>;
  /** The newest `limit` requests of `leaseName` (pending and completed), newest first. */
  listHandovers(leaseName: string, limit: number): Promise<HandoverRequest[]>;
  /**
   * Fenced by `token` (audited as `complete_handover`): mark the pending request `requestId` completed by this
   * holder and epoch. The request as it is now (null if unknown); `applied` false when it was not pending.
   */
  fencedCompleteHandover(token: LeaseToken, requestId: string): Promise<Fenced<{ request: HandoverRequest | null; applied: boolean }>>;
}
