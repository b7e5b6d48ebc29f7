// Composition root: builds config, logger, pool/stores, clock, lease manager, executor and handlers once
// per process (getApp), or once per in-process instance for the local host (createApp + runWithApp).
// Everything else receives these as parameters. Imported by functions/*.ts and local/ only.
// May import: `config.ts`, `lease/`, `executor/`, `provider/`, `store/`, `observability/`, `instrument/`, `http/`.
import { AsyncLocalStorage } from 'node:async_hooks';
import { ConfigError, loadConfig, type Config } from './config.js';
import { ClusterViewCache } from './http/clusterView.js';
import type { HttpContext } from './http/context.js';
import { systemClock, type Clock } from './lease/clock.js';
import { LeaseManager } from './lease/leaseManager.js';
import { Executor } from './executor/executor.js';
import { TickBudget } from './executor/tickBudget.js';
import { executorSettingsFrom } from './executor/tickSummary.js';
import { ExecutionOps } from './executor/executorOps.js';
import { Maintenance, retentionTask, sqlMaintenanceRecorder } from './executor/maintenance.js';
import { createIntentHandlers, type IntentHandlers } from './http/intents.js';
import { createLogger, sqlErrorField, type Logger } from './observability/logger.js';
import { routingDestination } from './observability/invocationLog.js';
import { MetricsRegistry, type AppMetrics } from './observability/metrics.js';
import { bindLeaseMetrics, instrumentExecutionStore, instrumentLeaseStore } from './instrument/portMetrics.js';
import { HttpProvider } from './provider/httpProvider.js';
import { ProviderGuard } from './provider/guard.js';
import type { Provider } from './provider/provider.js';
import type { Stores } from './store/stores.js';
import type { PartitionStore } from './store/partitionPorts.js';
import { openStores } from './store/open.js';
import { installTracing } from './observability/tracing.js';
import type { TokenCredential } from '@azure/identity';
import { traceAttempts } from './instrument/attemptTracing.js';

/** The app is also what the HTTP handlers call (src/http/context.ts): functions/*.ts pass it to them. */
export interface App extends HttpContext {
  config: Config;
  logger: Logger;
  stores: Stores;
  lease: LeaseManager;
  executor: Executor;
  /** Each timer tick's budget, from EXECUTOR_SCHEDULE: it ends just before the next occurrence (no gap). */
  tickBudget: TickBudget;
  handlers: IntentHandlers;
  /** This instance's metrics (every point labelled holder_id) and the registry /api/metrics renders. */
  metrics: AppMetrics;
  metricsRegistry: MetricsRegistry;
  /** Pause flag as last read, retention purge (consulted by the executor on the leader path). */
  ops: ExecutionOps;
  /** The cluster's leader as SQL holds it (cached ≤ 1 s), for /readyz and /metrics on any instance. */
  cluster: ClusterViewCache;
  /** Intents in this instance's schedule (0 on followers), for /readyz. */
  scheduleSize(): number;
  /** Release the lease (graceful handover) and, if this app owns them, close the stores. */
  close(): Promise<void>;
}

export interface CreateAppOptions {
  config?: Config;
  env?: Record<string, string | undefined>;
  /** Share stores between in-process instances (local host); the app then does not close them. */
  stores?: Stores;
  provider?: Provider;
  logger?: Logger;
  clock?: Clock;
  /** Share one metrics registry between in-process instances (local host); the app then does not shut it
   *  down. Default: one per app, or in Azure (APPLICATIONINSIGHTS_CONNECTION_STRING) the process-wide one. */
  metrics?: MetricsRegistry;
  /** Apply migrations at start (default true; Azure deployments may migrate from the postprovision hook). */
  migrate?: boolean;
  /** Where Entra tokens for a flexible server come from (DATABASE_ENGINE postgresql/mysql). Default: the
   *  managed identity AZURE_CLIENT_ID names; tests swap only this. */
  credential?: TokenCredential;
}

