// One partition's permits of the process's guard (src/provider/partitionPermits.ts), table-driven on a fake clock: a
// process leading two partitions of four (cluster cap M) gives each at most its own part of M in flight, so a
// partition with a backlog cannot take the permit of the partition just led; a permit comes back when one of the
// partition's own calls ends; the process's total stays within its share; without a part of its own (cap 0) the
// permits are the guard's as they are.
import { describe, expect, it } from 'vitest';
import { ownPart, shareOf } from '../../src/provider/guardShare.js';
import { ProviderGuard } from '../../src/provider/guard.js';
import { partitionPermits } from '../../src/provider/partitionPermits.js';
import { FakeClock } from '../../src/lease/clock.js';
import type { GuardSettings } from '../../src/limits.js';

const ok = { kind: 'success', httpStatus: 200 } as const;
const settings = (maxInFlight: number): GuardSettings =>
  ({ ratePerSec: 0, maxInFlight, breakerThreshold: 0, breakerCooldownMs: 1_000, retryAfterMaxMs: 60_000 });

/** A process leading `led` of 4 partitions under cap M: the guard with its share, and each led partition's permits
 *  (each may hold `ahead` permits beyond its part, as the executor's ready attempts do). */
function processOf(m: number, led: number[], ahead = 0) {
  const s = settings(m);
  const guard = new ProviderGuard(s, new FakeClock(), () => {}, { share: () => ({ ...shareOf(s, 4, led), leading: led.length > 0, led: led.length }), aheadPerPartition: ahead });
  const part = (k: number) => partitionPermits(guard, () => ownPart(s, 4, k));
  return { guard, permits: new Map(led.map((k) => [k, part(k)])) };
}

describe('partition permits', () => {
  it.each<[string, number, number[], [number, number, number][]]>([
    // [partition, wanted, granted] in order
    ['M = 4, leading 1 and 3: the backlog of 1 takes its own permit only; 3 still gets one', 4, [1, 3], [[1, 16, 1], [3, 16, 1], [1, 16, 0]]],
    ['M = 8, leading 0 and 2: two each', 8, [0, 2], [[0, 16, 2], [2, 16, 2], [0, 1, 0], [2, 1, 0]]],
    ['M = 10, leading 0 and 3: the remainder\'s parts (3 and 2)', 10, [0, 3], [[0, 16, 3], [3, 16, 2]]],
    ['M = 2, leading 2 and 3 (permit-less parts, 1 each): the share (1) bounds the process', 2, [2, 3], [[2, 16, 1], [3, 16, 0]]],
  ])('%s', (_, m, led, steps) => {
    const { guard, permits } = processOf(m, led);
    for (const [k, wanted, granted] of steps) expect(permits.get(k)!.acquire(wanted).granted, `partition ${k}`).toBe(granted);
    expect(guard.state().inFlight).toBeLessThanOrEqual(shareOf(settings(m), 4, led).maxInFlight);
  });

  it('a partition\'s permit comes back when its own call ends (result, inconclusive or unused), not another\'s', () => {
    const { guard, permits } = processOf(4, [1, 3]);
    const [p1, p3] = [permits.get(1)!, permits.get(3)!];
    expect(p1.acquire(5)).toEqual({ granted: 1, heldBy: 'in_flight', retryAtMs: null });
    expect(p3.acquire(5).granted).toBe(1);
    p3.onResult(ok); // partition 3's call ended: its permit, not partition 1's
    expect(p1.acquire(5).granted).toBe(0);
    expect(p3.acquire(5).granted).toBe(1);
    p1.onInconclusive();
    expect(p1.acquire(5).granted).toBe(1);
    p1.release(1); // started fewer than granted
    expect(p1.inFlight).toBe(0);
    expect(guard.state().inFlight).toBe(1);
    expect(guard.state().heldBack.in_flight).toBeGreaterThan(0);
  });

  it('a partition\'s own part bounds its calls sent; up to `ahead` permits beyond it wait for one of its own to end', () => {
    const { guard, permits } = processOf(8, [0, 2], 1); // two each, one more waiting
    const [p0, p2] = [permits.get(0)!, permits.get(2)!];
    expect(p0.acquire(5, 1).granted).toBe(3);
    expect([p0.beginCall(), p0.beginCall(), p0.beginCall(), p0.callLimit()]).toEqual([true, true, false, 2]);
    expect(p2.acquire(2, 1).granted).toBe(2); // partition 2's part is its own, whatever partition 0 holds waiting
    expect([p2.beginCall(), p2.beginCall()]).toEqual([true, true]);
    p2.onResult(ok); // not partition 0's call: its waiting one stays
    expect(p0.beginCall()).toBe(false);
    p0.onResult(ok);
    expect(p0.beginCall()).toBe(true);
    expect([p0.inFlight, guard.state().sent]).toEqual([2, 3]);
    p0.release(1, undefined, true); // let out, then stopped at its gate: the partition's place goes back too
    expect([p0.inFlight, guard.state().sent, p0.beginCall()]).toEqual([1, 2, true]);
  });

  it('M < P: a partition refused by the process\'s share is called back when another partition\'s call ends', async () => {
    const { permits } = processOf(2, [2, 3], 1); // permit-less parts (1 each), the process's share 1
    const [p2, p3] = [permits.get(2)!, permits.get(3)!];
    expect([p2.acquire(1).granted, p2.beginCall()]).toEqual([1, true]);
    expect(p3.acquire(1, 1).granted).toBe(1); // waiting beyond the share
    let woken = 0;
    expect(p3.beginCall(() => woken++)).toBe(false);
    p2.onResult(ok);
    await Promise.resolve();
    expect(woken).toBe(1); // before partition 2's own batch is woken by its call's end
    expect(p3.beginCall()).toBe(true);
    expect(p2.acquire(1).granted).toBe(0); // its turn after partition 3's call
  });

  it('no part of its own (cap 0): the guard\'s grant as it is', () => {
    const s = settings(3);
    const guard = new ProviderGuard(s, new FakeClock());
    const p = partitionPermits(guard, () => 0);
    expect(p.acquire(5)).toEqual({ granted: 3, heldBy: 'in_flight', retryAtMs: null });
    expect(p.inFlight).toBe(3);
  });
});
