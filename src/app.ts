// Composition root: builds config, logger, pool/stores, clock, lease manager, executor and handlers once
// per process (getApp), or once per in-process instance for the local host (createApp + runWithApp).
// Everything else receives these as parameters. Imported by functions/*.ts and local/ only.
// The partitions' wiring (each partition's executor, their gauges, the count changer) is appPartitions.ts's.
// May import: `appPartitions.ts`, `config.ts`, `lease/`, `executor/`, `provider/`, `store/`, `observability/`, `http/`.
import { AsyncLocalStorage } from 'node:async_hooks';
import { loadConfig, type Config } from './config.js';
import { ClusterViewCache } from './http/clusterView.js';
import type { HttpContext } from './http/context.js';
import { systemClock, type Clock } from './lease/clock.js';
import type { LeaseManager } from './lease/leaseManager.js';
import { FAIR_SHARE_ROLE, InstanceHeartbeat } from './lease/instanceHeartbeat.js';
import { PartitionShare } from './lease/partitionShare.js';
import { PartitionLayoutWatch, recordedPartitionLayout } from './lease/partitionLayout.js';
import type { PartitionChanger } from './lease/partitionChanger.js';
import { buildPartition, createPartitionChanger, executorGauges, type PartitionRuntime } from './appPartitions.js';
import type { Executor } from './executor/executor.js';
import { TickBudget } from './executor/tickBudget.js';
import { executorSettingsFrom, readyAhead } from './executor/tickSummary.js';
import { runTimerInvocation } from './executor/timerInvocation.js';
import type { ExecutionOps } from './executor/executorOps.js';
import { createIntentHandlers, type IntentHandlers } from './http/intents.js';
import { createLogger, type Logger } from './observability/logger.js';
import { routingDestination } from './observability/invocationLog.js';
import { MetricsRegistry, type AppMetrics } from './observability/metrics.js';
import { HttpProvider } from './provider/httpProvider.js';
import type { ProviderGuard } from './provider/guard.js';
import { createClusterGuard } from './provider/clusterGuard.js';
import type { Provider } from './provider/provider.js';
import type { Stores } from './store/stores.js';
import { openStores } from './store/open.js';
import { installTracing } from './observability/tracing.js';
import type { TokenCredential } from '@azure/identity';

