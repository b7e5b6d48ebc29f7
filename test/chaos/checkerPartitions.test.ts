// Issue 25: the checker's per-partition rules catch what they claim to. A clean history with two partitions (lease
// L for partition 0, L#1 for partition 1, each with its own epoch 1) passes; each rule, violated once, is reported
// under its check with its evidence; and a one-partition history reads as before (no partition rule applies).
import { describe, expect, it } from 'vitest';
import { check, type History } from './checker.js';
import type { FaultRecord } from './faults.js';
import { partitionOf } from '../../src/intents/partition.js';

const L0 = 'L', L1 = 'L#1';
/** A partitionKey of each partition (found by hashing, as the product assigns them). */
const keyOf = (p: number) => Array.from({ length: 50 }, (_, i) => `pk${i}`).find((k) => partitionOf(k, 2) === p)!;
const K0 = keyOf(0), K1 = keyOf(1);
const X = '00000000-0000-0000-0000-0000000000a1', Y = '00000000-0000-0000-0000-0000000000a2', Z = '00000000-0000-0000-0000-0000000000b1';

/** h1 leads partition 0 throughout; h2 leads partition 1 (epoch 1) until it is killed at 10 000, h3 takes it (epoch 2).
 *  X then Y (partitionKey K0, partition 0) are started in order; Z (K1, partition 1) is re-sent after the failover. */
function clean(): History {
  const kill: FaultRecord = {
    kind: 'kill', slot: 1, victim: 'h2', victimWasLeader: true, epochAtFault: 1, startedAt: 10_000, endedAt: 10_500, measureFrom: 10_000,
    exclude: { holderId: 'h2', until: Number.POSITIVE_INFINITY }, detail: 'killed h2', resumedAt: 13_000, partitions: [1],
  };
  return {
    leaseMs: 2_000, resumeBound: 2.5, tickMs: 1_000, partitionLeases: [L0, L1],
    events: [
      { seq: 1, epoch: 1, holderId: 'h1', event: 'acquired', leaseName: L0 },
      { seq: 2, epoch: 1, holderId: 'h2', event: 'acquired', leaseName: L1 },
      { seq: 10, epoch: 2, holderId: 'h3', event: 'acquired', leaseName: L1 },
    ],
    audit: [
      { seq: 3, epoch: 1, holderId: 'h1', action: 'start_attempts', atMs: 9_000, leaseName: L0 },
      { seq: 4, epoch: 1, holderId: 'h2', action: 'start_attempts', atMs: 9_000, leaseName: L1 },
      { seq: 5, epoch: 1, holderId: 'h1', action: 'complete_attempts', atMs: 9_200, leaseName: L0 },
      { seq: 11, epoch: 1, holderId: 'h1', action: 'start_attempts', atMs: 10_500, leaseName: L0 },
      { seq: 12, epoch: 2, holderId: 'h3', action: 'recover_orphans', atMs: 12_900, leaseName: L1 },
      { seq: 13, epoch: 2, holderId: 'h3', action: 'start_attempts', atMs: 13_000, leaseName: L1 },
      { seq: 14, epoch: 1, holderId: 'h1', action: 'complete_attempts', atMs: 13_100, leaseName: L0 },
      { seq: 15, epoch: 2, holderId: 'h3', action: 'complete_attempts', atMs: 13_100, leaseName: L1 },
    ],
    intents: [
      { intentId: X, key: 'kx', status: 'succeeded', attemptCount: 1, partition: 0, partitionKey: K0, createdAtMs: 8_050 },
      { intentId: Y, key: 'ky', status: 'succeeded', attemptCount: 1, partition: 0, partitionKey: K0, createdAtMs: 8_250 },
      { intentId: Z, key: 'kz', status: 'succeeded', attemptCount: 2, partition: 1, partitionKey: K1, createdAtMs: 8_050 },
    ],
    attempts: [
      { intentId: X, attemptNo: 1, epoch: 1, holderId: 'h1', outcome: 'succeeded', httpStatus: 200, error: null, startedAtMs: 9_000, finishedAtMs: 9_200 },
      { intentId: Y, attemptNo: 1, epoch: 1, holderId: 'h1', outcome: 'succeeded', httpStatus: 200, error: null, startedAtMs: 10_500, finishedAtMs: 13_100 },
      { intentId: Z, attemptNo: 1, epoch: 1, holderId: 'h2', outcome: 'abandoned', httpStatus: null, error: 'abandoned: …', startedAtMs: 9_000, finishedAtMs: 12_900 },
      { intentId: Z, attemptNo: 2, epoch: 2, holderId: 'h3', outcome: 'succeeded', httpStatus: 200, error: null, startedAtMs: 13_000, finishedAtMs: 13_100 },
    ],
    provider: [
      { key: X, attemptNo: 1, epoch: 1, arrivedAt: 9_050, status: 200, delayMs: 10, staleEpoch: false },
      { key: Z, attemptNo: 1, epoch: 1, arrivedAt: 9_060, status: 200, delayMs: 10, staleEpoch: false },
      { key: Y, attemptNo: 1, epoch: 1, arrivedAt: 10_550, status: 200, delayMs: 10, staleEpoch: false },
      { key: Z, attemptNo: 2, epoch: 2, arrivedAt: 13_050, status: 200, delayMs: 10, staleEpoch: false },
    ],
    accepted: [
      { key: 'kx', n: 1, mode: 'ok', intentId: X, status: 201, at: 8_100, partitionKey: K0, sentAt: 8_000 },
      { key: 'ky', n: 2, mode: 'ok', intentId: Y, status: 201, at: 8_300, partitionKey: K0, sentAt: 8_200 },
      { key: 'kz', n: 3, mode: 'ok', intentId: Z, status: 201, at: 8_100, partitionKey: K1, sentAt: 8_000 },
    ],
    replays: [], cancels: [], faults: [kill], leaderless: [],
  };
}

