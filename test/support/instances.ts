// In-process instances for executor tests: each has its own stores (own connections), lease manager and
// executor, sharing one database context, like N processes behind a load balancer.
import { randomUUID } from 'node:crypto';
import { LeaseManager } from '../../src/lease/leaseManager.js';
import { systemClock } from '../../src/lease/clock.js';
import { Executor } from '../../src/executor/executor.js';
import { HttpProvider } from '../../src/provider/httpProvider.js';
import { silentLogger } from '../../src/observability/logger.js';
import type { Stores } from '../../src/store/stores.js';
import type { LeaseToken } from '../../src/store/ports.js';
import type { DialectContext } from './dialects.js';
import type { ExecutorSettings } from '../../src/executor/tickSummary.js';

export const LEASE_NAME = 'submission-manager-executor';

/** Take the (free) lease directly through the store, for `holderId`; its token. Throws if it is held. */
export async function acquireToken(s: Stores, holderId: string, durationMs = 60_000, leaseName = LEASE_NAME): Promise<LeaseToken> {
  const out = await s.lease.tryAcquire(leaseName, holderId, durationMs);
  if (!out.acquired) throw new Error(`lease ${leaseName} not acquired by ${holderId}`);
  return { leaseName, holderId, leaseEpoch: out.lease.leaseEpoch };
}

export interface TestInstance {
  holderId: string;
  stores: Stores;
  lease: LeaseManager;
  executor: Executor;
}

export interface InstanceOptions {
  leaseMs?: number;
  renewMs?: number;
  marginMs?: number;
  refreshMs?: number;
  graceMs?: number;
  pageSize?: number;
  concurrency?: number;
  providerTimeoutMs?: number;
  providerUrl: string;
}

export async function startInstances(ctx: DialectContext, n: number, o: InstanceOptions): Promise<TestInstance[]> {
  const out: TestInstance[] = [];
  for (let i = 0; i < n; i++) {
    const holderId = `inst-${i}-${randomUUID().slice(0, 6)}`;
    const stores = await ctx.openStores({ poolMax: 4 });
    const leaseMs = o.leaseMs ?? 3_000;
    const lease = new LeaseManager(stores.lease, {
      name: LEASE_NAME, holderId, durationMs: leaseMs, renewIntervalMs: o.renewMs ?? Math.floor(leaseMs / 3),
      acquireIntervalMs: leaseMs, safetyMarginMs: o.marginMs ?? Math.floor(leaseMs / 5), acquireJitterMs: 20,
    }, systemClock, silentLogger);
    const concurrency = o.concurrency ?? 8;
    const settings: ExecutorSettings = {
      tickBudgetMs: 1_000, concurrency,
      providerTimeoutMs: o.providerTimeoutMs ?? 2_000, reconcileIntervalMs: 60_000,
      refresh: { intervalMs: o.refreshMs ?? 100, pageSize: o.pageSize ?? 100, commitGraceMs: o.graceMs ?? 500 },
      startBatch: Math.max(1, Math.floor(concurrency / 4)), completionBatch: Math.max(1, Math.floor(concurrency / 2)),
      minLeaderWorkMs: 100,
    };
    const executor = new Executor(lease, stores.execution, new HttpProvider(o.providerUrl), settings, systemClock, silentLogger);
    out.push({ holderId, stores, lease, executor });
  }
  return out;
}

/** Insert an intent through the IntentStore (what POST /api/intents does), due now unless notBefore. */
export async function submit(s: Stores, payload: Record<string, unknown> = { n: 1 },
  opts: { maxAttempts?: number; notBefore?: Date; key?: string; intentId?: string } = {}) {
  const intentId = opts.intentId ?? randomUUID();
  const maxAttempts = opts.maxAttempts ?? 5;
  const r = await s.intents.insert({
    intentId, idempotencyKey: opts.key ?? null, requestHash: '0'.repeat(64),
    contract: { provider: { url: null }, payload, retry: { maxAttempts, baseDelayMs: 10, maxDelayMs: 50 } },
    maxAttempts, notBefore: opts.notBefore ?? null,
  });
  return r.intent;
}

/** Tick every instance repeatedly (like their timers) until `done()` or the timeout. */
export async function runTicks(instances: TestInstance[], done: () => Promise<boolean> | boolean, timeoutMs = 30_000, budgetMs = 500) {
  const end = Date.now() + timeoutMs;
  while (!(await done())) {
    if (Date.now() > end) throw new Error(`condition not reached within ${timeoutMs} ms`);
    await Promise.all(instances.map((i) => i.executor.tick(budgetMs)));
  }
}