export type { PartitionRuntime } from './appPartitions.js';

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
  /** One executor per partition (EXECUTOR_PARTITIONS), each with its own lease row, fence and schedule; partition 0
   *  is `lease`, `executor` and `ops` above. The timer function of partition k runs partitions[k]. */
  partitions: PartitionRuntime[];
  /** The process's provider guard (its share of the cluster's limits, breaker, holds); each partition's executor
   *  asks it through its own permits (partitionPermits.ts). */
  providerGuard: ProviderGuard;
  /** The fair share of partitions (every-instance mode), else null. */
  share: PartitionShare | null;
  /** The recorded partition count and the change in progress (issue 26), as this process last read them. */
  layout: PartitionLayoutWatch;
  /** Drives a change of the partition count from partition 0's timer (issue 26). */
  changer: PartitionChanger;
  clock: Clock;
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
  /** How this process runs the timer functions (local host: TIMER_MODE). `singleton` (default: Azure's) spreads
   *  partitions by the listener locks; `every-instance` also caps each instance at its fair share of the partitions
   *  (heartbeats in SQL); `off`: HTTP only (the heartbeat says so, and the fair share does not count it). */
  timerMode?: 'singleton' | 'every-instance' | 'off';
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
  let initialLayout;
  try {
    initialLayout = await recordedPartitionLayout(stores.partitions, config.partitions.count, config.lease.holderId, logger);
  } catch (e) {
    if (ownsStores) await stores.close().catch(() => {});
    throw e;
  }
  const ownsMetrics = !opts.metrics;
  const metricsRegistry = opts.metrics ?? (await metricsRegistryFor(config));
  const metrics = metricsRegistry.forInstance(config.lease.holderId);
  const provider = opts.provider ?? new HttpProvider(config.provider.url, { leaseName: config.lease.name });
  // While a change of the count is active, every partition this process leads hands back (drains, then releases) and
  // none acquires; the changer takes them all. Read every refresh interval where timers run.
  const layout = new PartitionLayoutWatch(stores.partitions, initialLayout, config.schedule.refreshIntervalMs, logger, {
    changeStarted: () => partitions.forEach((p) => p.ops.requestHandBack()),
    changeEnded: () => partitions.forEach((p) => p.ops.cancelHandBack()),
  });
  // One guard per process: a breaker opened by one partition's calls holds back every partition of this process.
  // With a recorded count above 1 (as last read, whatever EXECUTOR_PARTITIONS is) it uses this process's share of the
  // cluster-wide limits — the partitions it leads and is not handing back — and holds back for a breaker or Retry-After
  // pause another process recorded (src/provider/clusterGuard.ts); a lease is released only once this process's calls
  // fit the share of the partitions it keeps.
  const led = () => partitions.flatMap((p) => (p.lease.requireLeader() ? [p.partition] : []));
  const counted = () => partitions.flatMap((p) => (p.partition < layout.count() && p.lease.requireLeader() && !p.lease.releasing
    && !p.executor.handingBack ? [p.partition] : []));
  const { guard, permitsFor, fits, stop: stopClusterGuard } = createClusterGuard({ guard: config.providerGuard, partitionCount: () => layout.count(),
    leaseName: config.lease.name, holderId: config.lease.holderId, syncMs: config.schedule.refreshIntervalMs,
    aheadPerPartition: readyAhead(executorSettingsFrom(config)) }, stores.ops, clock, logger, metrics, counted);
  // every-instance mode with several partitions: each instance takes at most its fair share (set below, once the
  // partitions' lease managers exist; they ask it only to acquire).
  let share: PartitionShare | null = null;
  const partitions = Array.from({ length: config.partitions.count }, (_, k) =>
    buildPartition(k, { config, stores, logger, clock, provider, guard: permitsFor(k), mayAcquire: () => layout.mayAcquire(k) && (share?.mayAcquire(k) ?? true),
      // With several partitions, every series of a partition's lease and executor carries its `partition` label.
      metrics: config.partitions.count > 1 ? metricsRegistry.forInstance(config.lease.holderId, { partition: String(k) }) : metrics }));
  for (const p of partitions) {
    p.lease.onChange(() => guard.shareChanged()); // a partition led or lost changes the share at once
    // Calls end within PROVIDER_TIMEOUT_MS; the lease lasts a renew longer (else it steps down and the row expires).
    p.lease.releaseWhenFits(fits, config.provider.timeoutMs + config.lease.renewIntervalMs);
  }
  const { lease, executor, ops } = partitions[0]!;
  const timerMode = opts.timerMode ?? 'singleton';
  if (timerMode !== 'off') layout.start();
  const changer = createPartitionChanger(config, stores, clock, logger, metrics);
  // Every instance beats a row in SQL (the dashboard's instances view; the live list of the fair share). Never throws.
  // Only a process that can run every partition of the recorded count shares (the others take what nobody took), and
  // only once its timers run (the first beat, below, is before any tick: nobody counts it yet).
  const sharerRoles = () => (share?.claimsShare() ? ['http', 'timer', FAIR_SHARE_ROLE] : ['http', 'timer']);
  const heartbeat = await InstanceHeartbeat.start(stores.instances, { holderId: config.lease.holderId, version: config.instances.version,
    roles: timerMode === 'off' ? ['http'] : timerMode === 'every-instance' ? sharerRoles : ['http', 'timer'], heartbeatMs: config.instances.heartbeatMs, liveWindowMs: config.instances.liveWindowMs },
  clock, logger, led);
  if (timerMode === 'every-instance') {
    share = new PartitionShare(partitions.map((p) => p.lease), () => layout.count(), heartbeat,
      { request: (k) => partitions[k]!.ops.requestHandBack(), cancel: (k) => partitions[k]!.ops.cancelHandBack() },
      config.lease.holderId, config.executor.periodMs, config.instances.heartbeatMs,
      async () => Promise.all(partitions.map(async (p) => {
        const row = await stores.lease.get(p.leaseName);
        const leftMs = row ? row.expiresAt.getTime() - row.dbNow.getTime() : 0;
        return row && leftMs > 0 ? { holderId: row.holderId, expiresInMs: leftMs } : null;
      })), clock, logger);
  }
  const tickBudget = new TickBudget(config.executor.schedule, config.executor.tickBudgetMs, config.executor.handoffMs);
  const scheduleSize = () => partitions.reduce((n, p) => n + p.executor.refresher.schedule.size, 0);
  // One partition: one source, today's series. Several: the guard's gauges per instance, the executor's per partition.
  const unregisters = partitions.length === 1
    ? [metrics.gauges({ ...executorGauges(partitions[0]!), providerGuard: () => guard.state() })]
    : [metrics.gauges({ providerGuard: () => guard.state() }), ...partitions.map((p) => p.metrics.gauges(executorGauges(p)))];
  const unregisterGauges = () => unregisters.forEach((u) => u());
  const handlers = createIntentHandlers({
    intents: stores.intents, lease: stores.lease, leaseName: config.lease.name, config, logger,
    metrics: (e) => {
      if (e.name === 'intent_submit') metrics.intentSubmitted(e.outcome);
    },
  });
  const cluster = new ClusterViewCache(stores.lease, config.lease.name, () => clock.nowMs());
  let closed = false;
  return {
    config, logger, stores, lease, executor, tickBudget, handlers, metrics, metricsRegistry, ops, cluster, scheduleSize, partitions,
    partitionLeases: () => partitions.map((p) => p.lease), share, layout, changer, clock, providerGuard: guard,
    async close() {
      if (closed) return;
      closed = true;
      unregisterGauges();
      // The running tick finishes and what is unwritten is written (under the fence) before we let go, bounded by
      // functionTimeout less a margin; the row is released only if nothing is left unwritten (else it expires).
      // The heartbeat row goes first: the others then count one instance fewer when the partitions are released, and
      // take exactly their new share of them (a stale count would let one take more and hand it back: a needless move).
      const drainBy = clock.nowMs() + config.executor.invocationLimitMs;
      await heartbeat.stop(Math.max(0, drainBy - clock.nowMs()) / 10); // bounded: a tenth of the drain's time at most
      await stopClusterGuard(); // the holds other processes record are read no more
      layout.stop();
      await changer.close(); // its leases go at once: the next changer need not wait for them to expire
      await Promise.all(partitions.map(async (p) => {
        await p.executor.drain(drainBy);
        await p.lease.release();
      }));
      if (provider instanceof HttpProvider) provider.close();
      if (ownsStores) await stores.close();
      if (ownsMetrics) await metricsRegistry.shutdown();
    },
  };
}

