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

/** An operator action of the campaign (operatorActions.ts), with the instance asked and its EXECUTOR_PARTITIONS. Wall ms;
 *  answeredAt/status null: no answer (timeout, connection error). slow/fast: the provider's latency set (no instance). */
export interface OperatorAction {
  action: 'pause' | 'resume' | 'drain' | 'slow' | 'fast';
  via: string | null;
  viaPartitions: number | null;
  requestedAt: number;
  answeredAt: number | null;
  status: number | null;
  detail: string;
}

export interface History {
  leaseMs: number;
  /** SCHEDULE_REFRESH_INTERVAL_MS of the hosts: a leader reads the pause flag and drain requests this often. */
  refreshMs?: number;
  /** The hosts' PROVIDER_MAX_IN_FLIGHT and PROVIDER_RATE_LIMIT_PER_SEC (0: none); absent in older histories. */
  providerLimits?: { maxInFlight: number; ratePerSec: number };
  /** Pause, resume and drain of the cluster, and the provider's slow phases, in request order (absent: none). */
  operatorActions?: OperatorAction[];
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
  /** Mixed-version campaign: the holder ids of the previous release's processes (absent: none ran). Their leaders
   *  judge a drain only when they issue a START (no hold in the statement): see checkerOperator.ts drainEffects. */
  olderReleaseHolders?: string[];
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

/** The line written when a request ends. */
export interface ProviderEnd { end: number; at: number; aborted: boolean }

/** provider.jsonl's lines (providerProcess.ts): the arrival records, each with its end (when recorded) folded in. */
export function readProviderRecord(lines: string[]): ProviderRecord[] {
  const records: ProviderRecord[] = [];
  const ends = new Map<number, ProviderEnd>();
  for (const l of lines) {
    const x = JSON.parse(l) as ProviderRecord | ProviderEnd;
    if ('end' in x) ends.set(x.end, x);
    else records.push(x);
  }
  return records.map((r) => {
    const e = r.seq === undefined ? undefined : ends.get(r.seq);
    return e ? { ...r, endedAt: e.at, aborted: e.aborted } : r;
  });
}