export async function createApp(opts: CreateAppOptions = {}): Promise<App> {
  const config = opts.config ?? loadConfig(opts.env ?? process.env);
  const logger = opts.logger ?? createLogger(config.logLevel, routingDestination(), { holder_id: config.lease.holderId });
  for (const setting of config.ignoredSettings) {
    logger.warn({ event: 'config_setting_ignored', setting }, `${setting} is no longer used (see README, settings): remove it`);
  }
  const clock = opts.clock ?? systemClock;
  const ownsStores = !opts.stores;
  await installTracing(config.tracing.mode, config.tracing.otlpUrl); // once per process; no-op when off
  const stores = opts.stores ?? (await openStores(config.database, config, logger, opts.credential));
  if (opts.migrate ?? true) await stores.migrate();
  try {
    await requireRecordedPartitionCount(stores.partitions, config, logger);
  } catch (e) {
    if (ownsStores) await stores.close().catch(() => {});
    throw e;
  }
  const ownsMetrics = !opts.metrics;
  const metricsRegistry = opts.metrics ?? (await metricsRegistryFor(config));
  const metrics = metricsRegistry.forInstance(config.lease.holderId);
  const lease = new LeaseManager(instrumentLeaseStore(stores.lease, metrics, clock), config.lease, clock, logger);
  bindLeaseMetrics(lease, metrics);
  const provider = opts.provider ?? new HttpProvider(config.provider.url);
  const maintenance = new Maintenance([retentionTask(stores.ops, config.retention, clock, logger, metrics)], config.maintenance, clock, logger, metrics,
    // Recorded in SQL so every instance's dashboard shows it; best effort, never blocks the executor.
    sqlMaintenanceRecorder(stores.ops, config.lease.name, config.lease.holderId, logger));
  const ops = new ExecutionOps(stores.ops, config.lease.name, maintenance, logger, metrics);
  // Attempt spans (linked to their submit) around each provider call, wired here rather than in the executor.
  const traced = traceAttempts(instrumentExecutionStore(stores.execution, metrics, clock), provider);
  const guard = new ProviderGuard(config.providerGuard, clock, (state) => {
    metrics.breakerChanged(state);
    logger.warn({ event: 'provider_breaker', state }, `provider circuit breaker ${state}`);
    // Recorded in SQL so every instance (the dashboard) can show it; best effort, never blocks the executor.
    stores.ops.recordProviderBreaker(config.lease.name, state, config.lease.holderId).catch((e: unknown) =>
      logger.warn({ event: 'provider_breaker_record_failed', sql_error: sqlErrorField(e) }, 'could not record the breaker state'));
  });
  const executor = new Executor(lease, traced.store, traced.provider,
    executorSettingsFrom(config), clock, logger, Math.random, ops, guard);
  if (stores.notices && config.executor.dueNotices) executor.wakeOn(stores.notices);
  const tickBudget = new TickBudget(config.executor.schedule, config.executor.tickBudgetMs, config.executor.handoffMs);
  const scheduleSize = () => executor.refresher.schedule.size;
  const unregisterGauges = metrics.gauges({
    leadership: () => {
      const token = lease.requireLeader();
      return token ? { epoch: token.leaseEpoch, remainingMs: lease.remainingMs() } : null;
    },
    scheduleSize,
    oldestDueLagMs: () => executor.refresher.schedule.oldestDueLagMs(executor.refresher.dbNowMs()),
    paused: () => ops.paused,
    providerGuard: () => guard.state(),
  });
  const handlers = createIntentHandlers({
    intents: stores.intents, lease: stores.lease, leaseName: config.lease.name, config, logger,
    metrics: (e) => {
      if (e.name === 'intent_submit') metrics.intentSubmitted(e.outcome);
    },
  });
  const cluster = new ClusterViewCache(stores.lease, config.lease.name, () => clock.nowMs());
  let closed = false;
  return {
    config, logger, stores, lease, executor, tickBudget, handlers, metrics, metricsRegistry, ops, cluster, scheduleSize,
    async close() {
      if (closed) return;
      closed = true;
      unregisterGauges();
      // The running tick finishes and what is unwritten is written (under the fence) before we let go, bounded by
      // functionTimeout less a margin; the row is released only if nothing is left unwritten (else it expires).
      await executor.drain(clock.nowMs() + config.executor.invocationLimitMs);
      await lease.release();
      if (provider instanceof HttpProvider) provider.close();
      if (ownsStores) await stores.close();
      if (ownsMetrics) await metricsRegistry.shutdown();
    },
  };
}

/** The partition count is the database's (issue 25): the first process on a fresh database records its
 *  EXECUTOR_PARTITIONS (of concurrent first starts exactly one does), and a process started with another count
 *  refuses to start (ConfigError), naming both, before it accepts an intent it would assign by the wrong count. */
async function requireRecordedPartitionCount(store: PartitionStore, config: Config, logger: Logger): Promise<void> {
  const want = config.partitions.count;
  const recorded = await store.recordPartitionCount(want, config.lease.holderId);
  if (recorded.count !== want) {
    throw new ConfigError(`EXECUTOR_PARTITIONS is ${want} but the database records ${recorded.count} partition(s) ` +
      `(recorded by ${recorded.recordedBy} at ${recorded.recordedAt.toISOString()}): start with EXECUTOR_PARTITIONS=${recorded.count}; ` +
      'the recorded count cannot be changed yet (issue 26: POST /api/ops/partitions)');
  }
  if (recorded.recordedBy === config.lease.holderId) {
    logger.info({ event: 'partition_count_recorded', partitions: want }, `recorded EXECUTOR_PARTITIONS=${want} in the database`);
  }
}

/** Azure (Application Insights configured): the process-wide registry behind useAzureMonitor(); else one of our own. */
async function metricsRegistryFor(config: Config): Promise<MetricsRegistry> {
  const cs = config.telemetry.appInsightsConnectionString;
  if (!cs) return MetricsRegistry.standalone();
  const { azureMonitorRegistry } = await import('./observability/azureMonitor.js');
  return azureMonitorRegistry(cs, config.telemetry.aad);
}

const current = new AsyncLocalStorage<App>();
let processApp: Promise<App> | null = null;

/** The app for this call: the in-process instance being served (local host), else the process singleton,
 *  created lazily on first use and cached (one pool per process). */
export function getApp(): Promise<App> {
  const scoped = current.getStore();
  if (scoped) return Promise.resolve(scoped);
  processApp ??= createApp().catch((e) => {
    processApp = null; // let the next invocation retry (e.g. the database was briefly unreachable)
    throw e;
  });
  return processApp;
}

/** Run `fn` with `app` as the current instance (the local host serves several instances per process). */
export function runWithApp<T>(app: App, fn: () => T): T {
  return current.run(app, fn);
}

/** Close the current instance (local host) or the process singleton if it was created (appTerminate). */
export async function closeCurrentApp(): Promise<void> {
  const scoped = current.getStore();
  if (scoped) return scoped.close();
  const p = processApp;
  processApp = null;
  if (p) await (await p).close();
}
