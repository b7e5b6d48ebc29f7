// Execution beside a partition change's preparing pass (bench/partitionChangeLarge.ts): one leader of partition 0 (the
// only partition while the count is 1) on a pool of its own with the product's statement timeout, a stream of intents
// at `rate` per second inserted through the store (due at once), and a provider in this process recording each call's
// first arrival. window(from, to) = the intents inserted in [from, to) (performance.now()): how many, how many were
// called, and their pickup (insert → call) percentiles. stop() ends the stream and the ticks and releases the lease
// (the drain a partition leader makes when it sees the change pending).
import { LeaseManager } from '../src/lease/leaseManager.js';
import { Executor } from '../src/executor/executor.js';
import { HttpProvider } from '../src/provider/httpProvider.js';
import { systemClock } from '../src/lease/clock.js';
import { silentLogger } from '../src/observability/logger.js';
import { uuidv7 } from '../src/intents/ids.js';
import { partitionHash } from '../src/intents/partition.js';
import { recordingProvider } from './pickup.js';
import type { OpenStores } from './largeTable.js';

const pct = (xs: number[], p: number) => (xs.length ? [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]! : NaN);
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const CONTRACT = { provider: { url: null }, payload: { bench: 'beside' }, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 50 } };

export interface Window { inserted: number; called: number; p50: number; p99: number }

export async function startExecution(open: OpenStores, leaseName: string, rate: number, statementTimeoutMs: number) {
  const product = open(statementTimeoutMs, 6);
  const s = product.stores;
  const provider = await recordingProvider();
  const lease = new LeaseManager(s.lease, { name: leaseName, holderId: 'bench-leader', durationMs: 60_000, renewIntervalMs: 20_000,
    acquireIntervalMs: 1_000, safetyMarginMs: 5_000, acquireJitterMs: 0 }, systemClock, silentLogger);
  const http = new HttpProvider(provider.url);
  const ex = new Executor(lease, s.execution, http, {
    tickBudgetMs: 1_000, concurrency: 8, providerTimeoutMs: 10_000, reconcileIntervalMs: 3_600_000,
    refresh: { intervalMs: 1_000, pageSize: 500, commitGraceMs: 5_000 }, startBatch: 2, completionBatch: 4, minLeaderWorkMs: 100,
  }, systemClock, silentLogger);
  const sent = new Map<string, number>();
  let running = true;
  let stopped: Promise<void> | null = null;
  const ticking = (async () => {
    while (running) await ex.tick(1_000);
  })();
  const streaming = (async () => {
    while (running) {
      await sleep(1_000 / rate);
      const intentId = uuidv7();
      const t0 = performance.now();
      await s.intents.insert({ intentId, idempotencyKey: null, requestHash: '0'.repeat(64), contract: CONTRACT, maxAttempts: 3, notBefore: null,
        partitionKey: null, partitionHash: partitionHash(intentId) });
      sent.set(intentId, t0);
    }
  })();
  return {
    window(from: number, to: number): Window {
      const ids = [...sent].filter(([, t0]) => t0 >= from && t0 < to);
      const lat = ids.flatMap(([id, t0]) => (provider.arrived.has(id) ? [provider.arrived.get(id)! - t0] : []));
      return { inserted: ids.length, called: lat.length, p50: pct(lat, 50), p99: pct(lat, 99) };
    },
    /** Once; later calls wait for the first. */
    stop(): Promise<void> {
      stopped ??= (async () => {
        running = false;
        await Promise.all([ticking, streaming]);
        await lease.release();
        http.close();
        await provider.close();
        await product.close();
      })();
      return stopped;
    },
  };
}