/** Azure (Application Insights configured): the process-wide registry behind useAzureMonitor(); else one of our own. */
async function metricsRegistryFor(config: Config): Promise<MetricsRegistry> {
  const cs = config.telemetry.appInsightsConnectionString;
  if (!cs) return MetricsRegistry.standalone();
  const { azureMonitorRegistry } = await import('./observability/azureMonitor.js');
  return azureMonitorRegistry(cs, config.telemetry.aad);
}

/** One invocation of partition k's executor timer: its executor ticks with the app's tick budget. A timer whose
 *  partition is beyond the recorded count goes idle (said once per change of its state); partition 0's timer also
 *  drives a change of the count while one is active (issue 26), after its own executor has handed back. */
export async function runPartitionTimer(app: App, partition: number, isPastDue: boolean): Promise<void> {
  const p = app.partitions[partition];
  const idle = !p || (partition >= app.layout.count() && app.layout.active() === null);
  if (idle !== (idleTimers.get(app)?.has(partition) ?? false)) {
    const set = idleTimers.get(app) ?? new Set<number>();
    idleTimers.set(app, set);
    if (idle) set.add(partition);
    else set.delete(partition);
    if (idle) {
      app.logger.warn({ event: 'partition_timer_idle', partition, partitions: app.layout.count(), executor_partitions: app.partitions.length },
        `timer of partition ${partition} is idle: the database records ${app.layout.count()} partition(s)` +
        (p ? '' : ` and EXECUTOR_PARTITIONS is ${app.partitions.length}`));
    }
  }
  if (idle || !p) return;
  await app.share?.onTick(); // (every-instance: the fair share decides, and may hand a partition back, once per half period)
  // The changer's steps end by this invocation's next occurrence less the hand-off (fixed now: asked later, the
  // budget would look past the occurrence this invocation must leave free), and within functionTimeout; a switched
  // change runs on to its completion within functionTimeout (every partition waits for it; partition 0's next
  // occurrence, which would only wait too, may be skipped).
  const { invocationLimitMs, closingReserveMs, handoffMs } = app.config.executor;
  const finishBy = app.clock.nowMs() + invocationLimitMs - closingReserveMs;
  const stepsEndBy = Math.min(finishBy, app.clock.nowMs() + app.tickBudget.nextOccurrenceInMs() - handoffMs);
  const tick = runTimerInvocation({ executor: p.executor, tickBudget: app.tickBudget, logger: p.logger, config: app.config }, isPastDue);
  // A change's preparing step runs beside partition 0's tick (execution goes on, and a leader's tick lasts the whole
  // period); past it, the changer steps after the tick, which has handed partition 0 back by then.
  const preparing = partition === 0 && app.layout.active()?.state === 'preparing' ? changerStep(app, stepsEndBy) : null;
  await Promise.all([tick, preparing]);
  if (partition === 0 && app.layout.active() !== null) await changerStep(app, stepsEndBy, finishBy);
}

/** One step of the partition changer, on a layout read now, until `deadlineMs` (once switched: `finishByMs`). */
async function changerStep(app: App, deadlineMs: number, finishByMs = deadlineMs): Promise<void> {
  const layout = await app.layout.readNow();
  if (!layout.active || app.clock.nowMs() >= (layout.active.state === 'reassigning' ? finishByMs : deadlineMs)) return;
  await app.changer.step(layout, deadlineMs, finishByMs);
  if (app.changer.heldCount() === 0) await app.layout.refresh(); // completed (or gave up): act on the new count at once
}

/** The idle partition timers of each app (said once each time a timer goes idle). */
const idleTimers = new WeakMap<App, Set<number>>();

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
