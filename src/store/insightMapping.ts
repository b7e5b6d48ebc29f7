// Row mapping of the dashboard's reads, shared by both dialects (same column aliases).
import type { AttemptMinute, IntentRedrive, PartitionControl, PartitionState } from './insightPorts.js';
import type { LeaseEvent } from './ports.js';
import { num } from './rowMapping.js';

type Row = Record<string, unknown>;

/** partitionStates reads at least one partition (its statement takes database now from a partition's row). */
export function requirePartitions<T>(partitions: readonly T[]): readonly T[] {
  if (partitions.length === 0) throw new RangeError('partitionStates: name at least one partition');
  return partitions;
}

export const insightRows = {
  event: (r: Row): LeaseEvent => ({
    seq: num(r.seq), leaseName: String(r.lease_name), leaseEpoch: num(r.lease_epoch), holderId: String(r.holder_id),
    event: r.event as LeaseEvent['event'], at: r.at as Date,
  }),
  /** One row per minute plus db_now (a LEFT JOIN row with a null minute when there were no attempts). */
  minutes: (rows: Row[]): { dbNow: Date; minutes: AttemptMinute[] } => ({
    dbNow: rows[0]!.db_now as Date,
    minutes: rows.filter((r) => r.minute !== null && r.minute !== undefined).map((r) => ({
      minute: r.minute as Date, started: num(r.started), errors: num(r.errors), succeeded: num(r.succeeded),
    })),
  }),
  /** One row per partition asked for, each with db_now; a lease row's columns are null when it was never acquired. */
  partitions: (rows: Row[]): { dbNow: Date; partitions: PartitionState[] } => ({
    dbNow: rows[0]!.db_now as Date,
    partitions: rows.map((r) => ({
      partition: num(r.partition_no), leaseName: String(r.lease_name),
      lease: r.holder_id === null || r.holder_id === undefined ? null : {
        holderId: String(r.holder_id), leaseEpoch: num(r.lease_epoch), acquiredAt: r.acquired_at as Date,
        renewedAt: r.renewed_at as Date, expiresAt: r.expires_at as Date,
      },
      scheduled: num(r.scheduled ?? 0), due: num(r.due ?? 0), lastAttemptAt: (r.last_attempt_at as Date | null | undefined) ?? null,
    })),
  }),
  /** One row per partition asked for; the control, handover and maintenance (m_*) columns are null when there is no such row. */
  controls: (rows: Row[]): PartitionControl[] => rows.map((r) => ({
    partition: num(r.partition_no), leaseName: String(r.lease_name),
    // BOOLEAN / bit arrive as booleans (the mysql typeCast, tedious); 1 is accepted too.
    paused: r.paused === true || r.paused === 1,
    changedAt: (r.changed_at as Date | null | undefined) ?? null, changedBy: (r.changed_by as string | null | undefined) ?? null,
    reason: (r.reason as string | null | undefined) ?? null,
    pendingHandover: r.request_id === null || r.request_id === undefined ? null : {
      requestId: String(r.request_id).toLowerCase(), requestedAt: r.requested_at as Date, requestedBy: String(r.requested_by),
    },
    failingMaintenance: r.m_task === null || r.m_task === undefined ? null : {
      task: String(r.m_task), failures: num(r.m_failures), lastError: (r.m_last_error as string | null) ?? null,
      changedAt: r.m_changed_at as Date, holderId: String(r.m_holder_id),
    },
  })),
  redrive: (r: Row): IntentRedrive => ({
    redriveId: String(r.redrive_id), requestedAt: r.requested_at as Date, requestedBy: String(r.requested_by),
    reason: (r.reason as string | null) ?? null, attemptsBefore: num(r.attempts_before),
  }),
};
