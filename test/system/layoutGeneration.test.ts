// A request's fencing token stays comparable across a change of the partition count (docs/provider-fencing.md): the
// interleaving the per-partition epoch rule let through, replayed on every dialect with the real stores, executors,
// the partition changer, HttpProvider and the demo provider with its fence on. A leads partition 1 (epoch 1, layout
// generation 0) and stalls after its fenced start of X, past its HTTP client's send-by check; the count goes 2 → 1
// (the switch recovers X's attempt, the scan moves X to partition 0); B leads partition 0 and sends X (generation 1);
// A wakes and sends X with partition 1, epoch 1 — still the highest epoch the provider has seen for partition 1. The
// generation makes it stale: refused (409), and X ends succeeded, accepted by the provider exactly once.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import { buildExecutor, type Built } from '../support/executorHarness.js';
import { changeArrangement, leaseOf } from '../support/partitionChanges.js';
import { startDemoProvider, type DemoCall, type DemoProvider } from '../../src/local/demoProvider.js';
import { PartitionChanger } from '../../src/lease/partitionChanger.js';
import { assignPartition } from '../../src/intents/partition.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { systemClock } from '../../src/lease/clock.js';
import { silentLogger } from '../../src/observability/logger.js';
import type { ProviderRequest, ProviderResult } from '../../src/provider/provider.js';
import type { Stores } from '../../src/store/stores.js';

describe.each(dialects)('a late request across a change of the partition count: $name', (dialect) => {
  let ctx: DialectContext;
  let demo: DemoProvider;
  let calls: DemoCall[];
  const built: Built[] = [];
  let stores: Stores | null = null;
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    calls = [];
    demo = await startDemoProvider({ latencyMs: 0, failureRate: 0, fence: true, onCall: (c) => calls.push(c) });
  }, async () => {
    for (const b of built.splice(0)) await b.executor.drain(performance.now() + 5_000);
    await stores?.close();
    await demo.close();
  });

  it('A (partition 1, epoch 1) stalls before sending X; the count goes 2 → 1; B (partition 0) sends X; A\'s late request is refused and X succeeds once', async () => {
    const s = (stores = await ctx.openStores({ poolMax: 4 }));
    await s.partitions.recordPartitionCount(2, 'test');
    const x = await changeArrangement(() => s).put({ partition: 1 });

    // A: its first call stalls (SIGSTOP after the send-by check), then is sent as it was built.
    let wake!: () => void;
    const stalled = new Promise<void>((r) => (wake = r));
    let stale: ProviderRequest | null = null;
    let late: Promise<ProviderResult> | null = null;
    const a = await buildExecutor(ctx, { stores: s, providerUrl: demo.url, partition: 1, leaseName: leaseOf(1), holderId: 'host-a',
      wrapStore: () => s.executionFor(1),
      wrapProvider: (http) => ({ submit: (req) => {
        stale = req;
        late = stalled.then(() => http.submit(req, { timeoutMs: 5_000 }));
        return late;
      } }) });
    built.push(a);
    for (let i = 0; i < 30 && !stale; i++) await a.executor.tick(300);
    expect(stale).toMatchObject({ intentId: x.intentId, attemptNo: 1, partition: 1, leaseEpoch: 1, layoutGeneration: 0 });

    // A's lease runs out while it stalls; the changer takes every lease, switches (X recovered), moves X, completes.
    const requested = await s.partitions.requestChange(1, 'ops', uuidv7());
    expect(requested.kind).toBe('created');
    await ctx.expireLeases();
    const changer = new PartitionChanger(s.lease, s.partitions, { leaseNameOf: leaseOf, partitionOf: assignPartition, holderId: 'host-c~changer',
      durationMs: 10_000, renewIntervalMs: 2_000, safetyMarginMs: 1_000, commitGraceMs: 200, refreshIntervalMs: 100, batchSize: 50, prepareBatchSize: 1_000, pollMs: 50, stuckSteps: 5 },
    systemClock, silentLogger);
    let step = await changer.step(await s.partitions.readLayout(), systemClock.nowMs() + 5_000);
    for (let i = 0; i < 10 && step.kind !== 'completed'; i++) step = await changer.step(await s.partitions.readLayout(), systemClock.nowMs() + 5_000);
    expect(step.kind).toBe('completed');
    expect(await s.partitions.readLayout()).toMatchObject({ count: 1, generation: 1, active: null });
    expect((await ctx.intentRows()).find((r) => r.intentId === x.intentId)).toMatchObject({ partition: 0, status: 'scheduled' });

    // B leads partition 0 under the new layout and sends X.
    const b = await buildExecutor(ctx, { stores: s, providerUrl: demo.url, partition: 0, leaseName: leaseOf(0), holderId: 'host-b' });
    built.push(b);
    const sentByB = () => calls.find((c) => c.intentId === x.intentId && c.partition === 0 && c.status === 200);
    for (let i = 0; i < 30 && !sentByB(); i++) await b.executor.tick(300);
    expect(sentByB()).toMatchObject({ attemptNo: 2, leaseEpoch: 2, layoutGeneration: 1, note: 'accepted' });

    // A wakes: partition 1, epoch 1 is still the highest epoch seen for partition 1; its generation is not.
    wake();
    expect(await late!).toMatchObject({ kind: 'permanent', httpStatus: 409 });
    expect(calls.filter((c) => c.intentId === x.intentId).map((c) => [c.partition, c.leaseEpoch, c.layoutGeneration, c.status]))
      .toEqual([[0, 2, 1, 200], [1, 1, 0, 409]]);
    expect(demo.stale()).toEqual({ refused: 1, accepted: 0 });

    // A's completion is refused by its fence (its epoch ended); X ends succeeded, accepted once.
    await a.executor.drain(performance.now() + 5_000);
    expect((await ctx.intentRows()).find((r) => r.intentId === x.intentId)).toMatchObject({ status: 'succeeded', attemptCount: 2 });
    expect((await ctx.attemptRows()).filter((r) => r.intentId === x.intentId).map((r) => [r.attemptNo, r.outcome])).toEqual([[1, 'abandoned'], [2, 'succeeded']]);
    expect(calls.filter((c) => c.intentId === x.intentId && c.note === 'accepted')).toHaveLength(1);
  });
});
