// Cancel racing execution, orphan recovery after a leader died between start and completion, and the
// end-to-end run: 500 intents across 3 instances with a provider that fails 20% with 503.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { LEASE_NAME, runTicks, startInstances, submit } from '../support/instances.js';
import { staleWrites } from '../support/fenceChecker.js';

describe.each(dialects)('executor races: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  useDialectWithProvider(dialect, (fresh, started) => {
    ctx = fresh;
    provider = started;
  });

  it('cancel while the provider call is in flight: attempt closed, intent stays cancelled', async () => {
    provider.answer = () => ({ status: 200, delayMs: 400 });
    const [leader] = await startInstances(ctx, 1, { providerUrl: provider.url });
    const intent = await submit(leader!.stores);
    const tick = leader!.executor.tick(1_500);
    await provider.waitFor((c) => c.length === 1);
    const cancel = await leader!.stores.intents.cancel(intent.intentId);
    expect(cancel.kind).toBe('ok');
    const sum = await tick;
    expect(sum.skipped).toBe(1);
    const row = await leader!.stores.intents.get(intent.intentId);
    expect(row).toMatchObject({ status: 'cancelled', attemptCount: 1 });
    const attempts = await leader!.stores.intents.listAttempts(intent.intentId);
    expect(attempts.map((a) => [a.attemptNo, a.outcome])).toEqual([[1, 'succeeded']]);
    await leader!.executor.tick(300);
    expect(provider.calls).toHaveLength(1); // never attempted again
  });

  it('cancel before the start: never attempted', async () => {
    const [leader] = await startInstances(ctx, 1, { providerUrl: provider.url });
    await leader!.executor.tick(50);
    const intent = await submit(leader!.stores, {}, { notBefore: new Date(Date.now() + 500) });
    await leader!.executor.tick(200);
    expect((await leader!.stores.intents.cancel(intent.intentId)).kind).toBe('ok');
    await leader!.executor.tick(800);
    expect(provider.calls).toHaveLength(0);
    expect(await leader!.stores.intents.listAttempts(intent.intentId)).toEqual([]);
  });

  it('orphan recovery: an attempt left started by a dead leader is abandoned and the intent retried', async () => {
    const [a, b] = await startInstances(ctx, 2, { providerUrl: provider.url, leaseMs: 1_000 });
    const intent = await submit(a!.stores);
    // A leads, starts attempt 1 through the real fenced start, and is killed before the call completes:
    // nothing of A runs afterwards, and its lease expires on its own.
    const token = await a!.lease.tryAcquireOrRenew();
    if (!token) throw new Error('A should lead');
    const started = await a!.stores.execution.fencedStartAttempts(token, [{ intentId: intent.intentId, expectedAttemptCount: 0 }]);
    expect(started.kind === 'ok' && started.value.map((x) => x.attemptNo)).toEqual([1]);
    await runTicks([b!], async () => (await b!.stores.intents.get(intent.intentId))?.status === 'succeeded', 15_000, 300);
    const attempts = await b!.stores.intents.listAttempts(intent.intentId);
    expect(attempts.map((x) => [x.attemptNo, x.outcome])).toEqual([[1, 'abandoned'], [2, 'succeeded']]);
    expect(attempts[0]!.leaseEpoch).toBeLessThan(attempts[1]!.leaseEpoch);
    expect((await b!.stores.intents.get(intent.intentId))?.attemptCount).toBe(2);
    expect(staleWrites(await ctx.auditLog(), await b!.stores.lease.listEvents(LEASE_NAME))).toEqual([]);
  });

  it('orphan recovery closes an older-epoch attempt left started on an intent cancelled mid-call', async () => {
    const [a, b] = await startInstances(ctx, 2, { providerUrl: provider.url, leaseMs: 1_000 });
    const intent = await submit(a!.stores);
    const token = await a!.lease.tryAcquireOrRenew();
    if (!token) throw new Error('A should lead');
    await a!.stores.execution.fencedStartAttempts(token, [{ intentId: intent.intentId, expectedAttemptCount: 0 }]);
    expect((await a!.stores.intents.cancel(intent.intentId)).kind).toBe('ok'); // cancelled while "in flight"
    // A dies before completing; B takes over after expiry and recovers.
    await runTicks([b!], async () => (await b!.stores.intents.listAttempts(intent.intentId))[0]?.outcome !== 'started', 15_000, 300);
    const attempts = await b!.stores.intents.listAttempts(intent.intentId);
    expect(attempts.map((x) => [x.attemptNo, x.outcome])).toEqual([[1, 'abandoned']]);
    expect(await b!.stores.intents.get(intent.intentId)).toMatchObject({ status: 'cancelled', attemptCount: 1 });
    expect(provider.calls).toHaveLength(0);
  });

  it('end to end: 500 intents over 3 instances, provider fails 20% with 503', async () => {
    let k = 0;
    provider.answer = () => (k++ % 5 === 0 ? { status: 503, headers: { 'retry-after': '0' } } : { status: 200 });
    const inst = await startInstances(ctx, 3, { providerUrl: provider.url, concurrency: 32, leaseMs: 2_000 });
    for (let i = 0; i < 500; i++) await submit(inst[i % 3]!.stores, { i }, { maxAttempts: 1 + (i % 3) });
    const unsettled = async () => Object.entries(await ctx.statusCounts())
      .filter(([status]) => status !== 'succeeded' && status !== 'failed').reduce((n, [, k]) => n + k, 0);
    await runTicks(inst, async () => (await unsettled()) === 0, 120_000, 1_000);
    const intents = await ctx.intentRows();
    const attempts = await ctx.attemptRows(); // ordered by intent_id, attempt_no
    const byIntent = new Map<string, typeof attempts>();
    for (const a of attempts) byIntent.set(a.intentId, [...(byIntent.get(a.intentId) ?? []), a]);
    expect(intents).toHaveLength(500);
    for (const it of intents) {
      const list = byIntent.get(it.intentId) ?? [];
      expect(list.map((a) => a.attemptNo)).toEqual(list.map((_, i) => i + 1)); // contiguous from 1
      expect(list).toHaveLength(it.attemptCount);
      const last = list[list.length - 1]!;
      if (it.status === 'succeeded') expect(last.outcome).toBe('succeeded');
      else expect([it.attemptCount, last.outcome]).toEqual([it.maxAttempts, 'retryable_error']);
    }
    expect(intents.some((i) => i.status === 'failed')).toBe(true);
    // The provider saw no attempt stamped with a stale epoch: each call carries its attempt row's epoch,
    // and no fenced write committed after a newer acquire.
    const epochOf = new Map(attempts.map((a) => [`${a.intentId}/${a.attemptNo}`, a.leaseEpoch]));
    for (const c of provider.calls) expect(c.leaseEpoch).toBe(epochOf.get(`${c.intentId}/${c.attemptNo}`));
    expect(staleWrites(await ctx.auditLog(), await inst[0]!.stores.lease.listEvents(LEASE_NAME))).toEqual([]);
  });
});
