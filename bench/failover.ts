// Failover: 3 local-host processes (INSTANCES=1 each) on the PostgreSQL server, lease 5 s, a steady stream
// of due intents. SIGKILL the leader → time until the first attempt started by the new leader, as a
// multiple of the lease (database clock on both ends); SIGTERM the leader (graceful release) → same, in ms.
import { fmt, freshSchema, PG_URL, printTable, seedIntents, startProviderProcess } from './support.js';
import { schemaUrl, startHost, type HostProcess } from './localHost.js';

const LEASE_MS = 5_000;

async function leaderOf(hosts: HostProcess[]): Promise<{ host: HostProcess; epoch: number } | null> {
  for (const h of hosts) {
    if (h.child.exitCode !== null || h.child.signalCode !== null) continue;
    const r = await fetch(`${h.base}/readyz`, { headers: { accept: 'application/json' } }).then((x) => x.json() as Promise<{ mode: string; leaseEpoch: number }>).catch(() => null);
    if (r?.mode === 'leader') return { host: h, epoch: r.leaseEpoch };
  }
  return null;
}

export async function benchFailover(rounds = Number(process.env.BENCH_FAILOVER_ROUNDS ?? 2)): Promise<string> {
  const schema = await freshSchema();
  const db = schema.open(2);
  const provider = await startProviderProcess(0);
  const env = {
    DATABASE_URL: schemaUrl(PG_URL, schema.schema), INSTANCES: '1', PROVIDER_URL: provider.url,
    LEASE_DURATION_MS: String(LEASE_MS), LEASE_RENEW_INTERVAL_MS: '1000', LEASE_SAFETY_MARGIN_MS: '1000',
    LEASE_ACQUIRE_JITTER_MS: '100', EXECUTOR_SCHEDULE: '*/1 * * * * *', EXECUTOR_TICK_BUDGET_MS: '900',
    PROVIDER_TIMEOUT_MS: '1000', SCHEDULE_REFRESH_INTERVAL_MS: '200', COMMIT_GRACE_MS: '1500', DB_STATEMENT_TIMEOUT_MS: '1000',
  };
  const hosts: HostProcess[] = [];
  let feeding = true;
  const feeder = (async () => {
    while (feeding) {
      await seedIntents(db, 5).catch(() => {});
      await new Promise((r) => setTimeout(r, 50));
    }
  })();
  const rows: Record<string, string | number>[] = [];
  try {
    for (let i = 0; i < 3; i++) hosts.push(await startHost(env));
    for (let round = 0; round < rounds * 2; round++) {
      const kind = round % 2 === 0 ? 'SIGKILL' : 'SIGTERM';
      let leader = null;
      for (let t = 0; t < 200 && !leader; t++) {
        leader = await leaderOf(hosts);
        if (!leader) await new Promise((r) => setTimeout(r, 100));
      }
      if (!leader) throw new Error('no leader');
      await new Promise((r) => setTimeout(r, 1_500)); // let it execute for a while
      leader.host.child.kill(kind);
      const killedAt = (await db.query<{ t: Date }>('SELECT clock_timestamp() AS t')).rows[0]!.t.getTime();
      let first: number | null = null;
      for (let t = 0; t < 400 && first === null; t++) {
        const r = await db.query<{ t: Date | null }>('SELECT min(started_at) AS t FROM submission_attempts WHERE lease_epoch > $1', [leader.epoch]);
        first = r.rows[0]!.t ? r.rows[0]!.t.getTime() : null;
        if (first === null) await new Promise((r) => setTimeout(r, 50));
      }
      if (first === null) throw new Error('no new leader executed');
      const ms = first - killedAt;
      rows.push({ fault: kind, 'to first new attempt ms': fmt(ms), '÷ lease': fmt(ms / LEASE_MS, 2) });
      // Replace the stopped process so three keep running.
      hosts.splice(hosts.indexOf(leader.host), 1);
      await leader.host.stop('SIGKILL');
      hosts.push(await startHost(env));
    }
  } finally {
    feeding = false;
    await feeder;
    for (const h of hosts) await h.stop('SIGKILL');
    provider.stop();
    await db.close();
    await schema.drop();
  }
  printTable(`Failover (3 processes, lease ${LEASE_MS} ms, timer every 1 s)`, rows);
  const worst = (k: string) => Math.max(...rows.filter((r) => r.fault === k).map((r) => Number(r['to first new attempt ms'])));
  return `failover kill=${fmt(worst('SIGKILL') / LEASE_MS, 2)}x lease, term=${fmt(worst('SIGTERM'))}ms`;
}

if (import.meta.url === `file://${process.argv[1]}`) {
  benchFailover().then((line) => console.log(`\nratios: ${line}`), (e) => { console.error(e); process.exit(1); });
}
