// One run's recorded history, as the checker reads it (runOne.ts loads it; history.json keeps it for a failed run).
import type { ProviderRecord } from './providerProcess.js';
import type { Accepted, CancelRecord, ReplayRecord } from './load.js';
import type { FaultRecord } from './faults.js';

// Issue 25: lease events and audit rows carry their lease name, intents their partition (fixed at insert); absent in
// histories recorded before partitions (one lease: every row belongs to it).
export interface LeaseEventRow { seq: number; epoch: number; holderId: string; event: string; leaseName?: string }
export interface AuditRow { seq: number; epoch: number; holderId: string; action: string; atMs: number; leaseName?: string }
export interface IntentRow {
  intentId: string; key: string | null; status: string; attemptCount: number;
  partition?: number; partitionKey?: string | null; createdAtMs?: number;
}
export interface AttemptRow {
  intentId: string; attemptNo: number; epoch: number; holderId: string; outcome: string; httpStatus: number | null; error: string | null;
  /** Database times (ms); absent in histories recorded before they were kept. */
  startedAtMs?: number; finishedAtMs?: number | null;
}

/** Issue 26: a change of the partition count as the database recorded it (database times, ms; null: not reached). */
export interface PartitionChangeRow {
  changeId: string; fromCount: number; toCount: number; state: string;
  requestedAtMs: number; switchedAtMs: number | null; completedAtMs: number | null; changer: string | null; rowsMoved: number;
}

export interface History {
  leaseMs: number;
  /** Timer period of the hosts (the lease-valid resume rule allows one tick + 1 s after the fault's end). */
  tickMs?: number;
  /** Liveness bound on resume time ÷ lease duration. */
  resumeBound: number;
  /** Per fault kind, where it differs (Azure-like mode: a killed lock holder's listener lock must run out first). */
  resumeBoundByKind?: Record<string, number>;
  /** Azure-like mode: a fault of these kinds on the leader (the lock holder: nobody else can tick) is judged by its own
   *  length + one tick + slack, as `stop` is, when that is more than the bound above (issue 22). */
  faultLengthBound?: { kinds: string[]; slackMs: number };
  /** Issue 25: the lease name of each partition (index = partition number); absent or one name: one partition, and
   *  every rule reads the history as one lease (as before partitions). */
  partitionLeases?: string[];
  /** Issue 26: the changes of the partition count, oldest first (absent: none; the count is partitionLeases.length). */
  partitionChanges?: PartitionChangeRow[];
  events: LeaseEventRow[];
  audit: AuditRow[];
  intents: IntentRow[];
  attempts: AttemptRow[];
  provider: ProviderRecord[];
  accepted: Accepted[];
  replays: ReplayRecord[];
  cancels: CancelRecord[];
  faults: FaultRecord[];
  /** Wall times at which the cluster had had no live leader for 10 s (between faults). */
  leaderless: number[];
}

export interface Violation { check: string; message: string }

/** The attempt ended without its answer being read: a client-side timeout or a connection/response error. */
export const answerLost = (a: { outcome: string; error: string | null } | undefined) =>
  a?.outcome === 'retryable_error' && /timeout|connection error|response error|internal error/.test(a.error ?? '');

