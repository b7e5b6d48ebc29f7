// The set of stores one process uses, built once by the composition root for the configured dialect.
import type { LeaseStore } from './ports.js';
import type { DueNotices, ExecutionStore, IntentStore } from './intentPorts.js';
import type { OpsStore } from './opsPorts.js';
import type { RedriveStore } from './redrivePorts.js';
import type { InsightStore } from './insightPorts.js';
import type { PartitionStore } from './partitionPorts.js';

export interface Stores {
  dialect: 'postgres' | 'pglite' | 'mssql' | 'mysql';
  lease: LeaseStore;
  intents: IntentStore;
  execution: ExecutionStore;
  /** Execution control (pause/resume) and retention purge. */
  ops: OpsStore;
  /** Failed intents back to scheduled with a fresh budget (recorded per call). */
  redrive: RedriveStore;
  /** The dashboard's read-only queries. */
  insights: InsightStore;
  /** The partition count the database records (checked at start against EXECUTOR_PARTITIONS). */
  partitions: PartitionStore;
  /** Due-intent notices for the leader (PostgreSQL LISTEN/NOTIFY); null where the dialect has none (SQL Server, MySQL). */
  notices: DueNotices | null;
  /** Apply numbered migrations idempotently (safe with concurrent migrators). */
  migrate(): Promise<{ applied: number[] }>;
  /** Cheap round trip for readiness checks. */
  ping(): Promise<void>;
  close(): Promise<void>;
}
