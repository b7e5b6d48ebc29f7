// Partitions in the database (issue 25), run unchanged against every dialect: the recorded partition count (the
// first start records it, a conditional insert: concurrent first starts agree on one winner; another count never
// overwrites it), an app started with another EXECUTOR_PARTITIONS starting on the recorded count (issue 26), and the partition and key
// each intent keeps from its insert.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectStores } from '../support/dialectFixture.js';
import { testConfig } from '../support/apps.js';
import type { Stores } from '../../src/store/stores.js';
import type { IntentContract } from '../../src/store/intentPorts.js';
import { createApp } from '../../src/app.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { silentLogger } from '../../src/observability/logger.js';

const contract: IntentContract = { provider: { url: null }, payload: { a: 1 }, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 20 } };

describe.each(dialects)('partition store contract: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  const more = useDialectStores(dialect, (fresh, stores) => {
    ctx = fresh;
    s = stores;
  });

  it('a fresh database records the first count, by whom and when (database time); the same count reads it back', async () => {
    const before = new Date(Date.parse(`${(await ctx.dbNowText()).replace(' ', 'T')}Z`) - 1);
    const first = await s.partitions.recordPartitionCount(4, 'host-a');
    expect(first).toMatchObject({ count: 4, recordedBy: 'host-a' });
    expect(first.recordedAt.getTime()).toBeGreaterThanOrEqual(before.getTime());
    expect(await s.partitions.recordPartitionCount(4, 'host-b')).toEqual(first);
  });

  it('another count never overwrites the recorded one: the recorded count comes back', async () => {
    const first = await s.partitions.recordPartitionCount(1, 'host-a');
    expect(await s.partitions.recordPartitionCount(4, 'host-b')).toEqual(first);
    expect(await (await more()).partitions.recordPartitionCount(64, 'host-c')).toEqual(first);
  });

  it('concurrent first starts with different counts: exactly one records, every caller gets its count', async () => {
    const callers = await Promise.all([1, 2, 3, 4].map(() => more()));
    const got = await Promise.all(callers.map((x, i) => x.partitions.recordPartitionCount(i + 1, `host-${i + 1}`)));
    const winner = got[0]!;
    for (const g of got) expect(g).toEqual(winner);
    expect(got.filter((g, i) => g.count === i + 1)).toHaveLength(1);
    expect(winner.recordedBy).toBe(`host-${winner.count}`);
  });

  it('an app started with another EXECUTOR_PARTITIONS than recorded starts; the recorded count governs (issue 26)', async () => {
    const config = (partitions: number) => testConfig('http://127.0.0.1:1/', { EXECUTOR_PARTITIONS: String(partitions) });
    const app = await createApp({ config: config(4), stores: await more(), logger: silentLogger, migrate: false });
    const apps = [app];
    try {
      expect((await s.partitions.recordPartitionCount(1, 'probe')).count).toBe(4); // the first app recorded its count
      const fewer = await createApp({ config: config(1), stores: await more(), logger: silentLogger, migrate: false, timerMode: 'off' });
      const more6 = await createApp({ config: config(6), stores: await more(), logger: silentLogger, migrate: false, timerMode: 'off' });
      apps.push(fewer, more6);
      expect([fewer.layout.count(), more6.layout.count()]).toEqual([4, 4]);
      expect(more6.layout.mayAcquire(3)).toBe(true);
      expect(more6.layout.mayAcquire(4)).toBe(false); // timers 4 and 5 wait until the count reaches them
      expect((await s.partitions.recordPartitionCount(6, 'probe')).count).toBe(4); // nothing overwrote the count
    } finally {
      for (const a of apps) await a.close();
    }
  });

  it('concurrent first apps with different EXECUTOR_PARTITIONS: both start and act on the one count recorded', async () => {
    const apps = await Promise.all([2, 3].map(async (n) => createApp({
      config: testConfig('http://127.0.0.1:1/', { EXECUTOR_PARTITIONS: String(n) }), stores: await more(), logger: silentLogger, migrate: false,
      timerMode: 'off' })));
    try {
      const recorded = (await s.partitions.recordPartitionCount(9, 'probe')).count;
      expect([2, 3]).toContain(recorded);
      expect(apps.map((a) => a.layout.count())).toEqual([recorded, recorded]);
    } finally {
      for (const a of apps) await a.close();
    }
  });

  it('an intent keeps the partition and key it was inserted with; without them: partition 0, no key', async () => {
    const keyed = uuidv7();
    const plain = uuidv7();
    const made = await s.intents.insert({ intentId: keyed, idempotencyKey: null, requestHash: 'a'.repeat(64), contract, maxAttempts: 3,
      notBefore: null, partition: 63, partitionKey: 'tenant-😀 ключ' });
    expect(made.intent).toMatchObject({ partition: 63, partitionKey: 'tenant-😀 ключ' });
    await s.intents.insert({ intentId: plain, idempotencyKey: null, requestHash: 'a'.repeat(64), contract, maxAttempts: 3, notBefore: null });
    expect(await s.intents.get(keyed)).toMatchObject({ partition: 63, partitionKey: 'tenant-😀 ключ' });
    expect(await s.intents.get(plain)).toMatchObject({ partition: 0, partitionKey: null });
    // Intent writes never move an intent to another partition.
    expect((await s.intents.reschedule(keyed, new Date(Date.now() + 60_000))).kind).toBe('ok');
    expect((await s.intents.cancel(keyed)).kind).toBe('ok');
    expect(await s.intents.get(keyed)).toMatchObject({ partition: 63, partitionKey: 'tenant-😀 ключ', status: 'cancelled' });
    expect((await s.intents.list({ limit: 10 })).map((i) => [i.intentId, i.partition])).toEqual([[keyed, 63], [plain, 0]]);
  });

  it('a partition key of 128 characters outside the BMP (256 UTF-16 code units) is stored whole', async () => {
    const key = '😀'.repeat(128);
    const intentId = uuidv7();
    await s.intents.insert({ intentId, idempotencyKey: null, requestHash: 'a'.repeat(64), contract, maxAttempts: 3, notBefore: null, partition: 1, partitionKey: key });
    expect((await s.intents.get(intentId))!.partitionKey).toBe(key);
  });
});
