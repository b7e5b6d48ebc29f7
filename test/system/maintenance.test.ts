// Maintenance never stops execution (issue 21): a retention purge that fails on every call — injected through the
// store port, and as a real database error (a statement trigger refusing the delete) — or that is merely slow,
// while intents keep arriving: the leader keeps executing, keeps its lease (one epoch, no step-down), logs
// `retention_failed` with the SQL error, counts it, and backs off. Whole in-process apps, timer-like tick loops.
import { describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { createLogger } from '../../src/observability/logger.js';
import { overview } from '../../src/http/dashboard/data.js';
import type { Stores } from '../../src/store/stores.js';
import { dialects, type DialectContext, itWhere } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import { startRecordingProvider, type RecordingProvider } from '../support/recordingProvider.js';
import { metric, scrape, sleep, startApps, submitVia, TEST_LEASE, testConfig, tickLoops, waitUntil } from '../support/apps.js';

type Purge = Stores['ops']['fencedPurgeTerminal'];

describe.each(dialects)('maintenance never stops execution: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  let apps: App[] = [];
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    provider = await startRecordingProvider(() => ({ status: 200, delayMs: 20 }));
  }, async () => {
    for (const a of apps) await a.close();
    apps = [];
    await provider?.close();
  });

  /** Two instances; retention due at every tick (interval 0, horizon 1 ms) with a short back-off; the leader's purge
   *  replaced by `purge(original)` when given. Intents arrive for ~2.4 s; returns what the leader did. `tickMs` 400
   *  and `sliceMs` 200 give each purge 100 ms (a quarter of the tick). */
  async function run(purge?: (original: Purge) => Purge, { tickMs = 400, sliceMs = 200 } = {}) {
    const logs: Record<string, unknown>[] = [];
    const logger = createLogger('info', { write: (s: string) => void logs.push(JSON.parse(s) as Record<string, unknown>) });
    const base = testConfig(provider.url);
    apps = await startApps(ctx, 2, { ...base, retention: { ...base.retention, olderThanMs: 1, batchSize: 50, intervalMs: 0 },
      maintenance: { sliceMs, backoffBaseMs: 200, backoffMaxMs: 800 } }, logger);
    for (const a of apps) {
      if (purge) a.stores.ops.fencedPurgeTerminal = purge(a.stores.ops.fencedPurgeTerminal.bind(a.stores.ops));
    }
    const loops = tickLoops(apps, tickMs, 50);
    const ids: string[] = [];
    try {
      for (let i = 0; i < 24; i++) {
        ids.push(await submitVia(apps[i % 2]!, { i }));
        await sleep(100);
      }
      await waitUntil('every intent executed', () => ids.every((id) => provider.calls.some((c) => c.intentId === id)), 15_000);
    } finally {
      await loops.stop();
    }
    const leaderTicks = loops.summaries.filter((s) => s.sum.role === 'leader');
    const leader = leaderTicks[0]!.app;
    return {
      logs, leaderTicks, leader,
      epochs: new Set(leaderTicks.map((s) => `${s.sum.holderId}#${s.sum.leaseEpoch}`)),
      stepDowns: logs.filter((l) => l.event === 'leader_lost'),
      failed: logs.filter((l) => l.event === 'retention_failed'),
      failuresMetric: metric(await scrape(leader), 'maintenance_failures_total', { task: 'retention' }),
    };
  }

  function expectKeptLeading(r: Awaited<ReturnType<typeof run>>) {
    expect(r.stepDowns).toEqual([]);
    expect(r.epochs.size).toBe(1); // the same leader, the same epoch, for the whole run
    expect(r.leaderTicks.every((t) => t.sum.stopReason !== 'sql_error' && !t.sum.leaseLost)).toBe(true);
  }

  function expectLoggedCountedBackedOff(r: Awaited<ReturnType<typeof run>>, message: RegExp) {
    expect(r.failed.length).toBeGreaterThanOrEqual(2);
    expect(r.failed[0]).toMatchObject({ level: 'error', failures: 1, retry_in_ms: 200 });
    expect((r.failed[0]!.sql_error as { message: string }).message).toMatch(message);
    expect(r.failed.map((f) => f.retry_in_ms).slice(0, 3)).toEqual([200, 400, 800].slice(0, Math.min(3, r.failed.length)));
    expect(r.failuresMetric).toBe(r.failed.length);
    // Backed off: fewer purges tried than leader ticks ran (without the back-off: one per tick).
    expect(r.failed.length).toBeLessThan(r.leaderTicks.length);
  }

  it('a purge failing on every call (store port): execution goes on under one lease; logged, counted, backed off', async () => {
    const r = await run(() => async () => {
      throw new Error('injected purge failure');
    });
    expectKeptLeading(r);
    expectLoggedCountedBackedOff(r, /injected purge failure/);
    // Every instance's dashboard shows it failing, with the error (recorded in SQL by the leader).
    for (const app of apps) {
      const [shown] = (await overview(app)).maintenance;
      expect(shown).toMatchObject({ task: 'retention', failures: r.failed.length, lastError: 'injected purge failure', holderId: r.leader.lease.holderId });
    }
  });

  it('a failure recorded by an earlier leader (now gone) is cleared by the next leader\'s first successful purge; none is invented', async () => {
    // A leader that failed and then died (or lost its lease) never records its recovery: the next leader must, or every
    // dashboard shows the task FAILING for good. No recorded failure: the successful runs record nothing. Each purge
    // gets 500 ms here (a quarter of a 2 s tick), so a loaded runner does not make a real timeout of it.
    const roomy = { tickMs: 2_000, sliceMs: 1_000 };
    const clean = await run(undefined, roomy);
    expect(clean.failed).toEqual([]);
    expect((await overview(apps[0]!)).maintenance).toEqual([]);
    for (const a of apps) await a.close();
    apps = [];
    await (await ctx.openStores()).ops.recordMaintenance(TEST_LEASE, 'retention', 'gone-leader', 3, 'an earlier leader\'s error');
    const r = await run(undefined, roomy);
    expectKeptLeading(r);
    expect(r.failed).toEqual([]);
    await waitUntil('the next leader clears the recorded failure', async () => (await overview(apps[1]!)).maintenance[0]?.failures === 0, 5_000);
    for (const app of apps) {
      expect((await overview(app)).maintenance).toEqual([expect.objectContaining({ task: 'retention', failures: 0, lastError: null,
        holderId: r.leader.lease.holderId })]);
    }
  });

  it('a merely slow purge (store port, 1.2 s per call, 3 ticks long): execution goes on under one lease; no tick is delayed', async () => {
    const purges: { begin: number; end: number }[] = [];
    const r = await run((original) => async (...args) => {
      const p = { begin: Date.now(), end: Number.POSITIVE_INFINITY };
      purges.push(p);
      await sleep(1_200);
      try {
        return await original(...args);
      } finally {
        p.end = Date.now();
      }
    });
    expectKeptLeading(r);
    expect(r.failed).toEqual([]);
    expect(r.leaderTicks.reduce((n, t) => n + t.sum.purgedIntents, 0)).toBeGreaterThan(0); // it still purges
    // A statement running at the slice end is not awaited: the tick that began each purge ended while it still ran
    // (the order of events, whatever the machine's speed).
    for (const p of purges) expect(r.leaderTicks.some((t) => t.at > p.begin && t.at < p.end), `purge at ${p.begin}`).toBe(true);
    expect(purges.length).toBeGreaterThan(0);
  });

  itWhere(dialect.name === 'postgres')('a purge the database makes slower than its slice (0.4 s in a trigger, holding its fence): cut off by the server at the slice\'s end; execution goes on under one lease', async () => {
    // A real slow statement on the server (PGlite is one connection: a sleep there stalls everything by design).
    // Picked by name: it checks PostgreSQL's own cancel code (57014); the slow delete is the harness's sqlFaults.
    for (const statement of dialect.sqlFaults!.slowDelete!(0.4)) await ctx.sql(statement);
    const r = await run();
    expectKeptLeading(r);
    // The slice is 100 ms (a quarter of the 400 ms tick): every purge is cancelled by its own statement timeout.
    expect(r.failed.length).toBeGreaterThan(0);
    expect(r.failed.map((f) => (f.sql_error as { code?: string }).code)).toEqual(r.failed.map(() => '57014'));
  });

  const refuse = dialect.sqlFaults?.refuseDelete;
  itWhere(refuse !== undefined)('a purge the database refuses on every call (a real SQL error): execution goes on under one lease; logged, counted, backed off', async () => {
    // Only the purge deletes intents: a trigger refusing every DELETE is a real error from the database on exactly
    // that statement (as a revoked privilege would raise), with the batch untouched (sqlFaults in the harness).
    for (const statement of refuse!.statements) await ctx.sql(statement);
    const r = await run();
    expectKeptLeading(r);
    expectLoggedCountedBackedOff(r, /permission denied: retention disabled by the test/);
    if (refuse!.code) expect((r.failed[0]!.sql_error as { code?: string }).code).toBe(refuse!.code);
  });
});
