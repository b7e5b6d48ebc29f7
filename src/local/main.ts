// `npm start`: the local host. Serves exactly the functions registered with @azure/functions (discovered
// through the @azure/functions-core stand-in, the way the real worker discovers them) over node:http, runs
// the timer functions on their NCRONTAB schedule (one instance at a time under a listener lock, as the
// Functions host; TIMER_MODE=every-instance for the adversarial mode), with INSTANCES in-process instances on one
// database (embedded PGlite under .data/ by default) and a demo provider when PROVIDER_URL is unset.
// stdout: readable lines only. pino JSON logs: LOG_FILE (default .data/host.log, `-` = stderr).
// Exit codes: 0 clean shutdown, 2 bad configuration (one line naming the setting), 1 other start failure.
import path from 'node:path';
import type { AddressInfo } from 'node:net';
import { fileURLToPath } from 'node:url';
import { runWithApp } from '../app.js';
import { ConfigError, loadConfig, redactUrl, type Config } from '../config.js';
import { loadRegisteredFunctions } from './functionsCore.js';
import { DemoRoutingProvider, startDemoProvider, type DemoProvider } from './demoProvider.js';
import { createHttpHost, httpRoutes, readRoutePrefix } from './httpServer.js';
import { startCluster, type Cluster } from './instances.js';
import { loadLocalSettings, withLocalDefaults } from './localSettings.js';
import { openLogSink, type LogSink } from './logSink.js';
import { BlobLockStore } from './blobLockStore.js';
import { readSingletonSettings } from './hostJson.js';
import { MemoryLockStore, type ListenerLockStore } from './listenerLock.js';
import { resolveTimerFunctions, startTimers, type TimerOptions, type TimerRunner } from './timers.js';

const projectRoot = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '../../..');
const print = (line: string) => void process.stdout.write(`${line}\n`);

function describeDatabase(config: Config, env: Record<string, string | undefined>): string {
  const db = config.database;
  if (db.kind === 'pglite') return db.dataDir ? `pglite:${db.dataDir}` : 'pglite: (in memory)';
  if (db.kind === 'mssqlEntra') return `Azure SQL ${db.server}/${db.database} (Entra)`;
  if ('host' in db) return `${db.kind === 'mysqlEntra' ? 'MySQL' : 'PostgreSQL'} ${db.host}:${db.port}/${db.database} as ${db.user} (Entra)`;
  return redactUrl(env.DATABASE_URL ?? db.url);
}

