// Changing the partition count (issue 26) with whole in-process apps on each dialect, every partition's timer
// function run as the local host runs it (runPartitionTimer, every-instance mode): under a steady stream of intents
// and a provider failing 20 % with 503, the count goes 4 → 6 → 2 → 4. Every intent succeeds once (no 2xx re-sent),
// attempt numbers stay contiguous, intents sharing a partitionKey reach the provider in submit order, every intent
// ends in its partition under the final count, and the changer leaves no lease held.
import { describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { assignPartition, partitionHash as partitionHashOf } from '../../src/intents/partition.js';
import { partitionChangerHolderId, partitionLeaseName } from '../../src/limits.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import { startRecordingProvider, type RecordingProvider } from '../support/recordingProvider.js';
import { TEST_LEASE, startApps, submitVia, testConfig, timerLoops, waitUntil, sleep } from '../support/apps.js';

const C = 6; // timer functions per app: the most partitions the test asks for

describe.each(dialects)('partition count change (in-process apps): $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  let apps: App[] = [];
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    let n = 0;
    provider = await startRecordingProvider(() => ({ status: ++n % 5 === 0 ? 503 : 200, delayMs: 10 })); // 20 % fail, retryable
  }, async () => {
    for (const a of apps) await a.close();
    apps = [];
    await provider?.close();
  });

  it('4 → 6 → 2 → 4 under load: every intent once, contiguous attempts, per-key order, the final layout', async () => {
    const seed = await ctx.openStores({ poolMax: 2 });
    await seed.partitions.recordPartitionCount(4, 'test');
    await seed.close();
    const config = testConfig(provider.url, { EXECUTOR_PARTITIONS: String(C), DB_POOL_MAX: '19', COMMIT_GRACE_MS: '1500' });
    apps = await startApps(ctx, 3, config, undefined, 19, 'every-instance');
    expect(apps.map((a) => a.layout.count())).toEqual([4, 4, 4]);
    const loops = timerLoops(apps);
    const ids: { id: string; key: string | null }[] = [];
    let submitting = true;
    const submitter = (async () => {
      for (let i = 0; submitting; i++) {
        const key = i % 3 === 0 ? `tenant-${i % 4}` : null;
        const intentId = uuidv7();
        const r = await apps[i % 3]!.stores.intents.insert({ intentId, idempotencyKey: null, requestHash: 'h', maxAttempts: 10, notBefore: null,
          contract: { provider: { url: null }, payload: { i }, retry: { maxAttempts: 10, baseDelayMs: 20, maxDelayMs: 50 } },
          partitionKey: key, partitionHash: partitionHashOf(key ?? intentId) });
        ids.push({ id: r.intent.intentId, key });
        await sleep(15);
      }
    })();
    try {
      for (const to of [6, 2, 4]) {
        await sleep(700);
        const asked = await apps[to % 3]!.stores.partitions.requestChange(to, 'test', uuidv7());
        expect(asked.kind).toBe('created');
        await waitUntil(`change to ${to} completed`, async () => (await apps[0]!.stores.partitions.readLayout()).active === null, 45_000);
        expect((await apps[0]!.stores.partitions.readLayout()).count).toBe(to);
      }
      await sleep(500);
      submitting = false;
      await submitter;
      await waitUntil('every intent succeeded', async () => ((await ctx.statusCounts()).succeeded ?? 0) >= ids.length, 45_000);
    } finally {
      submitting = false;
      await loops.stop();
    }
    const rows = await ctx.intentRows();
    const attempts = await ctx.attemptRows();
    for (const { id } of ids) {
      // No 2xx re-sent: the attempt that received its 2xx is the intent's last call to the provider. (A 2xx answered
      // to a call the client had already given up on was never received: a retry after it is no re-send.)
      const won = attempts.find((a) => a.intentId === id && a.outcome === 'succeeded');
      expect(provider.calls.filter((c) => c.intentId === id && c.attemptNo > (won?.attemptNo ?? 0)), `calls after the 2xx of ${id}`).toEqual([]);
      const mine = attempts.filter((a) => a.intentId === id).map((a) => a.attemptNo).sort((a, b) => a - b);
      expect(mine, `attempts of ${id}`).toEqual(mine.map((_, i) => i + 1));
      expect(attempts.filter((a) => a.intentId === id && a.outcome === 'succeeded')).toHaveLength(1);
    }
    // Per-key order (checkerPartitions.ts key_order): intents sharing a key, each inserted after the previous
    // committed, are first started in that order.
    const firstStart = new Map(attempts.filter((a) => a.attemptNo === 1).map((a) => [a.intentId, a.startedAt.getTime()]));
    for (const key of new Set(ids.flatMap((x) => (x.key ? [x.key] : [])))) {
      const starts = ids.filter((x) => x.key === key).map((x) => firstStart.get(x.id)!);
      expect(starts, `key ${key}`).toEqual([...starts].sort((a, b) => a - b));
    }
    for (const r of rows) expect(r.partition, r.intentId).toBe(assignPartition({ intentId: r.intentId, partitionKey: r.partitionKey }, 4));
    const changer = apps.map((a) => partitionChangerHolderId(a.config.lease.holderId));
    for (let k = 0; k < C; k++) {
      const row = await apps[0]!.stores.lease.get(partitionLeaseName(TEST_LEASE, k));
      if (row && row.expiresAt > row.dbNow) expect(changer).not.toContain(row.holderId);
    }
  }, 240_000);

  // One instance runs every timer and leads partition 0 the whole period (a leader's tick lasts until the next
  // occurrence): the preparing step must run beside its tick, or it would never get time.
  it('one app leading every partition: a change 2 → 3 completes, and its intents execute under the new count', async () => {
    const seed = await ctx.openStores({ poolMax: 2 });
    await seed.partitions.recordPartitionCount(2, 'test');
    await seed.close();
    apps = await startApps(ctx, 1, testConfig(provider.url, { EXECUTOR_PARTITIONS: '3', DB_POOL_MAX: '10' }), undefined, 10);
    const [app] = apps as [App];
    const loops = timerLoops(apps);
    try {
      await waitUntil('partitions 0 and 1 led', () => app.partitions.slice(0, 2).every((p) => p.lease.requireLeader() !== null));
      const ids: string[] = [];
      for (let i = 0; i < 12; i++) ids.push((await submitVia(app, { i })));
      await waitUntil('first intents succeeded', async () => ((await ctx.statusCounts()).succeeded ?? 0) >= 12);
      expect((await app.stores.partitions.requestChange(3, 'test', uuidv7())).kind).toBe('created');
      await waitUntil('the change completed', async () => (await app.stores.partitions.readLayout()).active === null, 30_000);
      for (let i = 0; i < 12; i++) ids.push((await submitVia(app, { i })));
      await waitUntil('every intent succeeded', async () => ((await ctx.statusCounts()).succeeded ?? 0) >= ids.length, 30_000);
      await waitUntil('partition 2 led', () => app.partitions[2]!.lease.requireLeader() !== null);
    } finally {
      await loops.stop();
    }
    for (const r of await ctx.intentRows()) expect(r.partition).toBe(assignPartition({ intentId: r.intentId, partitionKey: r.partitionKey }, 3));
  }, 90_000);
});
