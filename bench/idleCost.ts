// Idle cost: database statements per idle tick (nothing to execute) for a follower and for a leader,
// counted by a wrapper around the same pool. Defaults as shipped (tick budget 8 s, refresh 1 s) and a
// short-budget variant.
import { LeaseManager } from '../src/lease/leaseManager.js';
import { systemClock } from '../src/lease/clock.js';
import { Executor } from '../src/executor/executor.js';
import { executorSettingsFrom } from '../src/executor/tickSummary.js';
import { HttpProvider } from '../src/provider/httpProvider.js';
import { loadConfig } from '../src/config.js';
import { silentLogger } from '../src/observability/logger.js';
import { counting, freshSchema, printTable, stores } from './support.js';

async function measure(budgetMs: number, refreshMs: number) {
  const schema = await freshSchema();
  const dbs = [counting(schema.open(2)), counting(schema.open(2))];
  try {
    const config = loadConfig({ EXECUTOR_TICK_BUDGET_MS: String(budgetMs), SCHEDULE_REFRESH_INTERVAL_MS: String(refreshMs) });
    const [leader, follower] = dbs.map((db, i) => {
      const s = stores(db);
      const lease = new LeaseManager(s.lease, { ...config.lease, holderId: `idle-${i}` }, systemClock, silentLogger);
      return { db, ex: new Executor(lease, s.execution, new HttpProvider(null), executorSettingsFrom(config), systemClock, silentLogger) };
    });
    await leader!.ex.tick(); // first tick: acquire + rebuild (not idle)
    await follower!.ex.tick();
    const ticks = 3;
    leader!.db.count = follower!.db.count = 0;
    for (let i = 0; i < ticks; i++) await Promise.all([leader!.ex.tick(), follower!.ex.tick()]);
    return { leader: leader!.db.count / ticks, follower: follower!.db.count / ticks };
  } finally {
    for (const d of dbs) await d.close();
    await schema.drop();
  }
}

export async function benchIdleCost(): Promise<string> {
  const rows = [];
  for (const [budget, refresh] of [[8_000, 1_000], [1_000, 1_000]] as const) {
    const r = await measure(budget, refresh);
    rows.push({ 'tick budget ms': budget, 'refresh ms': refresh, 'follower stmts/tick': r.follower.toFixed(1), 'leader stmts/tick': r.leader.toFixed(1) });
  }
  printTable('Idle cost (statements per idle tick, counted at the driver)', rows);
  return `idle follower=${rows[0]!['follower stmts/tick']} leader=${rows[0]!['leader stmts/tick']}@8s/${rows[1]!['leader stmts/tick']}@1s`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  benchIdleCost().then((line) => console.log(`\nratios: ${line}`), (e) => { console.error(e); process.exit(1); });
}
