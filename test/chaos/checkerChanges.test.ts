// Issue 26: the checker reads a run whose partition count changed. A clean history (count 2 → 3, the intent X moved
// from partition 1 to 2 at the change) passes; each rule the change affects, violated once, is reported under its
// check; and the rules that a change would otherwise trip (a fault's resume, partition isolation, a re-send after the
// intent moved to a partition with a lower epoch) read the change.
import { describe, expect, it } from 'vitest';
import { check, type History } from './checker.js';
import type { FaultRecord } from './faults.js';
import { partitionOf } from '../../src/intents/partition.js';
import { arrivalGap, CountTimeline } from './checkerChanges.js';

const L0 = 'L', L1 = 'L#1', L2 = 'L#2';
/** A partitionKey with partition `a` of 2 and `b` of 3 (found by hashing, as the product assigns them). */
const keyOf = (a: number, b: number) => Array.from({ length: 80 }, (_, i) => `pk${i}`).find((k) => partitionOf(k, 2) === a && partitionOf(k, 3) === b)!;
const KX = keyOf(1, 2), KY = keyOf(0, 0);
const X = '00000000-0000-0000-0000-0000000000c1', Y = '00000000-0000-0000-0000-0000000000c2';

const changeFault = (): FaultRecord => ({
  kind: 'partition_change', slot: 0, victim: null, victimWasLeader: false, epochAtFault: null, startedAt: 10_000, endedAt: 12_000,
  measureFrom: 12_000, exclude: null, detail: '2 → 3', resumedAt: 12_500, alongside: true, partitions: [0, 1, 2],
});

/** h1 leads partition 0, h2 partition 1 (of 2). The change to 3 (requested 10 000, switched 11 000, completed 12 000):
 *  the leaders hand back, the changer ch takes all three leases, releases them; then h1 leads L, h3 L#1, h2 L#2.
 *  X (key KX) is tried on partition 1 before (503) and succeeds on partition 2 after; Y (KY) stays in partition 0. */
function clean(): History {
  return {
    leaseMs: 2_000, resumeBound: 2.5, tickMs: 1_000, partitionLeases: [L0, L1, L2],
    partitionChanges: [{ changeId: 'c1', fromCount: 2, toCount: 3, state: 'completed', requestedAtMs: 10_000, switchedAtMs: 11_000, completedAtMs: 12_000, changer: 'ch', rowsMoved: 1 }],
    events: [
      { seq: 1, epoch: 1, holderId: 'h1', event: 'acquired', leaseName: L0 },
      { seq: 2, epoch: 1, holderId: 'h2', event: 'acquired', leaseName: L1 },
      { seq: 10, epoch: 1, holderId: 'h1', event: 'released', leaseName: L0 },
      { seq: 11, epoch: 1, holderId: 'h2', event: 'released', leaseName: L1 },
      { seq: 20, epoch: 2, holderId: 'ch', event: 'acquired', leaseName: L0 },
      { seq: 21, epoch: 2, holderId: 'ch', event: 'acquired', leaseName: L1 },
      { seq: 22, epoch: 1, holderId: 'ch', event: 'acquired', leaseName: L2 },
      { seq: 23, epoch: 2, holderId: 'ch', event: 'released', leaseName: L0 },
      { seq: 24, epoch: 2, holderId: 'ch', event: 'released', leaseName: L1 },
      { seq: 25, epoch: 1, holderId: 'ch', event: 'released', leaseName: L2 },
      { seq: 30, epoch: 3, holderId: 'h1', event: 'acquired', leaseName: L0 },
      { seq: 31, epoch: 3, holderId: 'h3', event: 'acquired', leaseName: L1 },
      { seq: 32, epoch: 2, holderId: 'h2', event: 'acquired', leaseName: L2 },
    ],
    audit: [
      { seq: 3, epoch: 1, holderId: 'h1', action: 'start_attempts', atMs: 9_000, leaseName: L0 },
      { seq: 4, epoch: 1, holderId: 'h2', action: 'start_attempts', atMs: 9_000, leaseName: L1 },
      { seq: 5, epoch: 1, holderId: 'h1', action: 'complete_attempts', atMs: 9_100, leaseName: L0 },
      { seq: 6, epoch: 1, holderId: 'h2', action: 'complete_attempts', atMs: 9_100, leaseName: L1 },
      { seq: 33, epoch: 3, holderId: 'h1', action: 'start_attempts', atMs: 12_300, leaseName: L0 },
      { seq: 34, epoch: 3, holderId: 'h3', action: 'start_attempts', atMs: 12_450, leaseName: L1 },
      { seq: 35, epoch: 2, holderId: 'h2', action: 'start_attempts', atMs: 12_500, leaseName: L2 },
      { seq: 36, epoch: 2, holderId: 'h2', action: 'complete_attempts', atMs: 12_600, leaseName: L2 },
    ],
    intents: [
      { intentId: X, key: 'kx', status: 'succeeded', attemptCount: 2, partition: 2, partitionKey: KX, createdAtMs: 8_050 },
      { intentId: Y, key: 'ky', status: 'succeeded', attemptCount: 1, partition: 0, partitionKey: KY, createdAtMs: 8_050 },
    ],
    attempts: [
      { intentId: X, attemptNo: 1, epoch: 1, holderId: 'h2', outcome: 'retryable_error', httpStatus: 503, error: 'HTTP 503', startedAtMs: 9_000, finishedAtMs: 9_100 },
      { intentId: X, attemptNo: 2, epoch: 2, holderId: 'h2', outcome: 'succeeded', httpStatus: 200, error: null, startedAtMs: 12_500, finishedAtMs: 12_600 },
      { intentId: Y, attemptNo: 1, epoch: 1, holderId: 'h1', outcome: 'succeeded', httpStatus: 200, error: null, startedAtMs: 9_000, finishedAtMs: 9_100 },
    ],
    provider: [
      { key: X, attemptNo: 1, epoch: 1, arrivedAt: 9_050, status: 503, delayMs: 10, staleEpoch: false, partition: 1 },
      { key: Y, attemptNo: 1, epoch: 1, arrivedAt: 9_050, status: 200, delayMs: 10, staleEpoch: false, partition: 0 },
      { key: X, attemptNo: 2, epoch: 2, arrivedAt: 12_550, status: 200, delayMs: 10, staleEpoch: false, partition: 2 },
    ],
    accepted: [
      { key: 'kx', n: 1, mode: 'ok', intentId: X, status: 201, at: 8_100, partitionKey: KX, sentAt: 8_000 },
      { key: 'ky', n: 2, mode: 'ok', intentId: Y, status: 201, at: 8_100, partitionKey: KY, sentAt: 8_000 },
    ],
    replays: [], cancels: [], faults: [changeFault()], leaderless: [],
  };
}

