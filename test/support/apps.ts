// Whole in-process apps (createApp: lease manager, executor, ops, metrics, handlers) on one dialect context,
// each with its own stores (own connections), as N instances behind a load balancer; plus helpers to call the
// framework-neutral handlers, read /api/metrics, and run timer-like tick loops.
import { createApp, runPartitionTimer, type App } from '../../src/app.js';
import { loadConfig, type Config } from '../../src/config.js';
import { silentLogger, type Logger } from '../../src/observability/logger.js';
import type { ApiResponse } from '../../src/http/problem.js';
import type { ApiRequest } from '../../src/http/request.js';
import { metricsHandler } from '../../src/http/metrics.js';
import type { TickSummary } from '../../src/executor/tickSummary.js';
import type { DialectContext } from './dialects.js';

export const TEST_LEASE = 'submission-manager-executor';

export function testConfig(providerUrl: string, env: Record<string, string> = {}): Config {
  return loadConfig({
    DATABASE_URL: 'pglite:', PROVIDER_URL: providerUrl, LEASE_NAME: TEST_LEASE, LEASE_DURATION_MS: '3000', EXECUTOR_SCHEDULE: '*/1 * * * * *',
    LEASE_RENEW_INTERVAL_MS: '1000', EXECUTOR_TICK_BUDGET_MS: '500', PROVIDER_TIMEOUT_MS: '1000', COMMIT_GRACE_MS: '1500',
    DB_STATEMENT_TIMEOUT_MS: '1000', SCHEDULE_REFRESH_INTERVAL_MS: '100', EXECUTOR_CONCURRENCY: '8', RETRY_BASE_DELAY_MS: '50',
    RETRY_MAX_DELAY_MS: '100', LEASE_ACQUIRE_JITTER_MS: '20',
    // System tests make providers fail on purpose to exercise retries and failures; the circuit breaker (on by
    // default) would hold them back for its cool-down. It has its own tests (providerGuard.test.ts).
    PROVIDER_BREAKER_THRESHOLD: '0', ...env,
  });
}

/** `poolMax`: each app's pool (default 4; with partitions a process may lead several, 3 connections each).
 *  `timerMode`: as the local host's TIMER_MODE (default singleton; every-instance: the fair share of partitions). */
export async function startApps(ctx: DialectContext, n: number, base: Config, logger: Logger = silentLogger, poolMax = 4,
  timerMode?: 'singleton' | 'every-instance'): Promise<App[]> {
  const apps: App[] = [];
  for (let i = 0; i < n; i++) {
    const holderId = `app-${i}-${Math.random().toString(16).slice(2, 8)}`;
    apps.push(await createApp({ config: { ...base, lease: { ...base.lease, holderId } }, stores: await ctx.openStores({ poolMax }), logger, migrate: false,
      timerMode }));
  }
  return apps;
}

export function request(method: string, path: string, body?: string, headers: Record<string, string> = {}): ApiRequest {
  const h = Object.fromEntries(Object.entries(headers).map(([k, v]) => [k.toLowerCase(), v]));
  return { method, url: `http://localhost${path}`, headers: { get: (n) => h[n.toLowerCase()] ?? null }, params: {}, text: async () => body ?? '' };
}

export const jsonBody = (v: unknown) => ({ body: JSON.stringify(v), headers: { 'content-type': 'application/json' } });

export async function submitVia(app: App, payload: Record<string, unknown>): Promise<string> {
  const b = jsonBody({ payload });
  const r: ApiResponse = await app.handlers.postIntent(request('POST', '/api/intents', b.body, b.headers));
  if (r.status !== 201) throw new Error(`submit failed: ${r.status} ${r.body}`);
  return (JSON.parse(r.body!) as { intentId: string }).intentId;
}

export async function scrape(app: App): Promise<string> {
  const r = await metricsHandler(app)(request('GET', '/api/metrics'));
  if (r.status !== 200) throw new Error(`metrics: ${r.status}`);
  return r.body ?? '';
}

/** Sum of the samples of `name` whose labels include `labels` (undefined when no sample matches). */
export function metric(text: string, name: string, labels: Record<string, string> = {}): number | undefined {
  let sum: number | undefined;
  for (const line of text.split('\n')) {
    const m = /^([a-zA-Z_:][\w:]*)(?:\{(.*)\})? (\S+)$/.exec(line);
    if (!m || m[1] !== name) continue;
    const ls = Object.fromEntries([...(m[2] ?? '').matchAll(/(\w+)="((?:[^"\\]|\\.)*)"/g)].map((x) => [x[1]!, x[2]!]));
    if (Object.entries(labels).every(([k, v]) => ls[k] === v)) sum = (sum ?? 0) + Number(m[3]);
  }
  return sum;
}

/** Timer-like loops: every app ticks (budget `budgetMs`), then sleeps `gapMs`, until stop(). */
/** Every partition's executor of every app ticks in its own loop, like its timer function (one partition: one loop per app). */
export function tickLoops(apps: App[], budgetMs = 400, gapMs = 50) {
  let stopped = false;
  const summaries: { app: App; partition: number; at: number; sum: TickSummary }[] = [];
  const loops = apps.flatMap((app) => app.partitions.map(async ({ partition, executor }) => {
    while (!stopped) {
      app.share?.onTick(); // as runPartitionTimer does (every-instance mode: the fair share decides)
      const sum = await executor.tick(budgetMs);
      summaries.push({ app, partition, at: Date.now(), sum });
      await new Promise((r) => setTimeout(r, gapMs));
    }
  }));
  return {
    summaries,
    async stop() {
      stopped = true;
      await Promise.all(loops);
    },
  };
}

/** Each app runs every partition's timer function back to back, as the local host's every-instance mode does (the
 *  changer of a partition count runs in partition 0's). */
export function timerLoops(apps: App[]) {
  let stopped = false;
  const loops = apps.flatMap((app) => app.partitions.map(async ({ partition }) => {
    while (!stopped) {
      await runPartitionTimer(app, partition, false).catch(() => {});
      await sleep(20);
    }
  }));
  return { async stop() { stopped = true; await Promise.all(loops); } };
}

export async function waitUntil(what: string, cond: () => Promise<boolean> | boolean, timeoutMs = 30_000): Promise<void> {
  const end = Date.now() + timeoutMs;
  while (!(await cond())) {
    if (Date.now() > end) throw new Error(`timed out waiting for: ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

export const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
