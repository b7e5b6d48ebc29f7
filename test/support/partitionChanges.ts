// Arrangement shared by the partition-change contract suites (test/store/partitionChangeContract.test.ts,
// partitionPrepareContract.test.ts): intents with or without a key, a change requested, prepared (the preparing
// pass ended with no moves) and switched by a changer holding every lease.
import type { Stores } from '../../src/store/stores.js';
import type { IntentContract } from '../../src/store/intentPorts.js';
import type { LeaseToken } from '../../src/store/ports.js';
import type { PartitionChange, PartitionMove, ReassignRow } from '../../src/store/partitionPorts.js';
import { partitionLeaseName } from '../../src/limits.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { partitionHash, partitionOf } from '../../src/intents/partition.js';
import { acquireToken, LEASE_NAME } from './instances.js';
import type { DialectContext, DialectHarness } from './dialects.js';
import { useDialectStores } from './dialectFixture.js';

export const CHANGER = 'host-a/changer';
export const leaseOf = (k: number) => partitionLeaseName(LEASE_NAME, k);
export const keyOf = (i: { intentId: string; partitionKey: string | null }) => i.partitionKey ?? i.intentId.toLowerCase();
const contract: IntentContract = { provider: { url: null }, payload: { a: 1 }, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 20 } };

/** The moves that put `rows` in their partition under `count` (rows already there: none). */
export const movesTo = (count: number, rows: ReassignRow[]): PartitionMove[] => rows.flatMap((r) => {
  const p = partitionOf(keyOf(r), count);
  return p === r.partition ? [] : [{ intentId: r.intentId, partition: p }];
});

export const ok = <T>(out: { kind: 'ok'; value: T } | { kind: 'leaseLost' } | { kind: 'held'; by: string }): T => {
  if (out.kind !== 'ok') throw new Error(out.kind === 'held' ? `start held (${out.by})` : 'lease lost');
  return out.value;
};

/** Helpers on the suite's current stores (`stores()` is read at each call: the fixture replaces them per test). */
export function changeArrangement(stores: () => Stores) {
  const put = async (o: { key?: string; partition?: number; maxAttempts?: number } = {}) => {
    const intentId = uuidv7();
    const made = await stores().intents.insert({ intentId, idempotencyKey: null, requestHash: '0'.repeat(64), contract,
      maxAttempts: o.maxAttempts ?? 3, notBefore: null, partitionKey: o.key ?? null, partitionHash: partitionHash(o.key ?? intentId),
      ...(o.partition === undefined ? {} : { partition: o.partition }) });
    return made.intent;
  };
  /** An intent of `partition` in flight: its attempt started by another holder, whose lease is then released. */
  const inFlight = async (partition: number) => {
    const exec = await acquireToken(stores(), 'host-x', 60_000, leaseOf(partition));
    const busy = await put({ partition });
    ok(await stores().executionFor(partition).fencedStartAttempts(exec, [{ intentId: busy.intentId, expectedAttemptCount: 0 }]));
    await stores().lease.release(exec);
    return busy;
  };
  const takeLeases = (m: number): Promise<LeaseToken[]> =>
    Promise.all(Array.from({ length: m }, (_, k) => acquireToken(stores(), CHANGER, 60_000, leaseOf(k))));
  /** A new change to `to` (state preparing). */
  const request = async (to: number): Promise<PartitionChange> => {
    const out = await stores().partitions.requestChange(to, 'ops', uuidv7());
    if (out.kind !== 'created') throw new Error(`request ${to}: ${out.kind}`);
    return out.change;
  };
  /** A new change to `to` whose preparing pass ended without moving a row (state pending): one batch over every id
   *  with a horizon before any row was written. */
  const prepared = async (to: number): Promise<PartitionChange> => {
    const change = await request(to);
    const p = await stores().partitions.prepareBatch(change.changeId, { limit: 1_000_000, horizon: new Date(0) });
    if (p?.state !== 'pending') throw new Error(`prepare ${to}: ${p?.state}`);
    return p;
  };
  /** The change prepared, claimed and switched by the changer holding all `m` leases. */
  const switched = async (to: number, m: number) => {
    const change = await prepared(to);
    const fence = await takeLeases(m);
    ok(await stores().partitions.claimChange([fence[0]!], change.changeId));
    return { change: ok(await stores().partitions.switchCount(fence, change.changeId)), fence };
  };
  return { put, inFlight, takeLeases, request, prepared, switched };
}

/** The change contract suites' fixture: fresh stores of `dialect` per test (handed to `setup`), `more` for extra
 *  connections, and the change arrangement on them. */
export function useChangeArrangement(dialect: DialectHarness, setup: (ctx: DialectContext, stores: Stores) => void) {
  let current: Stores | undefined;
  const more = useDialectStores(dialect, (ctx, stores) => {
    current = stores;
    setup(ctx, stores);
  });
  return { more, ...changeArrangement(() => current!) };
}
