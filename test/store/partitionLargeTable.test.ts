// A change of the partition count costs what its rows cost, not what the table holds (port: src/store/
// partitionPorts.ts), on every dialect: with 200 000 settled intents whose ids lie before every open one (as uuidv7 ids
// do after months of traffic), a page of the scan (the open rows after a cursor, and those modified since the horizon),
// a page of the catch-up (rows modified since a time) and a batch of the preparing pass each examine a number of rows
// bounded by the page, never the settled rows between. Judged by the database's own counters of rows examined
// (test/support/largeTable.ts), not by a clock (a walk of the primary key examines every row it passes).
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectStores } from '../support/dialectFixture.js';
import { changeArrangement } from '../support/partitionChanges.js';
import type { Stores } from '../../src/store/stores.js';

const SETTLED = 200_000;
const PAGE = 10;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(dialects)('partition change on a large table: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  useDialectStores(dialect, (fresh, stores) => {
    ctx = fresh;
    s = stores;
  });
  const { put, request } = changeArrangement(() => s);

  it('scan, catch-up and preparing pages each examine rows bounded by their page, with 200 000 settled rows before the open ones', async () => {
    if (!ctx.examined || !ctx.seedSettled) return expect(dialect.name).toBe('mssql'); // not written for SQL Server (no server here)
    const examined = ctx.examined;
    await s.partitions.recordPartitionCount(2, 'host-a');
    await ctx.seedSettled(SETTLED);
    const open: string[] = [];
    for (let i = 0; i < 3 * PAGE; i++) open.push((await put()).intentId);
    await sleep(5);
    const since = (await s.partitions.readLayout()).dbNow;
    await sleep(5);
    for (const id of open.slice(0, 3)) expect((await s.intents.cancel(id)).kind).toBe('ok'); // modified since: the scan's too

    // The scan: three pages of the open rows (the cancelled ones by their modification), then an empty one.
    let after: string | null = null;
    const pages: number[] = [];
    for (;;) {
      const { value: rows, rows: n } = await examined((x) => x.partitions.listForReassign({ scope: 'open', after, limit: PAGE, modifiedSince: since }));
      pages.push(n);
      if (rows.length === 0) break;
      expect(rows.map((r) => r.intentId)).toEqual(open.slice(pages.length * PAGE - PAGE, pages.length * PAGE));
      after = rows.at(-1)!.intentId;
    }
    expect(pages).toHaveLength(4);
    for (const n of pages) expect(n, `a scan page examined ${n} rows`).toBeLessThanOrEqual(30 * PAGE);

    // The catch-up: the rows modified since `since`, a page of them.
    const catchUp = await examined((x) => x.partitions.listForReassign({ scope: 'all', after: null, limit: PAGE, modifiedSince: since }));
    expect(catchUp.value.map((r) => r.intentId)).toEqual(open.slice(0, 3));
    expect(catchUp.rows).toBeLessThanOrEqual(30 * PAGE);

    // The preparing pass: a key range of 1 000 ids examines about that many (and its attempts' probes), not the table.
    const change = await request(4);
    const batch = await examined((x) => x.partitions.prepareBatch(change.changeId, { limit: 1_000, horizon: since }));
    expect(batch.value).toMatchObject({ state: 'preparing', rowsMoved: expect.any(Number) });
    expect(batch.value!.rowsMoved).toBeGreaterThan(0);
    expect(batch.rows).toBeLessThanOrEqual(10 * 1_000);

    // The counters count: a walk of the primary key over 50 000 settled rows examines at least those.
    const walked = await examined((x) => x.partitions.listForReassign({ scope: 'all', after: null, limit: 50_000, modifiedSince: null }));
    expect(walked.rows).toBeGreaterThanOrEqual(50_000);
  });
});
