// The executor's batched writes cost what their batch costs, not what the table holds (ports: src/store/intentPorts.ts
// ExecutionStore), on every dialect, and without statistics: right after a burst of intents (before autovacuum's first
// ANALYZE) the planner knows nothing of the rows, and a start or a complete must still find each intent and attempt by
// primary key. With 50 000 older failed intents (they sort before the open rows in every index that leads with status
// or with partition and modification time), a batch's start and complete each examine rows and read pages bounded by
// the batch, and (PostgreSQL) their plans process rows bounded by the batch: no request matched against every other.
// Judged by the database's own counters and EXPLAIN ANALYZE's row counts (test/support/largeTable.ts), not by a clock.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectStores } from '../support/dialectFixture.js';
import { LEASE_NAME } from '../support/instances.js';
import type { Stores } from '../../src/store/stores.js';
import type { IntentContract } from '../../src/store/intentPorts.js';

const SETTLED = 50_000;
const BATCH = 500;
// Per row of the batch: its probes and the index entries its writes add (PostgreSQL: ≈ 30 pages a start, 37 a
// completion; MySQL: 7 and 19 handler reads over its several statements). A full read, per completion, of an index
// holding intent_id second (PostgreSQL 15 without statistics, before the fix) read 285 pages a completion here.
const ROWS_PER = 40;
const PAGES_PER = 80;
// PostgreSQL: rows the plans processed, filtered and joined-away rows included (13 a start, 33 a completion). A start
// whose nested loop rescanned the unnested requests per intent processed the batch per row (1 012 here).
const PLAN_ROWS_PER = 50;
const contract: IntentContract = { provider: { url: null }, payload: {}, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 20 } };

describe.each(dialects)('start and complete on a large table without statistics: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  useDialectStores(dialect, (fresh, stores) => {
    ctx = fresh;
    s = stores;
  });

  it(`a batch of ${BATCH} starts and completes examining rows, reading pages and processing plan rows bounded by the batch, with ${SETTLED} older settled rows`, async () => {
    if (!ctx.examined || !ctx.seedSettled) return expect(dialect.name).toBe('mssql'); // not written for SQL Server (no server here)
    const examined = ctx.examined;
    await ctx.seedSettled(SETTLED, { status: 'failed', analyze: false });
    await ctx.insertIntentsOneStatement(BATCH, contract);
    const a = await s.lease.tryAcquire(LEASE_NAME, 'A', 600_000);
    if (!a.acquired) throw new Error('not acquired');
    const token = { leaseName: LEASE_NAME, holderId: 'A', leaseEpoch: a.lease.leaseEpoch };
    const due = await s.execution.loadScheduled(null, BATCH);
    expect(due).toHaveLength(BATCH);

    const start = await examined((x) => x.execution.fencedStartAttempts(token, due.map((d) => ({ intentId: d.intentId, expectedAttemptCount: 0 }))),
      { plans: true });
    if (start.value.kind !== 'ok') throw new Error('start: lease lost');
    const started = start.value.value;
    expect(started).toHaveLength(BATCH);
    expect(start.rows, `start examined ${start.rows} rows`).toBeLessThanOrEqual(ROWS_PER * BATCH);
    if (start.blocks !== null) expect(start.blocks, `start read ${start.blocks} pages`).toBeLessThanOrEqual(PAGES_PER * BATCH);
    if (start.planRows !== null) expect(start.planRows, `start's plan processed ${start.planRows} rows`).toBeLessThanOrEqual(PLAN_ROWS_PER * BATCH);

    const complete = await examined((x) => x.execution.fencedCompleteAttempts(token, started.map((t) => ({
      intentId: t.intentId, attemptNo: t.attemptNo, outcome: 'succeeded' as const, httpStatus: 200, error: null, durationMs: 1,
      next: { status: 'succeeded' as const } }))), { plans: true });
    if (complete.value.kind !== 'ok') throw new Error('complete: lease lost');
    expect(complete.value.value.filter((c) => c.applied && c.row?.status === 'succeeded')).toHaveLength(BATCH);
    expect(complete.rows, `complete examined ${complete.rows} rows`).toBeLessThanOrEqual(ROWS_PER * BATCH);
    if (complete.blocks !== null) expect(complete.blocks, `complete read ${complete.blocks} pages`).toBeLessThanOrEqual(PAGES_PER * BATCH);
    if (complete.planRows !== null) {
      expect(complete.planRows, `complete's plan processed ${complete.planRows} rows`).toBeLessThanOrEqual(PLAN_ROWS_PER * BATCH);
    }
    expect(await ctx.statusCounts()).toEqual({ failed: SETTLED, succeeded: BATCH });
  });
});
