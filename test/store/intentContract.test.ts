// The IntentStore contract, run unchanged against every dialect (PGlite, PostgreSQL server, SQL Server when configured).
// Arrangement (status, attempt rows) and full-precision reads of last_modified_at go through the dialect
// context's neutral helpers (test/support/dialects.ts, test/support/mssqlHarness.ts).
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import type { Stores } from '../../src/store/stores.js';
import type { IntentContract, IntentStatus, NewIntent } from '../../src/store/intentPorts.js';
import { uuidv7 } from '../../src/intents/ids.js';

const contract = (payload: Record<string, unknown> = { a: 1 }): IntentContract => ({
  provider: { url: 'http://provider.test/submit' },
  payload,
  retry: { maxAttempts: 3, baseDelayMs: 1_000, maxDelayMs: 10_000 },
});
const newIntent = (over: Partial<NewIntent> = {}): NewIntent => ({
  intentId: uuidv7(), idempotencyKey: null, requestHash: 'a'.repeat(64), contract: contract(), maxAttempts: 3, notBefore: null, ...over,
});

/** Full-precision database time text (UTC; 6 fraction digits on PostgreSQL, 7 on SQL Server) → 100-ns ticks
 *  since the epoch, exactly. Only for arithmetic (a clock window with slack); versions compare as text. */
const ticks = (t: string): bigint => {
  const m = /^(\d{4}-\d{2}-\d{2}) (\d{2}:\d{2}:\d{2})\.(\d{6,7})$/.exec(t);
  if (!m) throw new Error(`not a full-precision database time: "${t}"`);
  return BigInt(Date.parse(`${m[1]}T${m[2]}Z`)) * 10_000n + BigInt(m[3]!.padEnd(7, '0'));
};
const TICKS_PER_MS = 10_000n;
/** `later` is strictly after `earlier`: both are fixed-width database time texts, so text order is time order. */
const expectAfter = (later: string, earlier: string) => expect(later > earlier, `${later} > ${earlier}`).toBe(true);

