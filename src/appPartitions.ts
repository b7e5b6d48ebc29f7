// The partitions' wiring, for the composition root (src/app.ts calls it once per app): each partition's lease
// manager, maintenance, operations flags and executor keyed by its lease name (buildPartition), their gauges, and the
// partition-count changer. Nothing here is shared between partitions but what the root passes in (stores, the guard's
// permits, the fair share); with one partition, logs and series are exactly those of a single executor.
// May import: `limits.ts`, `config.ts`, `intents/`, `lease/`, `executor/`, `provider/`, `store/`, `observability/`, `instrument/`.
import type { Config } from './config.js';
import type { Clock } from './lease/clock.js';
import { LeaseManager } from './lease/leaseManager.js';
import { PartitionChanger } from './lease/partitionChanger.js';
import { liveOlderReleases } from './lease/olderReleases.js';
import { assignPartition } from './intents/partition.js';
import { Executor } from './executor/executor.js';
import { executorSettingsFrom } from './executor/tickSummary.js';
import { ExecutionOps } from './executor/executorOps.js';
import { Maintenance, retentionTask, sqlMaintenanceRecorder } from './executor/maintenance.js';
import type { Logger } from './observability/logger.js';
import type { AppMetrics } from './observability/metrics.js';
import { bindLeaseMetrics, instrumentExecutionStore, instrumentLeaseStore } from './instrument/portMetrics.js';
import { traceAttempts } from './instrument/attemptTracing.js';
import type { ProviderPermits } from './provider/partitionPermits.js';
import type { Provider } from './provider/provider.js';
import type { Stores } from './store/stores.js';
import { clusterControlName, partitionChangerHolderId, partitionLeaseName, PREPARE_BATCH_IDS, REASSIGN_BATCH_ROWS } from './limits.js';

/** What one partition's timer function runs: its own lease manager, executor (own schedule, buffer, bridge) and
 *  operations flags, all keyed by the partition's lease name (partitionLeaseName). */
export interface PartitionRuntime {
  partition: number;
  leaseName: string;
  lease: LeaseManager;
  executor: Executor;
  ops: ExecutionOps;
  /** The app's logger, with `partition` on every record when there is more than one. */
  logger: Logger;
  /** The instance's metrics, with a `partition` label when there is more than one. */
  metrics: AppMetrics;
}

export interface PartitionDeps {
  config: Config; stores: Stores; logger: Logger; clock: Clock; metrics: AppMetrics; provider: Provider; guard: ProviderPermits;
  /** Whether this partition may be acquired now (the fair share). */
  mayAcquire: () => boolean;
}

/** Partition k's lease manager, maintenance, operations flags and executor, keyed by its lease name. */
export function buildPartition(k: number, d: PartitionDeps): PartitionRuntime {
  const { config, stores, clock, metrics } = d;
  const leaseName = partitionLeaseName(config.lease.name, k);
  // With one partition, logs are exactly today's; with more, every record says which partition it is about.
  const logger = config.partitions.count > 1 ? d.logger.child({ partition: k }) : d.logger;
  const lease = new LeaseManager(instrumentLeaseStore(stores.lease, metrics, clock), { ...config.lease, name: leaseName }, clock, logger,
    Math.random, d.mayAcquire);
  bindLeaseMetrics(lease, metrics);
  const maintenance = new Maintenance([retentionTask(stores.ops, config.retention, clock, logger, metrics, k)], config.maintenance, clock, logger, metrics,
    // Recorded in SQL so every instance's dashboard shows it; best effort, never blocks the executor.
    sqlMaintenanceRecorder(stores.ops, leaseName, config.lease.holderId, logger));
  const ops = new ExecutionOps(stores.ops, leaseName, clusterControlName(config.lease.name), maintenance, logger, clock,
    config.schedule.refreshIntervalMs, metrics);
  // Attempt spans (linked to their submit) around each provider call, wired here rather than in the executor.
  // (`stores.execution` is partition 0's by the port's contract; a caller may wrap it.)
  const traced = traceAttempts(instrumentExecutionStore(k === 0 ? stores.execution : stores.executionFor(k), metrics, clock), d.provider);
  const executor = new Executor(lease, traced.store, traced.provider,
    { ...executorSettingsFrom(config), partition: k }, clock, logger, Math.random, ops, d.guard);
  executor.layout.readFrom(async () => (await stores.partitions.readLayout()).generation);
  if (stores.notices && config.executor.dueNotices) executor.wakeOn(stores.notices);
  return { partition: k, leaseName, lease, executor, ops, logger, metrics };
}

/** A partition's executor gauges: its leadership, schedule and pause flag. */
export function executorGauges(p: PartitionRuntime) {
  return {
    leadership: () => {
      const token = p.lease.requireLeader();
      return token ? { epoch: token.leaseEpoch, remainingMs: p.lease.remainingMs() } : null;
    },
    scheduleSize: () => p.executor.refresher.schedule.size,
    oldestDueLagMs: () => p.executor.refresher.schedule.oldestDueLagMs(p.executor.refresher.dbNowMs()),
    paused: () => p.ops.paused,
  };
}

/** The partition-count changer of this instance (its own holder id; partition 0's timer steps it). */
export function createPartitionChanger(config: Config, stores: Stores, clock: Clock, logger: Logger, metrics: AppMetrics): PartitionChanger {
  return new PartitionChanger(stores.lease, stores.partitions, {
    leaseNameOf: (k) => partitionLeaseName(config.lease.name, k), partitionOf: assignPartition,
    holderId: partitionChangerHolderId(config.lease.holderId), durationMs: config.lease.durationMs, renewIntervalMs: config.lease.renewIntervalMs,
    safetyMarginMs: config.lease.safetyMarginMs, commitGraceMs: config.schedule.commitGraceMs, refreshIntervalMs: config.schedule.refreshIntervalMs,
    batchSize: REASSIGN_BATCH_ROWS, prepareBatchSize: PREPARE_BATCH_IDS,
    pollMs: Math.min(250, config.schedule.refreshIntervalMs), olderReleasesLive: async () =>
      (await liveOlderReleases(stores.instances, config.instances.liveWindowMs)).map((i) => `${i.holderId} (${i.version})`),
    stuckSteps: config.partitions.stuckSteps }, clock, logger, metrics);
}
