// The provider receives the partition beside the epoch (issue 25): the executor sends its settings' partition as
// X-Lease-Partition on every call, 0 when the settings name none (one partition: today's requests plus a header),
// so a provider can keep the highest epoch per partition. A real executor, a real database and a real HTTP server.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { submit } from '../support/instances.js';
import { buildExecutor } from '../support/executorHarness.js';

// Transport only: one dialect is enough (the header is built above the store).
const pglite = dialects.filter((d) => d.name === 'pglite');

describe.each(pglite)('the provider sees X-Lease-Partition: $name', (dialect) => {
  const t = {} as { ctx: DialectContext; provider: RecordingProvider };
  useDialectWithProvider(dialect, (ctx, provider) => {
    t.ctx = ctx;
    t.provider = provider;
  });

  it.each([[3, 3], [undefined, 0]])('an executor of partition %s sends X-Lease-Partition: %s beside its epoch', async (partition, header) => {
    const b = await buildExecutor(t.ctx, { providerUrl: t.provider.url, ...(partition === undefined ? {} : { partition }) });
    try {
      const id = (await submit(b.stores, { p: 1 })).intentId;
      for (let i = 0; i < 20 && !t.provider.calls.some((c) => c.intentId === id); i++) await b.executor.tick(300);
      const calls = t.provider.calls.filter((c) => c.intentId === id);
      expect(calls.length).toBeGreaterThan(0);
      for (const c of calls) expect([c.partition, c.leaseEpoch]).toEqual([header, 1]);
    } finally {
      await b.executor.drain(performance.now() + 5_000);
      await b.lease.release();
      await b.stores.close();
    }
  });
});
