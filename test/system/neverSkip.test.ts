// Refresh never skips an intent: (a) a writer whose transaction commits late with an older
// last_modified_at; (b) 1,000 intents sharing one timestamp with a refresh page of 100.
import { describe, expect, it } from 'vitest';
import { dialects, manySessionDialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { runTicks, startInstances, submit, type TestInstance } from '../support/instances.js';
import type { IntentContract } from '../../src/store/intentPorts.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const CONTRACT: IntentContract = { provider: { url: null }, payload: {}, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 50 } };

describe.each(dialects)('never skip: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  useDialectWithProvider(dialect, (fresh, started) => {
    ctx = fresh;
    provider = started;
  });

  it('1,000 intents inserted by one statement (one timestamp), refresh page 100: each executed exactly once', async () => {
    const [leader] = await startInstances(ctx, 1, { providerUrl: provider.url, pageSize: 100, concurrency: 32, leaseMs: 5_000 });
    expect((await leader!.executor.tick(50)).role).toBe('leader'); // schedule built while the table is empty
    await ctx.insertIntentsOneStatement(1000, CONTRACT);
    const inserted = await ctx.intentRows();
    expect(inserted).toHaveLength(1000);
    expect(new Set(inserted.map((r) => r.lastModifiedText)).size).toBe(1); // one timestamp, at full precision
    await runTicks([leader!], async () => provider.calls.length >= 1000 &&
      (await ctx.countIntents('succeeded')) === 1000, 60_000, 1_000);
    expect(new Set(provider.calls.map((c) => c.intentId)).size).toBe(1000);
    // Each intent succeeded once and every attempt was sent once. A call a loaded machine answered after the provider
    // timeout is a retryable attempt (its retry is the intent's next attempt): anything else would be a defect.
    const attempts = await ctx.attemptRows();
    const notOk = attempts.filter((a) => a.outcome !== 'succeeded').map((a) => ({ outcome: a.outcome, error: a.error }));
    expect(notOk.filter((a) => a.outcome !== 'retryable_error' || !/^timeout/.test(a.error ?? '')).slice(0, 5)).toEqual([]);
    expect(attempts.filter((a) => a.outcome === 'succeeded')).toHaveLength(1000);
    expect(provider.calls).toHaveLength(attempts.length);
    // Refresh terminates: a tick with nothing new reads only the unsettled window, and ends.
    const idle = await leader!.executor.tick(300);
    expect(idle.stopReason).toBe('deadline');
  });
});

// PGlite is one session: it cannot hold a writer's transaction open while other intents commit.
describe.each(manySessionDialects)('never skip, late commit: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  useDialectWithProvider(dialect, (fresh, started) => {
    ctx = fresh;
    provider = started;
  });

  async function scenario(instances: TestInstance[], graceOk: boolean) {
    const [leader] = instances;
    const late = await submit(leader!.stores, { late: true }, { notBefore: new Date(Date.now() + 3600_000) });
    expect((await leader!.executor.tick(50)).role).toBe('leader');
    const tick = leader!.executor.tick(graceOk ? 6_000 : 4_000);
    // Reschedule `late` to now in a transaction that stays open 2 s before committing.
    const writer = ctx.holdLateReschedule(late.intentId, 2_000);
    // Other intents change and commit meanwhile, so the cursor has newer rows to advance over.
    for (let k = 0; k < 10; k++) {
      await submit(leader!.stores, { k });
      await sleep(150);
    }
    await writer;
    await tick;
    return provider.calls.some((c) => c.intentId === late.intentId);
  }

  it('a transaction held open 2 s (older timestamp, later commit) is still executed (grace 3 s)', async () => {
    const inst = await startInstances(ctx, 1, { providerUrl: provider.url, graceMs: 3_000, refreshMs: 100, leaseMs: 10_000 });
    expect(await scenario(inst, true)).toBe(true);
  });

  it('control: with no commit grace the same late commit is missed (the trap the grace closes)', async (t) => {
    // With locking reads (SQL Server, READ_COMMITTED_SNAPSHOT OFF) the refresh waits for the writer: no trap to show.
    if (!ctx.snapshotReads) return t.skip('readers block on the open writer here (MSSQL_TEST_RCSI=off): the late commit cannot be missed');
    const inst = await startInstances(ctx, 1, { providerUrl: provider.url, graceMs: 0, refreshMs: 100, leaseMs: 10_000 });
    expect(await scenario(inst, false)).toBe(false);
  });
});
