// The switch and intake (issue 26), run unchanged against every dialect with more than one session: no insert commits
// with the old count after a change's switch. An insert in flight (it read the old count) holds the switch until it
// commits, so the reassignment's scan, which begins after the switch, sees it and moves it; an insert begun while the
// switch waits waits for it and reads the new count (PostgreSQL's bounded wait: pgSwitchLock.test.ts). Before, the switch
// committed at once and the changer waited COMMIT_GRACE_MS for such inserts before it let execution resume.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectStores } from '../support/dialectFixture.js';
import { changeArrangement, ok } from '../support/partitionChanges.js';
import type { Stores } from '../../src/store/stores.js';
import type { IntentContract, NewIntent } from '../../src/store/intentPorts.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { partitionHash } from '../../src/intents/partition.js';

const contract: IntentContract = { provider: { url: null }, payload: { a: 1 }, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 20 } };

/** A key whose partition differs between `from` and `to` partitions. */
function movingKey(from: number, to: number): string {
  for (let i = 0; ; i++) if (partitionHash(`key-${i}`) % from !== partitionHash(`key-${i}`) % to) return `key-${i}`;
}

describe.each(dialects)('partition switch and intake: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  useDialectStores(dialect, (fresh, stores) => {
    ctx = fresh;
    s = stores;
  });
  const { prepared, takeLeases } = changeArrangement(() => s);

  it('the switch waits for an insert in flight that read the old count; the scan after it moves that intent', async (t) => {
    if (!dialect.manySessions) return t.skip('one session: no insert can be in flight beside the switch');
    await s.partitions.recordPartitionCount(2, 'host');
    const change = await prepared(4);
    const fence = await takeLeases(4);
    ok(await s.partitions.claimChange([fence[0]!], change.changeId));
    const key = movingKey(2, 4);
    const n: NewIntent = { intentId: uuidv7(), idempotencyKey: null, requestHash: '0'.repeat(64), contract, maxAttempts: 3,
      notBefore: null, partitionKey: key, partitionHash: partitionHash(key) };
    const held = await ctx.insertHeldOpen(n);
    expect(held.partition).toBe(partitionHash(key) % 2); // it read the old count

    let insertCommitted = false;
    let switchedBeforeInsert: boolean | null = null;
    const switching = s.partitions.switchCount(fence, change.changeId).then((out) => {
      switchedBeforeInsert = !insertCommitted;
      return out;
    });
    await new Promise((r) => setTimeout(r, 300));
    // An insert begun while the switch waits: it waits for the switch, then reads the new count.
    let queuedDone = false;
    const queued = s.intents.insert({ ...n, intentId: uuidv7() }).then((r) => {
      queuedDone = true;
      return r;
    });
    await new Promise((r) => setTimeout(r, 300));
    expect(switchedBeforeInsert).toBeNull(); // still waiting for the insert in flight
    expect(queuedDone).toBe(false); // and the later insert for the switch
    insertCommitted = true;
    await held.commit();
    const sw = ok(await switching);
    expect(switchedBeforeInsert).toBe(false);
    expect(sw).toMatchObject({ state: 'reassigning', toCount: 4 });
    expect((await queued).intent.partition).toBe(partitionHash(key) % 4);

    // The scan (after the switch) reads the intent where the old count put it; later inserts take the new count.
    const rows = await s.partitions.listForReassign({ after: null, limit: 100, modifiedSince: null, scope: 'all' });
    expect(rows.find((r) => r.intentId === n.intentId)).toMatchObject({ partition: partitionHash(key) % 2 });
    const later = await s.intents.insert({ ...n, intentId: uuidv7() });
    expect(later.intent.partition).toBe(partitionHash(key) % 4);
  });
});