describe.each(dialects)('intent store contract: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    s = await ctx.openStores();
  });

  const setStatus = (id: string, status: IntentStatus) => ctx.setIntentStatus(id, status);
  const countRows = () => ctx.countIntents();
  /** A full-precision database time text, checked to be the dialect's fixed width (so texts order as times). */
  const fixed = (t: string) => {
    expect(t).toHaveLength(ctx.timeTextWidth);
    ticks(t); // well formed
    return t;
  };
  /** Database clock and the row's last_modified_at, both as full-precision database text. */
  const modified = async (id: string) => fixed(await ctx.modifiedAtText(id));
  const dbNow = async () => fixed(await ctx.dbNowText());

  it('inserts and reads back an intent: scheduled, due now (database time), contract intact', async () => {
    const n = newIntent({ idempotencyKey: 'k-1', contract: contract({ nested: { b: [1, 'x', null] }, s: 'ü' }) });
    const before = await dbNow();
    const r = await s.intents.insert(n);
    const after = await dbNow();
    expect(r.kind).toBe('created');
    expect(r.intent).toMatchObject({
      intentId: n.intentId, idempotencyKey: 'k-1', requestHash: n.requestHash, status: 'scheduled',
      attemptCount: 0, maxAttempts: 3, lastError: null, lastEpoch: null,
    });
    expect(r.intent.contract).toEqual(n.contract);
    expect(r.intent.nextAttemptAt.getTime()).toBe(r.intent.createdAt.getTime());
    expect(r.intent.lastModifiedAt.getTime()).toBe(r.intent.createdAt.getTime());
    const m = await modified(n.intentId);
    expect(m >= before && m <= after, `${before} <= ${m} <= ${after}`).toBe(true);
    expect(await s.intents.get(n.intentId)).toEqual(r.intent);
    expect(await s.intents.get(uuidv7())).toBeNull();
  });

  it('honours notBefore as next_attempt_at', async () => {
    const notBefore = new Date('2031-05-06T07:08:09.123Z');
    const r = await s.intents.insert(newIntent({ notBefore }));
    expect(r.intent.nextAttemptAt.toISOString()).toBe(notBefore.toISOString());
    expect(r.intent.createdAt.getTime()).toBeLessThan(notBefore.getTime());
  });

  it('insert with a taken idempotency key returns the existing intent and writes nothing', async () => {
    const first = await s.intents.insert(newIntent({ idempotencyKey: 'same' }));
    const second = await s.intents.insert(newIntent({ idempotencyKey: 'same', requestHash: 'b'.repeat(64), contract: contract({ other: true }) }));
    expect(second.kind).toBe('existing');
    expect(second.intent).toEqual(first.intent);
    expect(await countRows()).toBe(1);
    // Absent keys never collide.
    await s.intents.insert(newIntent());
    await s.intents.insert(newIntent());
    expect(await countRows()).toBe(3);
  });

  it('race: concurrent inserts with one key on separate stores → exactly one created, one row', async () => {
    const contenders = await Promise.all(Array.from({ length: 12 }, () => ctx.openStores({ poolMax: 1 })));
    const outs = await Promise.all(contenders.map((c) => c.intents.insert(newIntent({ idempotencyKey: 'race-key' }))));
    const created = outs.filter((o) => o.kind === 'created');
    expect(created).toHaveLength(1);
    expect(outs.filter((o) => o.kind === 'existing')).toHaveLength(11);
    for (const o of outs) expect(o.intent.intentId).toBe(created[0]!.intent.intentId);
    expect(await countRows()).toBe(1);
  });

  it('lists by intent_id (creation order), filtered by status, paged by an exclusive after cursor', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 7; i++) ids.push((await s.intents.insert(newIntent())).intent.intentId);
    await setStatus(ids[1]!, 'succeeded');
    await setStatus(ids[4]!, 'succeeded');
    await setStatus(ids[5]!, 'in_flight');

    expect((await s.intents.list({ limit: 100 })).map((r) => r.intentId)).toEqual(ids);
    expect((await s.intents.list({ limit: 3 })).map((r) => r.intentId)).toEqual(ids.slice(0, 3));
    expect((await s.intents.list({ limit: 3, after: ids[2]! })).map((r) => r.intentId)).toEqual(ids.slice(3, 6));
    expect((await s.intents.list({ limit: 3, after: ids[6]! }))).toEqual([]);
    expect((await s.intents.list({ limit: 100, status: 'succeeded' })).map((r) => r.intentId)).toEqual([ids[1], ids[4]]);
    expect((await s.intents.list({ limit: 100, status: 'succeeded', after: ids[1]! })).map((r) => r.intentId)).toEqual([ids[4]]);
    expect((await s.intents.list({ limit: 100, status: 'scheduled' })).map((r) => r.intentId)).toEqual([ids[0], ids[2], ids[3], ids[6]]);
    expect(await s.intents.list({ limit: 100, status: 'cancelled' })).toEqual([]);
  });

  it('cancels scheduled and in_flight intents', async () => {
    const a = (await s.intents.insert(newIntent())).intent;
    const b = (await s.intents.insert(newIntent())).intent;
    await setStatus(b.intentId, 'in_flight');
    const ca = await s.intents.cancel(a.intentId);
    expect(ca.kind === 'ok' && ca.intent.status).toBe('cancelled');
    const cb = await s.intents.cancel(b.intentId);
    expect(cb.kind === 'ok' && cb.intent.status).toBe('cancelled');
    expect((await s.intents.get(a.intentId))?.status).toBe('cancelled');
  });

  it.each(['succeeded', 'failed', 'cancelled'] as const)('cancel of a %s intent is a conflict and changes nothing', async (status) => {
    const a = (await s.intents.insert(newIntent())).intent;
    await setStatus(a.intentId, status);
    const m0 = await modified(a.intentId);
    const r = await s.intents.cancel(a.intentId);
    expect(r.kind).toBe('conflict');
    expect(r.kind === 'conflict' && r.intent.status).toBe(status);
    expect(await modified(a.intentId)).toBe(m0);
  });

  it('cancel and reschedule of an unknown id → notFound', async () => {
    expect(await s.intents.cancel(uuidv7())).toEqual({ kind: 'notFound' });
    expect(await s.intents.reschedule(uuidv7(), new Date())).toEqual({ kind: 'notFound' });
    expect(await countRows()).toBe(0);
  });

  it('reschedules a scheduled intent; in_flight and terminal intents are conflicts', async () => {
    const a = (await s.intents.insert(newIntent())).intent;
    const at = new Date('2030-01-02T03:04:05.678Z');
    const r = await s.intents.reschedule(a.intentId, at);
    expect(r.kind).toBe('ok');
    expect(r.kind === 'ok' && r.intent.nextAttemptAt.toISOString()).toBe(at.toISOString());
    expect(r.kind === 'ok' && r.intent.status).toBe('scheduled');
    for (const status of ['in_flight', 'succeeded', 'failed', 'cancelled'] as const) {
      await setStatus(a.intentId, status);
      const m0 = await modified(a.intentId);
      const c = await s.intents.reschedule(a.intentId, new Date('2035-01-01T00:00:00Z'));
      expect(c.kind).toBe('conflict');
      expect(c.kind === 'conflict' && c.intent.status).toBe(status);
      expect(c.kind === 'conflict' && c.intent.nextAttemptAt.toISOString()).toBe(at.toISOString());
      expect(await modified(a.intentId)).toBe(m0);
    }
  });

  it('last_modified_at is database time and strictly increases on every update, even back to back', async () => {
    const a = (await s.intents.insert(newIntent())).intent;
    let prev = await modified(a.intentId);
    const updates: (() => Promise<unknown>)[] = [
      ...Array.from({ length: 8 }, (_, i) => () => s.intents.reschedule(a.intentId, new Date(Date.UTC(2030, 0, 1 + i)))),
      () => s.intents.cancel(a.intentId),
    ];
    for (const update of updates) {
      const before = await dbNow();
      await update();
      const after = await dbNow();
      const m = await modified(a.intentId);
      expectAfter(m, prev);
      // Database clock window; a row may run ≤ 1 µs per update ahead of a coarse (PGlite: 1 ms) clock.
      expect(m >= before, `${m} >= ${before}`).toBe(true);
      expect(ticks(m)).toBeLessThanOrEqual(ticks(after) + TICKS_PER_MS);
      prev = m;
    }
    expect((await s.intents.get(a.intentId))?.status).toBe('cancelled');
  });

  it('last_modified_at strictly increases across updates issued back to back (no reads in between)', async () => {
    // The database records every version the row takes (PostgreSQL: a trigger; SQL Server: system
    // versioning), so nothing slows the updates down.
    const a = (await s.intents.insert(newIntent())).intent;
    await ctx.startVersionLog(a.intentId);
    const first = await modified(a.intentId);
    for (let i = 0; i < 20; i++) await s.intents.reschedule(a.intentId, new Date(Date.UTC(2030, 0, 1, 0, 0, i)));
    await s.intents.cancel(a.intentId);
    const log = (await ctx.versionLog()).map(fixed);
    expect(log).toHaveLength(21);
    let prev = first;
    for (const m of log) {
      expectAfter(m, prev);
      prev = m;
    }
    expect(prev).toBe(await modified(a.intentId)); // the last logged version is the row's current one
  });

  it('lists attempts of an intent (none before execution)', async () => {
    const a = (await s.intents.insert(newIntent())).intent;
    expect(await s.intents.listAttempts(a.intentId)).toEqual([]);
    await ctx.insertAttempts([
      { intentId: a.intentId, attemptNo: 2, leaseEpoch: 7, holderId: 'h', outcome: 'started' },
      { intentId: a.intentId, attemptNo: 1, leaseEpoch: 7, holderId: 'h', outcome: 'retryable_error' },
    ]);
    const attempts = await s.intents.listAttempts(a.intentId);
    expect(attempts.map((x) => [x.attemptNo, x.leaseEpoch, x.outcome])).toEqual([[1, 7, 'retryable_error'], [2, 7, 'started']]);
  });
});
