// The limits and settings shapes the configuration checks relate (src/config.ts), owned here so the checks and the
// code they bound read one definition and cannot drift apart: the tick's arithmetic (invocation margin, closing
// reserve, settle window, timer period), the client-side deadline margin, the provider pool size, and the guard's
// and maintenance's settings.
// May import: nothing of ours (a leaf).
import { Cron } from 'croner';

/** How far above the server-side statement timeout the client-side deadline sits. */
export const CLIENT_DEADLINE_MARGIN_MS = 1_000;

/** Sockets per provider origin in the HTTP client's pool (httpProvider.ts); EXECUTOR_CONCURRENCY may not exceed it
 *  (src/config.ts): a call beyond it would queue inside the pool, unseen by the gate, and could be written late. */
export const PROVIDER_POOL_CONNECTIONS = 256;

export interface GuardSettings {
  /** Calls per second at most; 0 = unlimited. */
  ratePerSec: number;
  /** Calls in flight at most; 0 = unlimited. */
  maxInFlight: number;
  /** Consecutive retryable failures that open the breaker; 0 = no breaker. */
  breakerThreshold: number;
  breakerCooldownMs: number;
  /** The longest a Retry-After may pause the whole provider. */
  retryAfterMaxMs: number;
}

export interface MaintenanceSettings {
  /** Longest slice a tick leaves free for maintenance when a task is due (capped at a quarter of the tick). */
  sliceMs: number;
  backoffBaseMs: number;
  backoffMaxMs: number;
}

export const DEFAULT_MAINTENANCE: MaintenanceSettings = { sliceMs: 1_000, backoffBaseMs: 1_000, backoffMaxMs: 300_000 };

/** The shortest gap between the schedule's next few occurrences (throws on an invalid expression). */
export function shortestPeriodMs(schedule: string, from = new Date()): number {
  const runs = new Cron(schedule, { paused: true, timezone: 'Etc/UTC' }).nextRuns(6, from);
  let min = Number.POSITIVE_INFINITY;
  for (let i = 1; i < runs.length; i++) min = Math.min(min, runs[i]!.getTime() - runs[i - 1]!.getTime());
  return min;
}

/** An invocation (and a shutdown) ends this long before host.json functionTimeout, when the host kills it. */
export const INVOCATION_MARGIN_MS = 5_000;
/** The smallest budget worth a tick after the first in one invocation. */
export const MIN_TICK_BUDGET_MS = 1_000;

/** Closing a batch retries an unwritten completion batch for this long: room for one more write after a failed one. */
export function settleWindowMs(statementTimeoutMs: number): number {
  return Math.min(2 * statementTimeoutMs, 10_000);
}

/**
 * The longest a tick can run past its budget, each database call bounded by connect (PostgreSQL: max(1 s, the
 * statement timeout)) + its client-side deadline: the last statement begun before the deadline, overlapping the
 * calls in flight (provider timeout); a renew while they finish; the awaited completion write; the settle window
 * and the retry begun at its end; a handover record and the row release. (An acquire that ran over — up to three
 * calls with a lost reply — leaves nothing in flight.) An invocation fits its ticks' budgets around this.
 */
export function closingReserveMs(o: { providerTimeoutMs: number; statementTimeoutMs: number }): number {
  const dbCallMs = Math.max(1_000, o.statementTimeoutMs) + o.statementTimeoutMs + CLIENT_DEADLINE_MARGIN_MS;
  return Math.max(o.providerTimeoutMs, dbCallMs) + settleWindowMs(o.statementTimeoutMs) + 5 * dbCallMs;
}

// Lease names of executor partitions (issue 25): each partition has its own lease row, epoch, events and fence.
// Partition 0 keeps LEASE_NAME itself, so with EXECUTOR_PARTITIONS=1 the lease row, the routes and every figure are
// today's; partition k > 0 is `LEASE_NAME#k`. Config keeps LEASE_NAME short enough for the suffix.

/** EXECUTOR_PARTITIONS at most. Each partition will be a lease row renewed on its own, a timer function with its own
 *  listener lock on Azure and a leader holding up to LEADER_DB_CONNECTIONS (config.ts) connections: 64 partitions are already
 *  192 leader connections (beyond a small server's limit) and more leaders than a Flex app usually runs instances.
 *  The stored partition is a smallint, so raising this takes a measurement, not a migration. */
export const MAX_EXECUTOR_PARTITIONS = 64;

/** Width of lease_name in every dialect's lease table. */
export const LEASE_NAME_MAX_LENGTH = 64;

/** The separator between LEASE_NAME and a partition number (never in a partition-0 name by construction). */
export const PARTITION_SEPARATOR = '#';

/** The lease name of `partition` (0..count−1) under the base LEASE_NAME. */
export function partitionLeaseName(base: string, partition: number): string {
  if (!Number.isInteger(partition) || partition < 0) throw new RangeError(`partition must be a non-negative integer, got ${partition}`);
  return partition === 0 ? base : `${base}${PARTITION_SEPARATOR}${partition}`;
}

/** LEASE_NAME from `partition`'s lease name (partitionLeaseName's inverse; throws for a name of another partition). */
export function leaseBaseName(leaseName: string, partition: number): string {
  if (partition === 0) return leaseName;
  const suffix = partitionLeaseName('', partition);
  if (!leaseName.endsWith(suffix) || leaseName.length === suffix.length) {
    throw new RangeError(`lease name "${leaseName}" is not the lease name of partition ${partition}`);
  }
  return leaseName.slice(0, -suffix.length);
}

