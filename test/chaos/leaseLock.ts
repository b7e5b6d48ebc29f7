// Black-box reproduction of issue 13's transient-lock case: while a leader (10 s lease) executes, lock the
// lease table past DB_STATEMENT_TIMEOUT_MS (2 s) for --lock-ms (3.5 s), then free it. Measures, per round:
// the time from the unlock to the first fenced start committed afterwards (resume), and how many provider
// calls were sent for an intent whose call had already been answered 2xx (re-sends after a 2xx).
// `node dist/test/chaos/leaseLock.js [--rounds N] [--lock-ms MS] [--lease-ms MS]`; prints one JSON line per
// round and a summary. Needs the PostgreSQL server (PG_TEST_ADMIN_URL).
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { ChaosCluster, createChaosDb } from './cluster.js';
import { startProviderProcess } from './providerLauncher.js';
import { LoadGenerator } from './load.js';
import type { ProviderRecord } from './providerProcess.js';
import { readProviderRecord } from './history.js';
import { createRng, sleep } from './rng.js';

const arg = (name: string, def: number) => {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 ? Number(process.argv[i + 1]) : def;
};

export interface LockRound { round: number; lockMs: number; resumeMs: number | null; newEpochs: number; resendsAfter2xx: number }

/** Deliveries sent for a key after a delivery of that key was answered 2xx (the provider's own record). */
export function resendsAfter2xx(records: ProviderRecord[], from = 0, to = Number.POSITIVE_INFINITY): number {
  const firstOk = new Map<string, number>();
  let n = 0;
  for (const r of [...records].sort((a, b) => a.arrivedAt - b.arrivedAt)) {
    const ok = firstOk.get(r.key);
    if (ok !== undefined && r.arrivedAt >= from && r.arrivedAt < to) n++;
    if (ok === undefined && r.status >= 200 && r.status < 300) firstOk.set(r.key, r.arrivedAt);
  }
  return n;
}

async function main(): Promise<void> {
  const rounds = arg('rounds', 3);
  const lockMs = arg('lock-ms', 3_500);
  const leaseMs = arg('lease-ms', 10_000);
  const dir = mkdtempSync(path.join(os.tmpdir(), 'sm-leaselock-'));
  const providerFile = path.join(dir, 'provider.jsonl');
  const db = await createChaosDb();
  const provider = await startProviderProcess(providerFile, 7, 0, 400);
  const env: Record<string, string> = {
    EXECUTOR_SCHEDULE: '*/1 * * * * *', LEASE_DURATION_MS: String(leaseMs), LEASE_RENEW_INTERVAL_MS: '2000',
    LEASE_SAFETY_MARGIN_MS: '1000', EXECUTOR_TICK_BUDGET_MS: '3000', PROVIDER_TIMEOUT_MS: '2000', SCHEDULE_REFRESH_INTERVAL_MS: '200',
    SCHEDULE_RECONCILE_INTERVAL_MS: '60000', COMMIT_GRACE_MS: '3000', DB_STATEMENT_TIMEOUT_MS: '2000', RETRY_BASE_DELAY_MS: '100',
    RETRY_MAX_DELAY_MS: '500', DB_POOL_MAX: '5', RETENTION_DAYS: '0', LOG_LEVEL: 'info', PORT: '0', INSTANCES: '1',
    DEMO_PROVIDER_VERBOSE: 'false', PROVIDER_URL: provider.url,
  };
  const cluster = new ChaosCluster(db, env, 'lock', dir);
  const load = new LoadGenerator(cluster, createRng(11), 'lock',
    { ratePerSec: 8, maxInFlight: 32, replayRate: 0, cancelRate: 0, permanentRate: 0, maxAttempts: 25 });
  const out: LockRound[] = [];
  try {
    await cluster.start(3);
    if (!(await cluster.leaderSlot(30_000))) throw new Error('no leader');
    load.start();
    await sleep(4_000);
    for (let round = 1; round <= rounds; round++) {
      const before = (await cluster.lease())?.epoch ?? 0;
      const lockStart = Date.now();
      const locked = db.sql(`DO $$ BEGIN LOCK TABLE submission_manager_leases IN ACCESS EXCLUSIVE MODE; PERFORM pg_sleep(${lockMs / 1000}); END $$`);
      await locked;
      const unlockAt = Date.now();
      await sleep(Math.max(8_000, leaseMs + 3_000));
      const r = await db.sql<{ t: number | null }>(`SELECT (extract(epoch FROM min(at)) * 1000)::float8 AS t FROM submission_execution_audit
        WHERE action = 'start_attempts' AND at > to_timestamp($1 / 1000.0)`, [unlockAt]);
      const after = (await cluster.lease())?.epoch ?? 0;
      const records = readProviderRecord(readFileSync(providerFile, 'utf8').split('\n').filter(Boolean));
      const res: LockRound = {
        round, lockMs: unlockAt - lockStart, resumeMs: r[0]?.t == null ? null : Math.round(Number(r[0].t) - unlockAt),
        newEpochs: after - before, resendsAfter2xx: resendsAfter2xx(records, lockStart),
      };
      out.push(res);
      console.log(JSON.stringify(res));
    }
    await load.stop();
    // Drain: every intent terminal, so a re-send caused by the last round is counted too.
    for (let i = 0; i < 120; i++) {
      const n = await db.sql<{ n: number }>(`SELECT count(*)::int AS n FROM submission_intents WHERE status IN ('scheduled', 'in_flight')`);
      if (n[0]!.n === 0) break;
      await sleep(500);
    }
  } finally {
    await load.stop().catch(() => {});
    await cluster.stopAll().catch(() => {});
    await provider.stop().catch(() => {});
    await db.drop().catch(() => {});
  }
  const records = readProviderRecord(readFileSync(providerFile, 'utf8').split('\n').filter(Boolean));
  const resumes = out.map((o) => o.resumeMs ?? Number.POSITIVE_INFINITY);
  console.log(JSON.stringify({
    summary: true, rounds: out.length, worstResumeMs: Math.max(...resumes), meanResumeMs: Math.round(resumes.reduce((a, b) => a + b, 0) / resumes.length),
    resendsAfter2xx: resendsAfter2xx(records), providerRequests: records.length,
    keysDeliveredTwice: [...records.reduce((m, r) => m.set(r.key, (m.get(r.key) ?? 0) + 1), new Map<string, number>()).values()].filter((n) => n > 1).length,
  }));
  if (!process.argv.includes('--keep')) rmSync(dir, { recursive: true, force: true });
  else console.log(`kept ${dir}`);
}

if (process.argv[1]?.endsWith('leaseLock.js')) {
  main().then(() => process.exit(0), (e: unknown) => {
    console.error(e);
    process.exit(1);
  });
}