const found = (h: History) => check(h).violations;
const only = (h: History, c: string) => {
  const v = found(h);
  expect(v.map((x) => x.check)).toEqual([c]);
  return v[0]!.message;
};
const kill = (o: Partial<FaultRecord>): FaultRecord => ({
  kind: 'kill', slot: 1, victim: 'h2', victimWasLeader: true, epochAtFault: 1, startedAt: 7_000, endedAt: 7_500, measureFrom: 7_000,
  exclude: { holderId: 'h2', until: Number.POSITIVE_INFINITY }, detail: 'killed h2', resumedAt: null, partitions: [1], ...o,
});

describe('chaos checker, a change of the partition count (issue 26)', () => {
  it('the count over time: the first change\'s from-count, each to-count from its switch', () => {
    const t = new CountTimeline(clean().partitionChanges, 3);
    expect([t.initial, t.countAt(10_999), t.countAt(11_000), t.final]).toEqual([2, 2, 3, 3]);
    expect(new CountTimeline(undefined, 4).final).toBe(4);
    expect(t.activeDuring(9_000, 9_999)).toBeUndefined();
    expect(t.activeDuring(11_500, 20_000)?.changeId).toBe('c1');
    expect(t.activeDuring(12_000, 20_000)).toBeUndefined(); // completed at 12 000
    expect(arrivalGap([9_050, 10_900, 12_550, 12_700], clean().partitionChanges![0]!)).toBe(1_650);
  });

  it('passes a clean history: X read under partition 1 before the change and partition 2 after; its stored partition of 3', () => {
    const { violations, stats } = check(clean());
    expect(violations).toEqual([]);
    expect(stats.changes).toEqual([{ from: 2, to: 3, ms: 2_000, reassignMs: 1_000, rowsMoved: 1, pauseMs: 3_500 }]);
    expect(stats.resumes[0]).toMatchObject({ kind: 'partition_change', ms: 500 }); // the last new partition's first start
  });

  it('lease: an attempt after the change under the old partition\'s lease (the intent moved)', () => {
    const h = clean();
    h.attempts[1] = { ...h.attempts[1]!, epoch: 3, holderId: 'h3' };
    h.provider[2] = { ...h.provider[2]!, epoch: 3, partition: 1 };
    expect(found(h)).toContainEqual({ check: 'lease', message: expect.stringContaining(`lease L#2: attempt ${X}#2: written by h3 under epoch 3, whose holder is nobody`) });
  });

  it('partition: a row left in its partition of the old count', () => {
    const h = clean();
    h.intents[0]!.partition = 1;
    expect(only(h, 'partition')).toBe(`intent ${X} (partitionKey ${KX}) is in partition 1; its key hashes to 2 of 3`);
  });

  it('partition_change: a change never completed; one requested while another was active; a broken chain', () => {
    const open = clean();
    open.partitionChanges![0] = { ...open.partitionChanges![0]!, state: 'reassigning', completedAtMs: null };
    expect(found(open)).toContainEqual({ check: 'partition_change', message: 'change c1 (2 → 3) requested at 10000 never completed (state reassigning)' });
    const two = clean();
    two.partitionChanges!.push({ changeId: 'c2', fromCount: 2, toCount: 1, state: 'completed', requestedAtMs: 11_500, switchedAtMs: 13_000, completedAtMs: 14_000, changer: 'ch', rowsMoved: 0 });
    const v = found(two).filter((x) => x.check === 'partition_change').map((x) => x.message);
    expect(v).toEqual(['change c2 (2 → 1) follows change c1 to 3: it should start from 3', 'change c2 (2 → 1) requested at 11500 while change c1 was active (completed 12000)']);
  });

  it('change_exclusive: a start while the change was reassigning', () => {
    const h = clean();
    h.audit.push({ seq: 26, epoch: 2, holderId: 'ch', action: 'start_attempts', atMs: 11_500, leaseName: L0 });
    expect(found(h)).toContainEqual({ check: 'change_exclusive', message: expect.stringContaining('start_attempts seq 26 by ch (lease L, epoch 2) at 11500, between its switch 11000') });
  });

  it('liveness: a kill whose recovery the change interrupted is judged from the change\'s completion, on any partition', () => {
    const h = clean();
    h.faults.push(kill({})); // partition 1's next start is at 12 450: 5.45 s after the kill, 2.7 × lease, but a change came between
    const { violations, stats } = check(h);
    expect(violations).toEqual([]);
    expect(stats.resumes[1]).toMatchObject({ kind: 'kill', ms: 300 }); // from 12 000 to the first start (partition 0, 12 300)
    const after = clean(); // a kill after the change: judged as always
    after.faults.push(kill({ startedAt: 12_100, endedAt: 12_200, measureFrom: 12_100, partitions: [1] }));
    after.audit.find((a) => a.seq === 34)!.atMs = 18_000;
    expect(found(after)).toContainEqual({ check: 'liveness', message: expect.stringContaining('resumed after 5900 ms') });
  });

  it('liveness of a change: from its completion; a fault begun before that resume (the stop of the new leader) judges it instead', () => {
    const slow = clean();
    slow.audit.find((a) => a.seq === 35)!.atMs = 18_000; // partition 2 started nothing for 6 s after the completion
    slow.attempts[1]!.startedAtMs = 18_000;
    expect(found(slow)).toContainEqual({ check: 'liveness', message: expect.stringContaining('partition_change (2 → 3, victim leader: false, partitions 0,1,2): resumed after 6000 ms') });
    slow.faults.push(kill({ kind: 'stop', startedAt: 12_200, endedAt: 14_700, measureFrom: 12_200, victim: 'h2', partitions: [2],
      exclude: { holderId: 'h2', until: 14_700 } }));
    expect(found(slow).filter((v) => v.check === 'liveness').map((v) => v.message)).toEqual([expect.stringMatching(/^stop \(killed h2, .*resumed after 5800 ms/)]);
  });

  it('liveness of a change: a fault begun before it, still within its own bound at the resume, judges it instead', () => {
    const slow = clean();
    slow.audit.find((a) => a.seq === 35)!.atMs = 18_000; // partition 2 started nothing for 6 s after the completion
    slow.attempts[1]!.startedAtMs = 18_000;
    // A kill at 9 000, before the request: 9 s before the resume, past the 1.70 × lease the kill may take here…
    slow.faults.push(kill({ startedAt: 9_000, endedAt: 9_500, measureFrom: 9_000, partitions: [2] }));
    expect(found(slow).map((v) => v.message)).toContainEqual(expect.stringContaining('partition_change (2 → 3, victim leader: false, partitions 0,1,2): resumed after 6000 ms'));
    // …within the 16.5 × an Azure-like kill may take (its listener locks move once they expire): the kill's rule.
    slow.resumeBoundByKind = { kill: 16.5 };
    expect(found(slow).filter((v) => v.check === 'liveness')).toEqual([]);
  });

  it('liveness of a fault deferred to a change\'s completion: another fault active at the completion judges the resume instead', () => {
    const slow = clean();
    slow.faults.push(kill({})); // judged from the change's completion (12 000)
    slow.audit.find((a) => a.seq === 33)!.atMs = 17_500; // no start on any partition for 5.5 s after the completion
    slow.audit.find((a) => a.seq === 34)!.atMs = 17_500;
    slow.audit.find((a) => a.seq === 35)!.atMs = 17_500;
    slow.attempts[1]!.startedAtMs = 17_500;
    expect(found(slow).filter((v) => v.check === 'liveness').map((v) => v.message)).toContainEqual(expect.stringMatching(/^kill \(killed h2, .*after partition change c1 completed/));
    // A blackhole of the new leader from before the completion until after it: the blackhole's rule judges the resume.
    slow.faults.push(kill({ kind: 'proxy_blackhole', startedAt: 11_500, endedAt: 14_500, measureFrom: 11_500, victim: 'h1', partitions: [0, 1, 2],
      exclude: null, detail: 'blackholed h1' }));
    expect(found(slow).filter((v) => v.check === 'liveness').map((v) => v.message)).not.toContainEqual(expect.stringMatching(/^kill /));
  });

  it('partition_isolation: a pause of the other partitions by a change is the change\'s, not the fault\'s', () => {
    const h = clean();
    h.faults.push(kill({ partitions: [0], victim: 'h1', exclude: { holderId: 'h1', until: Number.POSITIVE_INFINITY } }));
    // partition 1's first start after the kill is at 12 450 (5.45 s: past the bound), but the change paused it
    expect(found(h).filter((v) => v.check === 'partition_isolation')).toEqual([]);
    const after = clean(); // a kill after the change: the same pause is the kill's
    after.faults.push(kill({ startedAt: 12_100, endedAt: 12_200, measureFrom: 12_100, partitions: [0], victim: 'h1', exclude: { holderId: 'h1', until: Number.POSITIVE_INFINITY } }));
    after.audit.find((a) => a.seq === 34)!.atMs = 18_000;
    expect(found(after)).toContainEqual({ check: 'partition_isolation', message: expect.stringContaining('partition 1 (L#1) started nothing for 5900 ms') });
  });

  it('resend_after_2xx: a re-send after the intent moved to a partition whose lease has a lower epoch is a later tenure', () => {
    const h = clean();
    // X's attempt #1 under partition 1's epoch 3 got a 2xx, then h2 was cut off and the switch abandoned it; #2 ran on
    // partition 2 under its epoch 2 (a lower number: another lease).
    h.attempts[0] = { ...h.attempts[0]!, outcome: 'abandoned', httpStatus: null, error: 'abandoned: partition change', finishedAtMs: 11_000 };
    h.provider[0] = { ...h.provider[0]!, status: 200 };
    h.faults.push({ kind: 'proxy_blackhole', slot: 1, victim: 'h2', victimWasLeader: true, epochAtFault: 1, startedAt: 9_060, endedAt: 10_500,
      measureFrom: 9_060, exclude: null, detail: 'blackholed h2', resumedAt: 9_100, partitions: [1] });
    h.events = h.events.filter((e) => !(e.seq === 11)); // h2 never released its epoch of L#1: it expired
    h.audit = h.audit.filter((a) => a.seq !== 6);
    // Partition 1's lease had an epoch before h2's: h2 held epoch 2 of L#1, as high as X#2's epoch 2 of L#2.
    h.events.push({ seq: 0, epoch: 1, holderId: 'h9', event: 'acquired', leaseName: L1 });
    for (const e of [...h.events, ...h.audit]) if (e.leaseName === L1 && e.seq > 0) e.epoch++;
    h.attempts[0]!.epoch = 2;
    h.provider[0]!.epoch = 2;
    const { violations, stats } = check(h);
    expect(violations.filter((v) => v.check === 'resend_after_2xx')).toEqual([]);
    expect(stats).toMatchObject({ resendsAfterFenceRefusal: 1 });
  });
});