/** The suffix of the cluster-scope execution control's name: `*` is never a partition number, so no partition's lease
 *  name of any LEASE_NAME ends with it (config refuses a LEASE_NAME that does). */
export const CLUSTER_CONTROL_SUFFIX = `${PARTITION_SEPARATOR}*`;

/** LEASE_NAME at most: room for the cluster pause key `LEASE_NAME#*` within lease_name, nothing cut (config refuses more). */
export const LEASE_NAME_MAX_BASE_LENGTH = LEASE_NAME_MAX_LENGTH - CLUSTER_CONTROL_SUFFIX.length;

/** The key of the cluster-scope pause in the execution-control table (every partition's leader reads it beside its own
 *  row): LEASE_NAME#*, never cut, so two clusters never share it (throws for a LEASE_NAME config refuses). */
export function clusterControlName(base: string): string {
  if (base.length > LEASE_NAME_MAX_BASE_LENGTH) {
    throw new RangeError(`LEASE_NAME may have at most ${LEASE_NAME_MAX_BASE_LENGTH} characters (the cluster pause key LEASE_NAME${CLUSTER_CONTROL_SUFFIX}), got ${base.length}`);
  }
  return `${base}${CLUSTER_CONTROL_SUFFIX}`;
}

/** Suffix of a partition changer's holder id (issue 26): its own id, so the instance's lease managers never take its
 *  rows for their own (a lost acquire reply is adopted by holder id). */
export const PARTITION_CHANGER_SUFFIX = '~partition-change';

/** The holder id of this instance's partition changer: the instance's, cut to leave room for the suffix within the
 *  128 characters of holder_id (instances whose ids share their first 111 characters would share it: keep them short). */
export function partitionChangerHolderId(holderId: string): string {
  return `${holderId.slice(0, 128 - PARTITION_CHANGER_SUFFIX.length)}${PARTITION_CHANGER_SUFFIX}`;
}

/** Rows per reassignment batch of a partition change: one read and one fenced write each. */
export const REASSIGN_BATCH_ROWS = 1_000;

/** Ids per key range of a partition change's preparing pass: one set-based transaction each, no row sent either way
 *  (bench partitionChangeLarge: a range's statements take well under a second on the slowest server measured, far
 *  from DB_STATEMENT_TIMEOUT_MS, and hold locks only on finished rows, which nothing else writes but the purge). */
export const PREPARE_BATCH_IDS = 10_000;

/** The longest a partition change's switch waits for its lock on intake (PostgreSQL: a SHARE lock on the intents
 *  table, which waits for writes in flight while new inserts queue behind it). Longer than PostgreSQL's default
 *  deadlock_timeout (1 s), after which a plain autovacuum holding the table is cancelled for the switch; not had in
 *  time (an anti-wraparound vacuum), the changer switches without it and waits COMMIT_GRACE_MS for late inserts. */
export const SWITCH_LOCK_TIMEOUT_MS = 2_000;

/** Lease names of partitions 0..count−1, in partition order. */
export function partitionLeaseNames(base: string, count: number): string[] {
  return Array.from({ length: count }, (_, p) => partitionLeaseName(base, p));
}

/** The longest suffix a partition adds to LEASE_NAME with `count` partitions (0 for one partition). */
export function partitionSuffixLength(count: number): number {
  return count <= 1 ? 0 : PARTITION_SEPARATOR.length + String(count - 1).length;
}

/** Why LEASE_NAME cannot name the leases of `count` partitions (it contains the separator, or leaves no room for the
 *  `#k` suffix), naming LEASE_NAME and `countName` (the setting or request that asks for `count`); null when it can.
 *  The start's configuration check and POST /api/ops/partitions share it. */
export function leaseNameRoomProblem(leaseName: string, count: number, countName: string): string | null {
  if (leaseName.endsWith(CLUSTER_CONTROL_SUFFIX)) {
    return `LEASE_NAME ("${leaseName}") may not end with "${CLUSTER_CONTROL_SUFFIX}": that names the cluster-scope pause of a cluster`;
  }
  if (count > 1 && leaseName.includes(PARTITION_SEPARATOR)) {
    return `LEASE_NAME ("${leaseName}") may not contain "${PARTITION_SEPARATOR}" with ${countName} above 1: ` +
      `partition k's lease is LEASE_NAME${PARTITION_SEPARATOR}k, which must not be mistaken for another name's partition`;
  }
  if (leaseName.length > LEASE_NAME_MAX_BASE_LENGTH) {
    return `LEASE_NAME ("${leaseName}", ${leaseName.length} characters) may have at most ${LEASE_NAME_MAX_BASE_LENGTH}: the cluster-scope ` +
      `pause is kept under "LEASE_NAME${CLUSTER_CONTROL_SUFFIX}", which must fit the ${LEASE_NAME_MAX_LENGTH} characters of a lease name uncut ` +
      '(a cut key would be shared by every LEASE_NAME with the same beginning)';
  }
  const suffix = partitionSuffixLength(count);
  if (leaseName.length + suffix > LEASE_NAME_MAX_LENGTH) {
    return `LEASE_NAME ("${leaseName}", ${leaseName.length} characters) is too long for ${countName}: ` +
      `partition lease names add up to ${suffix} characters ("${partitionLeaseName(leaseName, count - 1)}") and may have at most ${LEASE_NAME_MAX_LENGTH}`;
  }
  return null;
}
