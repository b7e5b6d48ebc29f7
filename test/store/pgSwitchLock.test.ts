// PostgreSQL's switch excludes inserts that read the old count with a lock of its own (SHARE on submission_intents),
// bounded by SWITCH_LOCK_TIMEOUT_MS (issue 26; the shared contract: partitionSwitchContract.test.ts). Held up longer
// (here by an insert in flight; in production, say, by an anti-wraparound vacuum), the switch fails as a transient
// error and writes nothing, intake waiting at most that long; switched 'unexcluded', it takes no lock and goes on.
import { describe, expect, it } from 'vitest';
import { postgres } from '../support/pgHarness.js';
import type { DialectContext } from '../support/dialects.js';
import { useDialectStores } from '../support/dialectFixture.js';
import { changeArrangement, ok } from '../support/partitionChanges.js';
import type { Stores } from '../../src/store/stores.js';
import type { NewIntent } from '../../src/store/intentPorts.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { partitionHash } from '../../src/intents/partition.js';
import { SWITCH_LOCK_TIMEOUT_MS } from '../../src/limits.js';

const intent = (): NewIntent => ({ intentId: uuidv7(), idempotencyKey: null, requestHash: '0'.repeat(64), maxAttempts: 3, notBefore: null,
  contract: { provider: { url: null }, payload: {}, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 20 } }, partitionKey: null, partitionHash: 7 });

describe('postgres: the switch\'s bounded lock', () => {
  let ctx: DialectContext;
  let s: Stores;
  useDialectStores(postgres, (fresh, stores) => {
    ctx = fresh;
    s = stores;
  });
  const { prepared, takeLeases } = changeArrangement(() => s);

  it('held up past SWITCH_LOCK_TIMEOUT_MS: a transient error, nothing written, intake waited no longer; unexcluded: no wait', async () => {
    await s.partitions.recordPartitionCount(2, 'host');
    const change = await prepared(4);
    const fence = await takeLeases(4);
    ok(await s.partitions.claimChange([fence[0]!], change.changeId));
    const held = await ctx.insertHeldOpen(intent());
    try {
      const t0 = Date.now();
      const queued = s.intents.insert(intent()); // queues behind the switch's lock request
      await expect(s.partitions.switchCount(fence, change.changeId)).rejects.toMatchObject({ name: 'StoreError', kind: 'transient', code: '55P03' });
      expect(Date.now() - t0).toBeGreaterThanOrEqual(SWITCH_LOCK_TIMEOUT_MS - 50); // (never sooner)
      await queued; // it went on once the request was withdrawn, the held insert still open (its commit comes below)
      expect((await s.partitions.getChange(change.changeId))!.state).toBe('pending');
      expect((await s.partitions.readLayout()).count).toBe(2);

      const sw = ok(await s.partitions.switchCount(fence, change.changeId, 'unexcluded')); // the insert still open
      expect(sw).toMatchObject({ state: 'reassigning', toCount: 4 });
    } finally {
      await held.commit();
    }
    expect((await s.partitions.readLayout()).count).toBe(4);
  });
});
