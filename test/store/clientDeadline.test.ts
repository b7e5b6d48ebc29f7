// Client-side deadlines through a TCP proxy that can blackhole the connection (packets silently dropped, no reset):
// on the PostgreSQL server a statement that gets no answer fails as a transient StoreError shortly after statement
// timeout + margin instead of waiting for TCP, its connection is destroyed, and the pool recovers (MySQL/MariaDB's
// twin: test/store/mysqlDialect.test.ts). On every database server (serverDatabases): a whole executor tick through
// a blackholed connection returns by its own deadlines (budget + provider timeout + margins), while the connection
// still answers nothing.
import { describe, expect, inject, it } from 'vitest';
import { openPgPool } from '../../src/store/postgres/db.js';
import { CLIENT_DEADLINE_MARGIN_MS } from '../../src/limits.js';
import { LeaseManager } from '../../src/lease/leaseManager.js';
import { systemClock } from '../../src/lease/clock.js';
import { Executor } from '../../src/executor/executor.js';
import { HttpProvider } from '../../src/provider/httpProvider.js';
import { silentLogger } from '../../src/observability/logger.js';
import { PG_TEST_URL } from '../support/pgServer.js';
import { TcpProxy } from '../chaos/tcpProxy.js';
import { startRecordingProvider } from '../support/recordingProvider.js';
import { LEASE_NAME, submit } from '../support/instances.js';
import { serverDatabases } from '../support/dialects.js';

const STATEMENT_MS = 400;

async function proxied() {
  const target = new URL(PG_TEST_URL);
  const proxy = new TcpProxy(target.hostname, Number(target.port || 5432));
  await proxy.listen();
  const u = new URL(PG_TEST_URL);
  u.hostname = '127.0.0.1';
  u.port = String(proxy.port);
  const db = openPgPool({ url: u.toString(), max: 2, statementTimeoutMs: STATEMENT_MS, applicationName: 'deadline-test' }, () => {});
  return { proxy, db };
}

describe('client-side deadlines (PostgreSQL server through a TCP proxy)', () => {
  it('a blackholed statement fails at statement timeout + margin, its connection is destroyed, the pool recovers', async (t) => {
    const skip = inject('pgUnavailable');
    if (skip) return t.skip(skip);
    const { proxy, db } = await proxied();
    try {
      expect((await db.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one).toBe(1);
      const hole = proxy.blackhole(5_000, 'resume'); // longer than the deadline; no reset
      let holeEnded = false;
      void hole.then(() => (holeEnded = true));
      const t0 = Date.now();
      const err = await db.query('SELECT 2').catch((e: unknown) => e);
      const took = Date.now() - t0;
      // Ended by the client-side deadline, the one it names (statement timeout + margin), while the connection still
      // answered nothing (not TCP's minutes); never before that deadline.
      expect(err).toMatchObject({ name: 'StoreError', kind: 'transient', code: 'CLIENT_DEADLINE' });
      expect((err as Error).message).toContain(`(${STATEMENT_MS + CLIENT_DEADLINE_MARGIN_MS} ms)`);
      expect(holeEnded).toBe(false);
      expect(took).toBeGreaterThanOrEqual(STATEMENT_MS + CLIENT_DEADLINE_MARGIN_MS - 50);
      // A transaction is bounded the same way.
      const txErr = await db.transaction(async (tx) => tx.query('SELECT 3')).catch((e: unknown) => e);
      expect(txErr).toMatchObject({ kind: 'transient' });
      await hole;
      // The timed-out connections were destroyed: fresh ones answer (the late bytes of the old ones go nowhere).
      expect((await db.query<{ v: number }>('SELECT 4 AS v')).rows[0]!.v).toBe(4);
    } finally {
      await db.close();
      await proxy.close();
    }
  });
});

// The whole-tick bound on every database server (test/support/dialects.ts), the proxy forwarding its wire unread.
describe.each(serverDatabases)('client-side deadline of an executor tick ($name server through a TCP proxy)', (server) => {
  it('an executor tick whose connection is blackholed returns by its deadlines, before the network answers again', async (t) => {
    const skip = server.unavailable();
    if (skip) return t.skip(skip);
    const target = await server.create();
    const setup = await server.openStores(target.url, 10_000);
    await setup.migrate().finally(() => setup.close());
    const direct = new URL(target.url);
    const port = Number(direct.port || ({ 'postgres:': 5432, 'postgresql:': 5432 } as Record<string, number>)[direct.protocol] || 3306);
    const proxy = new TcpProxy(direct.hostname, port, 'raw');
    await proxy.listen();
    const via = new URL(target.url);
    via.hostname = '127.0.0.1';
    via.port = String(proxy.port);
    const provider = await startRecordingProvider(() => ({ status: 200, delayMs: 300 }));
    const stores = await server.openStores(via.toString(), STATEMENT_MS);
    try {
      const lease = new LeaseManager(stores.lease, { name: LEASE_NAME, holderId: 'bh-1', durationMs: 6_000, renewIntervalMs: 500,
        acquireIntervalMs: 6_000, safetyMarginMs: 1_000, acquireJitterMs: 10 }, systemClock, silentLogger);
      const budget = 1_500, providerMs = 800;
      const executor = new Executor(lease, stores.execution, new HttpProvider(provider.url), {
        tickBudgetMs: budget, concurrency: 4, providerTimeoutMs: providerMs, reconcileIntervalMs: 60_000,
        refresh: { intervalMs: 100, pageSize: 100, commitGraceMs: 1_000 }, startBatch: 1, completionBatch: 2, minLeaderWorkMs: 100,
        settleWindowMs: 2 * STATEMENT_MS,
      }, systemClock, silentLogger);
      for (let i = 0; i < 5; i++) await submit(stores, { i });
      expect(await executor.tick(300)).toMatchObject({ role: 'leader' });
      const tick = executor.tick(budget);
      await new Promise((r) => setTimeout(r, 150));
      const hole = proxy.blackhole(12_000, 'resume'); // outlasts the bound: nothing answers, nothing resets
      // Bounded by its own deadlines — budget + provider timeout + closing window + the two client deadlines it may
      // start (5.9 s here) — not by the network coming back: the tick returns while the connection still answers
      // nothing (an order, not the runner's speed); how long it took is shown.
      const first = await Promise.race([tick.then(() => 'tick' as const), hole.then(() => 'network back' as const)]);
      const sum = await tick;
      console.log(`[clientDeadline ${server.name}] the blackholed tick returned after ${sum.durationMs} ms (its deadlines: ` +
        `${budget + providerMs + 2 * STATEMENT_MS + 2 * (STATEMENT_MS + CLIENT_DEADLINE_MARGIN_MS)} ms)`);
      expect(first, JSON.stringify(sum)).toBe('tick');
      expect(['sql_error', 'lease_lost']).toContain(sum.stopReason); // a refresh/write or the renew hit the deadline
      expect(lease.requireLeader()).toBeNull();
      await hole;
    } finally {
      await stores.close();
      await proxy.close();
      await provider.close();
      await target.drop();
    }
  });
});
