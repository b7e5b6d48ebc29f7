// Issue 20 item 4: the periodic reconcile runs a page at a time into the live schedule, between batches and under
// load, so execution never waits for more than one page; it keeps its guarantee against late commits (an intent
// refresh never saw is found, one the database no longer schedules is dropped).
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { submit } from '../support/instances.js';
import { buildExecutor, intentRow } from '../support/executorHarness.js';
import { until, withReplyFaults } from '../support/replyFaults.js';
import { dbTextToDate, describePickup, MAX_READS_BEFORE_START, readsBetween, recordRefreshReads } from '../support/pickup.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const PAGE_MS = 700;

describe.each(dialects)('paged reconcile: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  useDialectWithProvider(dialect, (fresh, started) => {
    ctx = fresh;
    provider = started;
  });

  /** An executor whose rebuild/reconcile pages take PAGE_MS once `slow` is set; `pages` counts them. */
  const slowPages = async (reconcileMs: number) => {
    const state = { slow: false, pages: 0 };
    const b = await buildExecutor(ctx, { providerUrl: provider.url, reconcileMs, leaseMs: 10_000, wrapStore: (s) => ({
      ...withReplyFaults(s, {}),
      async loadScheduled(a, l) {
        state.pages++;
        if (state.slow) await sleep(PAGE_MS);
        return s.loadScheduled(a, l);
      },
    }) });
    return { b, state };
  };
  const future = new Date(Date.now() + 3_600_000);
  const submitMany = async (b: Awaited<ReturnType<typeof slowPages>>['b'], n: number) => {
    for (let i = 0; i < n; i += 100) {
      await Promise.all(Array.from({ length: Math.min(100, n - i) }, (_, k) => submit(b.stores, { k: i + k }, { notBefore: future })));
    }
  };

  it('an intent due while the reconcile reads 3 pages is started after at most one page, not after the whole reload', async () => {
    const { b, state } = await slowPages(1_500);
    await submitMany(b, 2_100); // 3 pages of 1 000 for a rebuild (before: the reconcile was one), 21 of 100 now
    expect(await b.executor.tick(300)).toMatchObject({ role: 'leader', rebuilt: true });
    state.slow = true;
    const pagesBefore = state.pages;
    const tick = b.executor.tick(5_000); // the reconcile falls due 1.5 s after the rebuild
    await until(() => state.pages > pagesBefore, 5_000, 'reconcile began');
    const reads = recordRefreshReads(b.executor.refresher);
    const id = (await submit(b.stores, { due: true })).intentId;
    const committedBy = dbTextToDate(await ctx.dbNowText());
    await provider.waitFor((c) => c.some((x) => x.intentId === id), 20_000);
    // Started by the first refresh read after its commit: the refresh waited for one page at most. Before, the batch
    // waited for the whole reconcile (3 × 700 ms) before it refreshed or started anything.
    const startedAt = (await ctx.attemptRows()).find((a) => a.intentId === id)!.startedAt;
    const between = readsBetween(reads, committedBy, startedAt);
    expect(between.length, describePickup(id, committedBy, startedAt, between)).toBeLessThanOrEqual(MAX_READS_BEFORE_START);
    await tick;
    await b.executor.drain();
  });

  it('under load (calls always in flight) the reconcile still runs', async () => {
    const { b, state } = await slowPages(300);
    provider.answer = () => ({ status: 200, delayMs: 1_500 }); // a call is always out
    for (let i = 0; i < 3; i++) await submit(b.stores, { busy: i });
    await b.executor.tick(200); // rebuild; the calls start
    const pagesBefore = state.pages;
    await b.executor.tick(1_200);
    expect(b.executor.inFlight.size + provider.calls.length).toBeGreaterThan(0);
    // Before: it needed no call in flight and no pending completion, so it never ran while calls were out.
    expect(state.pages - pagesBefore).toBeGreaterThan(0);
    await b.executor.drain();
  });

  it('keeps its guarantee against late commits: finds an intent refresh never saw, drops one the database no longer schedules', async () => {
    const { b } = await slowPages(400);
    const hidden = (await submit(b.stores, { hidden: true }, { notBefore: future })).intentId;
    await ctx.setIntentStatus(hidden, 'cancelled'); // arranged so that refresh reads it as cancelled…
    const gone = (await submit(b.stores, { gone: true }, { notBefore: new Date(Date.now() + 1_500) })).intentId;
    expect(await b.executor.tick(300)).toMatchObject({ role: 'leader', rebuilt: true });
    await ctx.setIntentStatus(hidden, 'scheduled'); // …then scheduled behind its back (last_modified_at unchanged)
    await ctx.setIntentStatus(gone, 'cancelled'); // and this one cancelled behind its back
    await sleep(500); // past the commit grace: refresh will not read either again
    // Make `hidden` due: a reschedule would be seen by refresh, so the schedule's copy is what we check instead.
    await b.executor.tick(1_500); // the reconcile runs (400 ms interval) and completes
    const s = b.executor.refresher.schedule;
    expect(s.has(hidden)).toBe(true); // found
    expect(s.has(gone)).toBe(false); // dropped: no START loop for it once due
    await sleep(1_000);
    const starts = provider.calls.length;
    await b.executor.tick(500);
    expect(provider.calls.length).toBe(starts);
    expect((await intentRow(ctx, gone)).status).toBe('cancelled');
    await b.executor.drain();
  });
});