async function main(): Promise<void> {
  const env = withLocalDefaults(process.env);
  const local = loadLocalSettings(env);
  const config = loadConfig(env);

  // Registrations first (no database yet): the stand-in must be installed before @azure/functions loads.
  const registry = await loadRegisteredFunctions(projectRoot);
  const azf = (await import('@azure/functions')).default;
  const timers = resolveTimerFunctions(registry.functions, env);
  const routes = httpRoutes(registry.functions);
  const singleton = local.timerMode === 'singleton' ? readSingletonSettings(projectRoot, env) : null;

  const sink: LogSink = openLogSink(local.logFile);
  let demo: DemoProvider | null = null;
  let demoRouting: DemoRoutingProvider | null = null;
  let cluster: Cluster | null = null;
  let runner: TimerRunner | null = null;
  let lockStore: ListenerLockStore | null = null;
  try {
    // Listener locks where the Functions host keeps them (AzureWebJobsStorage), else in this process.
    if (singleton) lockStore = local.storage ? await BlobLockStore.open(local.storage, local.hostId) : new MemoryLockStore();
    let appConfig = config;
    if (!config.provider.url) {
      demo = await startDemoProvider({
        ...local.demoProvider,
        onCall: local.demoProvider.verbose
          ? (c) => print(`[demo-provider] intent ${c.intentId} attempt ${c.attemptNo} (partition ${c.partition} epoch ${c.leaseEpoch}) → ${c.status} ${c.note}`)
          : undefined,
      });
      demoRouting = new DemoRoutingProvider(demo.url);
      appConfig = { ...config, provider: { ...config.provider, url: demo.url } };
    }
    cluster = await startCluster({ config: appConfig, count: local.instances, sink, print, timerMode: local.timerMode,
      ...(demoRouting ? { provider: demoRouting } : {}) });
    const instances = cluster.instances;
    for (const inst of instances) {
      for (const h of registry.hooks.filter((x) => x.name === 'appStart')) {
        await runWithApp(inst.app, () => h.callback({ hookData: {}, appHookData: {} }));
      }
    }
    const routePrefix = readRoutePrefix(projectRoot);
    const server = createHttpHost({ azf, functions: registry.functions, instances, functionKey: local.functionKey, adminKey: local.adminKey, routePrefix, sink });
    await new Promise<void>((resolve, reject) => {
      server.once('error', (e: NodeJS.ErrnoException) => reject(e.code === 'EADDRINUSE'
        ? new ConfigError(`PORT: 127.0.0.1:${local.port} is already in use (choose another PORT, or PORT=0 for a free one)`) : e));
      server.listen(local.port, '127.0.0.1', () => resolve());
    });
    const port = (server.address() as AddressInfo).port;
    const timerOptions: TimerOptions = singleton && lockStore
      ? { mode: 'singleton', locks: { store: lockStore, settings: singleton }, print }
      : { mode: 'every-instance', print };
    // TIMER_MODE=off: no timer runs here (HTTP only), so no instance of this process ever leads.
    runner = startTimers(azf, instances, local.timerMode === 'off' ? [] : timers, sink, timerOptions);

    const base = `http://127.0.0.1:${port}${routePrefix ? `/${routePrefix}` : ''}`;
    const provider = demo ? `demo provider on ${demo.url}` : `provider ${redactUrl(config.provider.url!)}`;
    print(`SubmissionManager listening on ${base} (${instances.length} instance${instances.length === 1 ? '' : 's'}, ` +
      `database ${describeDatabase(config, env)}, ${provider})`);
    print(`  functions: ${routes.map((r) => `${r.methods.join('|')} /${routePrefix}/${r.route.template}`).join(', ')}; ` +
      `timers: ${timers.map((t) => `${t.fn.name} "${t.schedule}"`).join(', ')}`);
    print(`  holder ids: ${instances.map((i) => `${i.label}=${i.holderId}`).join(', ')}; ` +
      `function key ${local.functionKey ? 'required' : 'not required'}; logs → ${sink.where} (LOG_LEVEL ${config.logLevel}); Ctrl-C stops`);
    print(local.timerMode === 'off' ? '  timer mode: off — HTTP functions only (TIMER_MODE=off, as Flex\'s HTTP instance group); no instance here leads'
      : singleton && lockStore
      ? `  timer mode: singleton — each timer on one instance at a time, listener lock ${singleton.listenerLockPeriodMs / 1000} s, ` +
        `recovery poll ${singleton.listenerLockRecoveryPollingMs === null ? 'off' : `${singleton.listenerLockRecoveryPollingMs / 1000} s`}; locks: ${lockStore.where}`
      : '  timer mode: every-instance — every instance runs every timer (TIMER_MODE=every-instance, an adversarial test mode; Azure never does this)');
    if (singleton && !local.storage && config.database.kind !== 'pglite') {
      print('  note: AzureWebJobsStorage is unset, so separate processes on this database each run the timer; for the Functions ' +
        'host\'s cross-process lock run `npm run azurite` and set AzureWebJobsStorage=UseDevelopmentStorage=true');
    }

    installSignalHandlers(async (signal) => {
      const bound = config.executor.tickBudgetMs + config.provider.timeoutMs + 2_000;
      print(`[host] ${signal}: stopping — timers stopped, letting running ticks finish (at most ${Math.round(bound / 1000)} s), ` +
        'then releasing the lease; a second signal exits at once');
      await runner!.stop(); // releases the listener locks: another process takes them at its next recovery poll
      const closed = new Promise<void>((r) => server.close(() => r()));
      server.closeIdleConnections();
      if (!(await runner!.drain(bound))) print(`[host] ticks still running after ${bound} ms; terminating anyway`);
      await Promise.race([closed, new Promise((r) => setTimeout(r, 2_000))]);
      server.closeAllConnections();
      await terminate(cluster!, registry.hooks, demo, demoRouting);
      const stale = demo?.stale(); // the counts outlive the server (the drain's last calls included)
      if (stale) print(`[demo-provider] stale-epoch requests: ${stale.refused} refused, ${stale.accepted} accepted (DEMO_PROVIDER_FENCE=${local.demoProvider.fence ? 'on' : 'off'})`);
      print('[host] stopped');
      await sink.close();
    });
  } catch (e) {
    await runner?.stop().catch(() => {});
    await lockStore?.close().catch(() => {});
    await cluster?.close().catch(() => {});
    await demo?.close().catch(() => {});
    demoRouting?.close();
    await sink.close();
    throw e;
  }
}

/** appTerminate hooks per instance (they release the lease), then close what the host owns. */
async function terminate(cluster: Cluster, hooks: { name: string; callback: (ctx: unknown) => unknown }[],
  demo: DemoProvider | null, demoRouting: DemoRoutingProvider | null): Promise<void> {
  await Promise.all(cluster.instances.map(async (inst) => {
    for (const h of hooks.filter((x) => x.name === 'appTerminate')) {
      try {
        await runWithApp(inst.app, () => h.callback({ hookData: {}, appHookData: {} }));
      } catch (e) {
        inst.app.logger.error({ event: 'app_terminate_failed', err: e }, 'appTerminate hook failed');
      }
    }
    await inst.app.close(); // idempotent; releases the lease even if no hook is registered
  }));
  await cluster.close();
  await demo?.close();
  demoRouting?.close();
}

function installSignalHandlers(shutdown: (signal: NodeJS.Signals) => Promise<void>): void {
  let stoppingAt: number | null = null;
  const on = (signal: NodeJS.Signals) => {
    // The same Ctrl-C can arrive twice (terminal process group + npm forwarding it): ignore an echo.
    if (stoppingAt !== null && Date.now() - stoppingAt < 250) return;
    if (stoppingAt !== null) {
      print(`[host] second ${signal}: exiting now`);
      process.exit(signal === 'SIGINT' ? 130 : 143);
    }
    stoppingAt = Date.now();
    shutdown(signal).then(
      () => process.exit(0),
      (e: unknown) => {
        process.stderr.write(`SubmissionManager: shutdown failed: ${(e as Error).message}\n`);
        process.exit(1);
      },
    );
  };
  process.on('SIGINT', on);
  process.on('SIGTERM', on);
}

main().catch((e: unknown) => {
  if (e instanceof ConfigError) {
    process.stderr.write(`SubmissionManager: configuration error: ${e.message.replace(/\s+/g, ' ')}\n`);
    process.exit(2);
  }
  process.stderr.write(`SubmissionManager: failed to start: ${(e as Error)?.message ?? String(e)}\n`);
  process.exit(1);
});
