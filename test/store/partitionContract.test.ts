// Partitions in the database (issue 25), run unchanged against every dialect: the recorded partition count (the
// first start records it, a conditional insert: concurrent first starts agree on one winner; another count never
// overwrites it), an app started with another EXECUTOR_PARTITIONS refusing to start, and the partition and key
// each intent keeps from its insert.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectStores } from '../support/dialectFixture.js';
import { testConfig } from '../support/apps.js';
import type { Stores } from '../../src/store/stores.js';
import type { IntentContract } from '../../src/store/intentPorts.js';
import { createApp } from '../../src/app.js';
import { ConfigError } from '../../src/config.js';
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

  it('an app started with another EXECUTOR_PARTITIONS than recorded refuses to start, naming both; the same count starts', async () => {
    const config = (partitions: number) => testConfig('http://127.0.0.1:1/', { EXECUTOR_PARTITIONS: String(partitions) });
    const app = await createApp({ config: config(4), stores: await more(), logger: silentLogger, migrate: false });
    try {
      expect((await s.partitions.recordPartitionCount(1, 'probe')).count).toBe(4); // the first app recorded its count
      const refused = createApp({ config: config(1), stores: await more(), logger: silentLogger, migrate: false });
      await expect(refused).rejects.toBeInstanceOf(ConfigError);
      await expect(refused).rejects.toThrow(/EXECUTOR_PARTITIONS is 1 but the database records 4 partition\(s\)/);
      const again = await createApp({ config: config(4), stores: await more(), logger: silentLogger, migrate: false });
      await again.close();
    } finally {
      await app.close();
    }
  });

  it('concurrent first apps with different EXECUTOR_PARTITIONS: exactly one starts', async () => {
    const outcomes = await Promise.allSettled([2, 3].map(async (n) => createApp({
      config: testConfig('http://127.0.0.1:1/', { EXECUTOR_PARTITIONS: String(n) }), stores: await more(), logger: silentLogger, migrate: false })));
    const started = outcomes.flatMap((o) => (o.status === 'fulfilled' ? [o.value] : []));
    const refused = outcomes.flatMap((o) => (o.status === 'rejected' ? [o.reason as Error] : []));
    try {
      expect(started).toHaveLength(1);
      expect(refused).toHaveLength(1);
      expect(refused[0]).toBeInstanceOf(ConfigError);
      expect(refused[0]!.message).toContain(`but the database records ${started[0]!.config.partitions.count} partition(s)`);
    } finally {
      for (const a of started) await a.close();
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
