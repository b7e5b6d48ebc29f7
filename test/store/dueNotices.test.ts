// DUE_NOTICES on PGlite (in-process LISTEN/NOTIFY): an intent insert sends a notice after it commits, coalesced;
// with the setting off the stores send none and offer no listener.
import { afterEach, describe, expect, it } from 'vitest';
import { openPglite, type PgDatabase } from '../../src/store/postgres/db.js';
import { createPostgresStores } from '../../src/store/postgres/index.js';
import { dueNotices } from '../../src/store/postgres/notices.js';

const CONTRACT = { provider: { url: null }, payload: {}, retry: { maxAttempts: 1, baseDelayMs: 1, maxDelayMs: 1 } };
const insert = (s: ReturnType<typeof createPostgresStores>, i: number) => s.intents.insert({ intentId: crypto.randomUUID(),
  idempotencyKey: `k-${i}`, requestHash: '0'.repeat(64), contract: CONTRACT, maxAttempts: 1, notBefore: null });

describe('due-intent notices on PGlite', () => {
  let db: PgDatabase | null = null;
  afterEach(async () => db?.close());

  it.each([[true, 'at least one notice, coalesced'], [false, 'no notice and no listener']])('DUE_NOTICES %s: %s', async (on) => {
    db = await openPglite(null);
    const stores = createPostgresStores(db, 'pglite', { dueNotices: on });
    await stores.migrate();
    expect(stores.notices === null).toBe(!on);
    let notices = 0;
    const sub = await dueNotices(db)!.listen(() => notices++, () => {});
    for (let i = 0; i < 20; i++) await insert(stores, i);
    await new Promise((r) => setTimeout(r, 200));
    await sub.stop();
    if (on) {
      expect(notices).toBeGreaterThanOrEqual(1);
      expect(notices).toBeLessThanOrEqual(20);
    } else {
      expect(notices).toBe(0);
    }
  });
});