const found = (h: History) => check(h).violations;
const only = (h: History, c: string) => {
  const v = found(h);
  expect(v.map((x) => x.check)).toEqual([c]);
  return v[0]!.message;
};

describe('chaos checker, two partitions (issue 25)', () => {
  it('passes a clean history: epochs per lease, the failover of partition 1 judged on partition 1', () => {
    const { violations, stats } = check(clean());
    expect(violations).toEqual([]);
    expect(stats).toMatchObject({ partitions: 2, keyOrderPairs: 1, keySameBatch: 0, keyArrivalInversions: 0, resendsAfterFenceRefusal: 1 });
    expect(stats.resumes[0]!.ms).toBe(3_000); // partition 1's first start after the kill; partition 0's at 10 500 does not count
  });

  it('lease: an epoch of one lease acquired by two holders (epoch 1 of the other lease is no conflict)', () => {
    const h = clean();
    h.events.push({ seq: 16, epoch: 2, holderId: 'h1', event: 'acquired', leaseName: L1 });
    expect(found(h)).toContainEqual({ check: 'lease', message: 'lease L#1: epoch 2 acquired by both h3 and h1' });
    expect(found(h).every((v) => v.check === 'lease' && v.message.startsWith('lease L#1: '))).toBe(true);
    const twice = clean();
    twice.events.push({ seq: 16, epoch: 2, holderId: 'h1', event: 'acquired', leaseName: L0 }); // lease L: 1 → 2, held by h1: fine
    expect(found(twice)).toEqual([]);
  });

  it('lease: epochs per lease go up by one', () => {
    const h = clean();
    h.events[2]!.epoch = 3;
    h.audit.filter((a) => a.leaseName === L1 && a.epoch === 2).forEach((a) => (a.epoch = 3));
    h.attempts[3]!.epoch = 3;
    h.provider[3]!.epoch = 3;
    expect(only(h, 'lease')).toContain('lease L#1: acquire seq 10: epoch jumped from 1 to 3');
  });

  it("lease: an attempt of a partition-0 intent under partition 1's epoch (its holder does not lead partition 0's epoch 2)", () => {
    const h = clean();
    h.attempts[1] = { ...h.attempts[1]!, epoch: 2, holderId: 'h3' };
    h.provider[2]!.epoch = 2;
    expect(found(h)).toContainEqual({ check: 'lease', message: expect.stringContaining(`lease L: attempt ${Y}#1: written by h3 under epoch 2, whose holder is nobody`) });
  });

  it('fencing: a write of partition 1\'s epoch 1 after its epoch 2 was acquired (a later epoch of lease L is no reason)', () => {
    const h = clean();
    h.audit.push({ seq: 16, epoch: 1, holderId: 'h2', action: 'complete_attempts', atMs: 13_200, leaseName: L1 });
    const v = found(h);
    expect(v).toContainEqual({ check: 'fencing', message: expect.stringContaining('lease L#1: write seq 16 (complete_attempts, epoch 1) committed after epoch 2') });
    expect(v.map((x) => x.check).sort()).toEqual(['fencing', 'one_executor']);
    const ok = clean(); // lease L's epoch 1 keeps writing after L#1's epoch 2: other lease
    ok.audit.push({ seq: 16, epoch: 1, holderId: 'h1', action: 'complete_attempts', atMs: 13_200, leaseName: L0 });
    expect(found(ok)).toEqual([]);
  });

  it('one_executor: two executors of one partition interleaved in commit order', () => {
    const h = clean();
    h.audit.push({ seq: 16, epoch: 1, holderId: 'h2', action: 'start_attempts', atMs: 13_200, leaseName: L1 });
    expect(found(h)).toContainEqual({ check: 'one_executor', message: expect.stringContaining('lease L#1: write seq 16 (start_attempts) by h2 under epoch 1 committed after seq 15 by h3 under epoch 2') });
  });

  it('partition: an intent stored in another partition than its key hashes to; a write naming no partition\'s lease', () => {
    const h = clean();
    h.intents[2]!.partition = 0;
    expect(found(h)).toContainEqual({ check: 'partition', message: `intent ${Z} (partitionKey ${K1}) is in partition 0; its key hashes to 1 of 2` });
    const h2 = clean();
    h2.audit.push({ seq: 16, epoch: 1, holderId: 'h1', action: 'complete_attempts', atMs: 13_200, leaseName: 'L#2' });
    expect(found(h2)).toContainEqual({ check: 'partition', message: expect.stringContaining('audit seq 16 (complete_attempts) names lease L#2') });
  });

  it('key_order: a later intent of one partitionKey started before an earlier one', () => {
    const h = clean();
    h.attempts[1]!.startedAtMs = 8_900;
    expect(only(h, 'key_order')).toContain(`partitionKey ${K0}: intent ${Y} (sent 8200) first started at 8900`);
    const unordered = clean(); // Y sent before X was answered: their order is unknown, nothing to judge
    unordered.accepted[1]!.sentAt = 8_050;
    unordered.attempts[1]!.startedAtMs = 8_900;
    expect(found(unordered)).toEqual([]);
    const overtaken = clean(); // started in order, arrived the other way round: counted, not failed
    overtaken.provider[2]!.arrivedAt = 9_040;
    expect(check(overtaken)).toMatchObject({ violations: [], stats: { keyArrivalInversions: 1 } });
    const oneBatch = clean(); // started by one statement: sent side by side, no order to count
    oneBatch.attempts[1]!.startedAtMs = 9_000;
    oneBatch.provider[2]!.arrivedAt = 9_040;
    expect(check(oneBatch)).toMatchObject({ violations: [], stats: { keyOrderPairs: 1, keySameBatch: 1, keyArrivalInversions: 0 } });
  });

  it('liveness per partition: the fault on partition 1\'s leader is judged on partition 1, not on partition 0\'s starts', () => {
    const h = clean();
    h.audit.find((a) => a.seq === 13)!.atMs = 16_000; // partition 1 resumes after 6 s = 3 × lease > 2.5; partition 0 started at 10 500
    h.attempts[3]!.startedAtMs = 16_000;
    expect(only(h, 'liveness')).toContain('kill (killed h2, victim leader: true, partitions 1): resumed after 6000 ms = 3.00 × lease > bound 2.50');
  });

  it('partition_isolation: a fault on partition 1\'s leader that pauses partition 0', () => {
    const h = clean();
    h.audit.find((a) => a.seq === 11)!.atMs = 15_500; // partition 0 started nothing for 5.5 s after the kill
    h.attempts[1]!.startedAtMs = 15_500;
    expect(only(h, 'partition_isolation')).toContain('kill (killed h2) hit partitions [1]: partition 0 (L) started nothing for 5500 ms = 2.75 × lease > bound 2.50');
  });

  // Campaign on fc6a7f3, seed 39008: a terminate hit partitions 0 and 1; 1.5 s later a stop of partition 2's own
  // leader paused partition 2. Its pause is the stop's (judged by the stop's own liveness), not the terminate's.
  it('partition_isolation: a partition another fault hit meanwhile is that fault\'s to judge', () => {
    const h = clean();
    h.audit.find((a) => a.seq === 11)!.atMs = 15_500;
    h.attempts[1]!.startedAtMs = 15_500;
    const stop: FaultRecord = { kind: 'stop', slot: 0, victim: 'h1', victimWasLeader: true, epochAtFault: 1, startedAt: 11_000, endedAt: 14_000,
      measureFrom: 11_000, exclude: null, detail: 'stopped h1', resumedAt: 15_500, partitions: [0] };
    h.faults = [...h.faults, stop];
    expect(found(h).filter((v) => v.check === 'partition_isolation')).toEqual([]);
    h.faults = [...h.faults.slice(0, -1), { ...stop, startedAt: 16_000, endedAt: 17_000, measureFrom: 16_000, resumedAt: 17_500 }]; // after the start
    expect(found(h).filter((v) => v.check === 'partition_isolation').map((v) => v.message).join()).toContain('partition 0 (L) started nothing for 5500 ms');
  });

  // Campaign on 2939f15, seeds 27011 and 27012: a complete_stall drawn against h3 stalled partition 1's leader h2 too
  // (it locks every intent in flight); h2's epoch expired with a 2xx unwritten and the next leader sent again.
  it('a database-wide fault excuses a re-send on every partition it hit, not only its drawn victim\'s', () => {
    const stall = (partitions: number[]): FaultRecord => ({
      kind: 'complete_stall', slot: 2, victim: 'h3', victimWasLeader: true, epochAtFault: 1, startedAt: 9_100, endedAt: 11_800,
      measureFrom: 10_000, exclude: null, detail: 'locked every intent in flight', resumedAt: 13_000, leaseValid: true, partitions,
    });
    const h = clean();
    h.faults = [stall([0, 1])];
    expect(check(h)).toMatchObject({ violations: [], stats: { resendsAfterFenceRefusal: 1, resendsExcusedBy: { complete_stall: 1 } } });
    h.faults = [stall([0])]; // it did not hit partition 1: Z's re-send is unexcused
    expect(found(h)).toContainEqual({ check: 'resend_after_2xx', message: expect.stringContaining(`key ${Z}`) });
  });

  it('a history of one partition: none of the partition rules, messages as before', () => {
    const h: History = { ...clean(), partitionLeases: [L0] };
    h.events = h.events.map((e) => ({ ...e, leaseName: L0 }));
    const v = found(h); // one lease now: L#1's epochs 1 and 2 collide with L's epoch 1
    expect(v.some((x) => x.check === 'lease' && x.message.startsWith('acquire seq 2: epoch 1 not greater'))).toBe(true);
    expect(v.every((x) => !['partition', 'one_executor', 'key_order', 'partition_isolation'].includes(x.check))).toBe(true);
  });
});
