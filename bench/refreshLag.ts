// Refresh lag: intents submitted through followers' stores (what their POST handler does) → time until the
// leader's in-memory schedule holds them, against the refresh interval. Intents are due in an hour so
// they stay in the schedule to be observed.
import { LeaseManager } from '../src/lease/leaseManager.js';
import { systemClock } from '../src/lease/clock.js';
import { Executor } from '../src/executor/executor.js';
import { executorSettingsFrom } from '../src/executor/tickSummary.js';
import { HttpProvider } from '../src/provider/httpProvider.js';
import { loadConfig } from '../src/config.js';
import { silentLogger } from '../src/observability/logger.js';
import { randomUUID } from 'node:crypto';
import { fmt, freshSchema, printTable, stores } from './support.js';

const pct = (xs: number[], p: number) => [...xs].sort((a, b) => a - b)[Math.min(xs.length - 1, Math.floor((p / 100) * xs.length))]!;

async function measure(refreshMs: number, n: number) {
  const schema = await freshSchema();
  const leaderDb = schema.open(4);
  const followerDb = schema.open(4);
  try {
    const config = loadConfig({ SCHEDULE_REFRESH_INTERVAL_MS: String(refreshMs), EXECUTOR_TICK_BUDGET_MS: '30000',
      PROVIDER_TIMEOUT_MS: '1000', LEASE_DURATION_MS: '120000', COMMIT_GRACE_MS: '5000' });
    const s = stores(leaderDb);
    const lease = new LeaseManager(s.lease, { ...config.lease, holderId: 'lag-leader' }, systemClock, silentLogger);
    const ex = new Executor(lease, s.execution, new HttpProvider(null), executorSettingsFrom(config), systemClock, silentLogger);
    await ex.tick(10);
    let running = true;
    const ticking = (async () => {
      while (running) await ex.tick(); // like the timer: back-to-back ticks
    })();
    const follower = stores(followerDb);
    const lags: number[] = [];
    for (let i = 0; i < n; i++) {
      await new Promise((r) => setTimeout(r, Math.random() * refreshMs * 0.7));
      const intentId = randomUUID();
      await follower.intents.insert({ intentId, idempotencyKey: null, requestHash: '0'.repeat(64), maxAttempts: 1,
        contract: { provider: { url: null }, payload: {}, retry: { maxAttempts: 1, baseDelayMs: 1, maxDelayMs: 1 } },
        notBefore: new Date(Date.now() + 3600_000) });
      const t0 = performance.now();
      while (!ex.refresher.schedule.has(intentId)) await new Promise((r) => setTimeout(r, 2));
      lags.push(performance.now() - t0);
    }
    running = false;
    lease.drop('bench done');
    await ticking;
    return { p50: pct(lags, 50), p99: pct(lags, 99), max: Math.max(...lags) };
  } finally {
    await leaderDb.close();
    await followerDb.close();
    await schema.drop();
  }
}

export async function benchRefreshLag(): Promise<string> {
  const rows = [];
  for (const refresh of [1_000, 200]) {
    const r = await measure(refresh, refresh === 1_000 ? 30 : 100);
    rows.push({ 'refresh ms': refresh, 'lag p50 ms': fmt(r.p50), 'lag p99 ms': fmt(r.p99), 'max ms': fmt(r.max), 'p99 ÷ interval': fmt(r.p99 / refresh, 2) });
  }
  printTable('Refresh lag (201 from a follower → in the leader schedule)', rows);
  return `refreshLag ${rows.map((r) => `${r['refresh ms']}ms p99=${r['p99 ÷ interval']}x`).join(' ')}`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  benchRefreshLag().then((line) => console.log(`\nratios: ${line}`), (e) => { console.error(e); process.exit(1); });
}
