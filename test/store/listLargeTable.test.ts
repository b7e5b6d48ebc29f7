// The API list filtered by status and the dashboard's recent failures cost what their rows cost, not what the table
// holds (ports: src/store/intentPorts.ts, src/store/insightPorts.ts), on every dialect: with 200 000 settled intents
// whose ids lie before every open one (as uuidv7 ids do after months of traffic), a page of the list by status reads
// rows bounded by its page from the cursor on, and the recent failures read rows bounded by the failed intents, never
// the settled rows between. Judged by the database's own counters of rows examined (test/support/largeTable.ts), not
// by a clock (a walk of the primary key examines every row it passes).
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectStores } from '../support/dialectFixture.js';
import type { Stores } from '../../src/store/stores.js';
import type { IntentContract, IntentStatus } from '../../src/store/intentPorts.js';
import { uuidv7 } from '../../src/intents/ids.js';

const SETTLED = 200_000;
const PAGE = 10;
const OPEN = 10_000;
const contract: IntentContract = { provider: { url: null }, payload: {}, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 20 } };

describe.each(dialects)('list by status and recent failures on a large table: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  useDialectStores(dialect, (fresh, stores) => {
    ctx = fresh;
    s = stores;
  });

  async function intent(status: IntentStatus): Promise<string> {
    const intentId = uuidv7();
    await s.intents.insert({ intentId, idempotencyKey: null, requestHash: '0'.repeat(64), contract, maxAttempts: 3, notBefore: null });
    if (status !== 'scheduled') await ctx.setIntentStatus(intentId, status);
    return intentId;
  }

  it('a page of the list by status and the recent failures each examine rows bounded by their rows, with 200 000 settled rows before them', async () => {
    if (!ctx.examined || !ctx.seedSettled) return expect(dialect.name).toBe('mssql'); // not written for SQL Server (no server here)
    const examined = ctx.examined;
    await ctx.insertIntentsOneStatement(OPEN, contract); // random ids, after the settled ones (statistics: below)
    await ctx.seedSettled(SETTLED);
    const failed: string[] = [];
    for (let i = 0; i < 5; i++) failed.push(await intent('failed'));

    // The list by status, three pages from the start: open rows in id order, each after the cursor.
    let after: string | undefined;
    for (let page = 0; page < 3; page++) {
      const { value: rows, rows: n } = await examined((x) => x.intents.list({ status: 'scheduled', limit: PAGE, after }));
      expect(rows).toHaveLength(PAGE);
      expect(rows.every((r) => r.status === 'scheduled')).toBe(true);
      const ids = rows.map((r) => r.intentId);
      expect(ids).toEqual([...ids].sort());
      if (after) expect(ids[0]! > after).toBe(true);
      expect(n, `a list page examined ${n} rows`).toBeLessThanOrEqual(10 * PAGE);
      after = ids.at(-1);
    }

    // Recent failures: fewer failed intents than asked for (5 of 20), so no walk can stop early; read the failed rows only.
    const recent = await examined((x) => x.insights.recentFailures(20));
    expect(recent.value.map((r) => r.intentId).sort()).toEqual([...failed].sort());
    expect(recent.rows, `recent failures examined ${recent.rows} rows`).toBeLessThanOrEqual(10 * 20);

    // The counters count: a page of 50 000 settled rows examines at least those.
    const settledPage = await examined((x) => x.intents.list({ status: 'succeeded', limit: 50_000 }));
    expect(settledPage.rows).toBeGreaterThanOrEqual(50_000);
  });
});
