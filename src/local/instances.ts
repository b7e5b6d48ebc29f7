// The local host's in-process instances: ONE Stores (one pool / one embedded database, migrated once)
// shared by N apps, each with its own holder id `${base}-${i}`, lease manager and executor — like N
// workers behind a load balancer. Leadership changes print one readable line each.
import { existsSync, mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { createApp, type App } from '../app.js';
import { openStores } from '../store/open.js';
import { ConfigError, type Config } from '../config.js';
import { createLogger } from '../observability/logger.js';
import { routingDestination } from '../observability/invocationLog.js';
import type { Provider } from '../provider/provider.js';
import type { Stores } from '../store/stores.js';
import type { LogSink } from './logSink.js';

export interface HostInstance {
  /** Short label for readable lines: `inst-1` … */
  label: string;
  holderId: string;
  app: App;
}

export interface Cluster {
  stores: Stores;
  instances: HostInstance[];
  /** Close the shared stores (after every instance has terminated) and drop the PGlite lock. */
  close(): Promise<void>;
}

export interface ClusterOptions {
  config: Config;
  count: number;
  sink: LogSink;
  provider?: Provider;
  /** Readable output (stdout). */
  print: (line: string) => void;
  /** TIMER_MODE: the apps' heartbeat roles, and the fair share of partitions in every-instance mode. */
  timerMode?: 'singleton' | 'every-instance' | 'off';
}

/** PGlite is a single-process database: refuse to open a data directory another live host is using. */
function lockPgliteDir(dataDir: string): () => void {
  mkdirSync(dataDir, { recursive: true });
  const lock = path.join(path.dirname(path.resolve(dataDir)), `${path.basename(path.resolve(dataDir))}.pid`);
  if (existsSync(lock)) {
    const pid = Number(readFileSync(lock, 'utf8').trim());
    let alive = false;
    try {
      if (pid > 0 && pid !== process.pid) alive = (process.kill(pid, 0), true);
    } catch (e) {
      alive = (e as NodeJS.ErrnoException).code === 'EPERM';
    }
    if (alive) {
      throw new ConfigError(`DATABASE_URL: the embedded database ${dataDir} is in use by process ${pid} ` +
        '(PGlite serves one process; stop it, or use a postgres:// URL for a multi-process cluster)');
    }
  }
  writeFileSync(lock, String(process.pid));
  return () => rmSync(lock, { force: true });
}

export async function startCluster(o: ClusterOptions): Promise<Cluster> {
  const base = o.config.lease.holderId;
  const baseLogger = createLogger(o.config.logLevel, routingDestination(o.sink), { holder_id: base });
  const unlock = o.config.database.kind === 'pglite' && o.config.database.dataDir
    ? lockPgliteDir(o.config.database.dataDir) : () => {};
  let stores: Stores;
  try {
    stores = await openStores(o.config.database, o.config, baseLogger);
  } catch (e) {
    unlock();
    throw e;
  }
  const instances: HostInstance[] = [];
  try {
    await stores.migrate();
    for (let i = 1; i <= o.count; i++) {
      const holderId = `${base}-${i}`.slice(0, 128);
      const label = `inst-${i}`;
      const config: Config = { ...o.config, lease: { ...o.config.lease, holderId } };
      const logger = createLogger(o.config.logLevel, routingDestination(o.sink), { holder_id: holderId });
      const app = await createApp({ config, stores, logger, migrate: false, ...(o.provider ? { provider: o.provider } : {}),
        ...(o.timerMode ? { timerMode: o.timerMode } : {}) });
      // With partitions, each partition's leadership is its own line ("leader of partition 2"); one partition prints as before.
      for (const p of app.partitions) {
        const of = app.partitions.length > 1 ? ` of partition ${p.partition}` : '';
        p.lease.onChange((c) => {
          if (c.kind === 'acquired') {
            o.print(`[${label}] leader${of} (epoch ${c.token.leaseEpoch}, expires ${c.expiresAt.toISOString()}, holder ${holderId})`);
          } else {
            o.print(`[${label}] follower${of} (reason ${c.reason}, was epoch ${c.token.leaseEpoch})`);
          }
        });
      }
      instances.push({ label, holderId, app });
    }
  } catch (e) {
    await stores.close().catch(() => {});
    unlock();
    throw e;
  }
  return {
    stores,
    instances,
    async close() {
      try {
        await stores.close();
      } finally {
        unlock();
      }
    },
  };
}
