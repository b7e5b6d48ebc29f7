// The set of stores one process uses, built once by the composition root for the configured dialect.
import type { LeaseStore } from './ports.js';
import type { DueNotices, ExecutionStore, IntentStore } from './intentPorts.js';
import type { OpsStore } from './opsPorts.js';
import type { RedriveStore } from './redrivePorts.js';
import type { InsightStore } from './insightPorts.js';
import type { PartitionStore } from './partitionPorts.js';
import type { InstanceStore } from './instancePorts.js';

export interface Stores {
  dialect: 'postgres' | 'pglite' | 'mssql' | 'mysql';
  lease: LeaseStore;
  intents: IntentStore;
  /** Partition 0's execution store (`executionFor(0)`): the whole executor when EXECUTOR_PARTITIONS = 1. */
  execution: ExecutionStore;
  /** The execution store of executor partition `partition` (0..count−1; issue 25): it reads and writes only that
   *  partition's intents (guarantees in intentPorts.ts, ExecutionStore). The same object for the same partition. */
  executionFor(partition: number): ExecutionStore;
  /** Execution control (pause/resume) and retention purge. */
  ops: OpsStore;
  /** Failed intents back to scheduled with a fresh budget (recorded per call). */
  redrive: RedriveStore;
  /** The dashboard's read-only queries. */
  insights: InsightStore;
  /** The partition count the database records (checked at start against EXECUTOR_PARTITIONS). */
  partitions: PartitionStore;
  /** Instance heartbeat rows (holder, version, roles, partitions led): fair share and the dashboard's instances. */
  instances: InstanceStore;
  /** Due-intent notices for the leader (PostgreSQL LISTEN/NOTIFY); null where the dialect has none (SQL Server, MySQL). */
  notices: DueNotices | null;
  /** Apply numbered migrations idempotently (safe with concurrent migrators). */
  migrate(): Promise<{ applied: number[] }>;
  /** Cheap round trip for readiness checks. */
  ping(): Promise<void>;
  close(): Promise<void>;
}

/** One object per partition, made on first use (`executionFor`): a partition is a non-negative integer. */
export function perPartition<T>(make: (partition: number) => T): (partition: number) => T {
  const made = new Map<number, T>();
  return (partition) => {
    if (!Number.isInteger(partition) || partition < 0) throw new RangeError(`partition must be a non-negative integer, got ${partition}`);
    let x = made.get(partition);
    if (x === undefined) made.set(partition, (x = make(partition)));
    return x;
  };
}
