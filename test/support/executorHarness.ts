// One executor built by hand on a dialect context (not startInstances), so a test can wrap the clock, the
// execution store, the provider or the ops — the ports the executor receives — to stage a fault at an exact point.
import { randomUUID } from 'node:crypto';
import type { DialectContext } from './dialects.js';
import { LEASE_NAME } from './instances.js';
import { staleWrites } from './fenceChecker.js';
import { LeaseManager } from '../../src/lease/leaseManager.js';
import { systemClock, type Clock } from '../../src/lease/clock.js';
import { Executor } from '../../src/executor/executor.js';
import { NO_OPS, type ExecutorOps } from '../../src/executor/executorOps.js';
import { HttpProvider } from '../../src/provider/httpProvider.js';
import type { ProviderGuard } from '../../src/provider/guard.js';
import { silentLogger, type Logger } from '../../src/observability/logger.js';
import type { ExecutorSettings } from '../../src/executor/tickSummary.js';
import type { Provider } from '../../src/provider/provider.js';
import type { ExecutionStore } from '../../src/store/intentPorts.js';
import type { Stores } from '../../src/store/stores.js';

/** systemClock with a manual forward jump (a GC pause / SIGSTOP as seen by the monotonic clock). */
export class JumpClock implements Clock {
  offset = 0;
  nowCalls = 0;
  nowMs(): number {
    this.nowCalls++;
    return systemClock.nowMs() + this.offset;
  }
  sleep(ms: number, signal?: AbortSignal): Promise<void> {
    return systemClock.sleep(ms, signal);
  }
}

export interface Built {
  stores: Stores;
  lease: LeaseManager;
  executor: Executor;
  clock: JumpClock;
}

export async function buildExecutor(ctx: DialectContext, o: {
  providerUrl: string;
  leaseMs?: number;
  concurrency?: number;
  wrapStore?: (s: ExecutionStore, clock: JumpClock) => ExecutionStore;
  wrapProvider?: (p: Provider) => Provider;
  ops?: ExecutorOps;
  guard?: (clock: JumpClock) => ProviderGuard;
  holderId?: string;
  stores?: Stores;
  logger?: Logger;
  /** Refresh interval (default 100 ms). */
  refreshMs?: number;
  /** Periodic reconcile interval (default 60 s). */
  reconcileMs?: number;
  /** Wake on due-intent notices (the stores' LISTEN/NOTIFY) as the composition root does (default false). */
  notices?: boolean;
  /** ExecutorSettings.partition (default: unset, i.e. 0). */
  partition?: number;
  /** The lease it leads (default LEASE_NAME). */
  leaseName?: string;
}): Promise<Built> {
  const stores = o.stores ?? await ctx.openStores({ poolMax: 4 });
  const clock = new JumpClock();
  const leaseMs = o.leaseMs ?? 3_000;
  const lease = new LeaseManager(stores.lease, {
    name: o.leaseName ?? LEASE_NAME, holderId: o.holderId ?? `rev-${randomUUID().slice(0, 6)}`, durationMs: leaseMs, renewIntervalMs: Math.floor(leaseMs / 3),
    acquireIntervalMs: leaseMs, safetyMarginMs: Math.floor(leaseMs / 5), acquireJitterMs: 20,
  }, clock, o.logger ?? silentLogger);
  const concurrency = o.concurrency ?? 8;
  const settings: ExecutorSettings = {
    tickBudgetMs: 1_000, concurrency,
    providerTimeoutMs: 2_000, reconcileIntervalMs: o.reconcileMs ?? 60_000,
    refresh: { intervalMs: o.refreshMs ?? 100, pageSize: 100, commitGraceMs: 500 },
    startBatch: Math.max(1, Math.floor(concurrency / 4)), completionBatch: Math.max(1, Math.floor(concurrency / 2)),
    minLeaderWorkMs: 100,
    ...(o.partition === undefined ? {} : { partition: o.partition }),
  };
  const store = o.wrapStore ? o.wrapStore(stores.execution, clock) : stores.execution;
  const base: Provider = new HttpProvider(o.providerUrl);
  const provider = o.wrapProvider ? o.wrapProvider(base) : base;
  const executor = new Executor(lease, store, provider, settings, clock, o.logger ?? silentLogger, Math.random, o.ops ?? NO_OPS,
    o.guard?.(clock) ?? null);
  executor.layout.readFrom(async () => (await stores.partitions.readLayout()).generation); // as the composition root
  if (o.notices && stores.notices) executor.wakeOn(stores.notices);
  return { stores, lease, executor, clock };
}


/** The intent row of `id` as the database has it now. */
export const intentRow = async (ctx: DialectContext, id: string) => (await ctx.intentRows()).find((r) => r.intentId === id)!;

/** No fenced write committed under an epoch after a newer one was acquired (the audit log against lease events). */
export async function stalePairs(ctx: DialectContext, b: Built) {
  return staleWrites(await ctx.auditLog(), await b.stores.lease.listEvents(LEASE_NAME));
}
