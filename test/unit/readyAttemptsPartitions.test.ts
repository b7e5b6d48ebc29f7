// Partitions of one process, each its own leader's batch with ready attempts, on one real guard as production
// wires it (createClusterGuard: the process's share of PROVIDER_MAX_IN_FLIGHT, each partition's own part), on one fake
// clock:
//  - both led: the calls out never exceed the cap nor a partition's part, and every permitted slot stays busy in both
//    all along (neither starves the other, each keeps its ready queue). The parts are judged where calls go out
//    (beginCall); the batch asks permits within them already (startRoom counts callLimit);
//  - one partition handed back while its calls are out: the share drops to the other's part at once, the other
//    sends nothing new while the calls out exceed it, and is woken by the handed-back partition's call ends (the
//    guard's call-back), not only by its own; so is a START the share refused (a rate limit: nothing started ahead);
//  - permit-less partitions (PROVIDER_MAX_IN_FLIGHT below the partition count) sharing one call: all send, paced by a
//    rate limit or starting ahead.
import { afterEach, describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/lease/clock.js';
import { silentLogger } from '../../src/observability/logger.js';
import type { AppMetrics } from '../../src/observability/metrics.js';
import { createClusterGuard } from '../../src/provider/clusterGuard.js';
import type { GuardSettings } from '../../src/limits.js';
import { CALL_MS, harness, START_MS } from '../support/readyHarness.js';

/** Guards to stop after each test (HoldSync's timer), passed or not. */
const guards: { stop(): Promise<void> }[] = [];
afterEach(async () => {
  await Promise.all(guards.splice(0).map((g) => g.stop()));
});

/** A process leading partitions `led` of `partitions` (default 0 and 1 of 2) under PROVIDER_MAX_IN_FLIGHT `maxInFlight`
 *  and a rate limit (0: none), concurrency 4 and start batch 1 in each, 40 due intents each; `h[i]`: partition led[i]. */
function processOf(maxInFlight: number, o: { partitions?: number; led?: number[]; ratePerSec?: number } = {}) {
  const clock = new FakeClock();
  let counted = o.led ?? [0, 1];
  const settings: GuardSettings = { ratePerSec: o.ratePerSec ?? 0, maxInFlight, breakerThreshold: 0, breakerCooldownMs: 10_000,
    retryAfterMaxMs: 30_000 };
  const holds = { getProviderHold: async () => null, recordProviderBreaker: async () => {}, recordProviderPause: async () => {} };
  const cg = createClusterGuard({ guard: settings, partitionCount: () => o.partitions ?? 2, leaseName: 'sm', holderId: 'h',
    syncMs: 3_600_000, aheadPerPartition: 2 }, holds as never, clock, silentLogger, { breakerChanged: () => {} } as unknown as AppMetrics,
  () => counted);
  guards.push(cg);
  const calls = { now: 0, max: 0 };
  const h = counted.map((k) => harness({ concurrency: 4, startBatch: 1, dueAt: Array.from({ length: 40 }, () => 0), clock, calls,
    permits: cg.permitsFor(k), token: { leaseName: `sm-p${k}`, holderId: 'h', leaseEpoch: 3 }, prefix: `p${k}-` }));
  const inFlight = (i: number) => h[i]!.events.filter((e) => e.kind === 'send').length - h[i]!.events.filter((e) => e.kind === 'end').length;
  // As a hand-back does: the partition stops counting (the guard re-reads the share at its next grant or send).
  const handBack = (k: number) => { counted = counted.filter((x) => x !== k); };
  return { clock, cg, h, calls, inFlight, handBack };
}

describe('partitions of one process on one guard', () => {
  it('both led, cap 4 (parts 2 + 2): never more than the cap or a part out, every permitted slot busy in both', async () => {
    const p = processOf(4);
    const runs = p.h.map((x) => x.batch(600).run());
    let mostReady = [0, 0];
    for (let t = 1; t <= 600; t++) {
      await p.h[0]!.runUntil(t);
      mostReady = mostReady.map((m, k) => Math.max(m, p.h[k]!.state.readyAttempts));
      if (t >= 5) expect([p.inFlight(0), p.inFlight(1)]).toEqual([2, 2]); // from the first START's return: never a slot idle
    }
    expect(await Promise.all(runs)).toEqual(['deadline', 'deadline']);
    expect([p.calls.max, p.h[0]!.calls.max, p.h[1]!.calls.max]).toEqual([4, 2, 2]);
    expect(mostReady.every((m) => m > 1)).toBe(true); // each keeps attempts ready beyond its part
    for (const x of p.h) expect(x.sent().length).toBeGreaterThanOrEqual(Math.floor(600 / CALL_MS) * 2);
    await p.h[0]!.runUntil(800); // every call answered; what the batches left ready keeps its permit for their next batch
    const ready = p.h[0]!.state.readyAttempts + p.h[1]!.state.readyAttempts;
    expect([p.cg.guard.state().sent, p.cg.guard.state().inFlight]).toEqual([0, ready]);
  });

  it('partition 1 handed back with calls out: partition 0 keeps within the lowered share and is woken by 1\'s call ends', async () => {
    const p = processOf(4);
    const batches = p.h.map((x) => x.batch(600));
    const run0 = batches[0]!.run();
    await p.h[0]!.runUntil(30); // partition 1's calls 30 ms after partition 0's: their ends never coincide
    const run1 = batches[1]!.run();
    await p.h[0]!.runUntil(140);
    expect([p.inFlight(0), p.inFlight(1)]).toEqual([2, 2]);
    p.h[1]!.ctl.stop = 'draining';
    batches[1]!.interrupt(); // as the hand-back drains it
    p.handBack(1); // the share is partition 0's part now: 2 calls
    let woken: { sends: number; ownEnds: number } | null = null;
    for (let t = 141; t <= 600; t++) {
      const [sends0, ends0, out1] = [p.h[0]!.sent().length, p.h[0]!.events.filter((e) => e.kind === 'end').length, p.inFlight(1)];
      await p.h[0]!.runUntil(t);
      if (p.h[0]!.sent().length > sends0) expect(p.calls.now).toBeLessThanOrEqual(2); // a send only into the lowered share
      if (out1 > 0 && p.inFlight(1) === 0) {
        woken = { sends: p.h[0]!.sent().length - sends0, ownEnds: p.h[0]!.events.filter((e) => e.kind === 'end').length - ends0 };
      }
    }
    expect(await run1).toBe('draining');
    expect(await run0).toBe('deadline');
    // Partition 0's own calls had all ended, its sends refused while 1's were out: 1's last call end sends them.
    expect(woken).toEqual({ sends: 2, ownEnds: 0 });
    expect(p.h[0]!.calls.max).toBe(2);
    await p.h[0]!.runUntil(800);
    expect(p.cg.guard.state().sent).toBe(0);
  });

  it('a rate limit (nothing started ahead), partition 1 handed back with calls out: 0\'s START, refused meanwhile, goes as they end', async () => {
    const p = processOf(4, { ratePerSec: 100_000 });
    const b1 = p.h[1]!.batch(1_000);
    const run1 = b1.run();
    await p.h[0]!.runUntil(10); // partition 1: 2 calls out until 52 ms
    p.h[1]!.ctl.stop = 'draining';
    b1.interrupt();
    p.handBack(1); // the share is partition 0's part: 2, both held by 1's calls
    const run0 = p.h[0]!.batch(1_000).run();
    let first = -1;
    for (let t = 11; t <= 200 && first < 0; t++) {
      await p.h[0]!.runUntil(t);
      if (p.h[0]!.sent().length > 0) first = t;
    }
    // Not before 1's calls ended (the share), and at once after (was: at partition 0's next refresh step).
    expect(first).toBeGreaterThanOrEqual(2 + CALL_MS);
    expect(first).toBeLessThanOrEqual(2 + CALL_MS + START_MS + 1);
    await p.h[0]!.runUntil(1_100);
    expect(await Promise.all([run0, run1])).toEqual(['deadline', 'draining']);
  });

  it('PROVIDER_MAX_IN_FLIGHT 2 below 4 partitions, the process leading the two permit-less ones (share 1), a rate limit: both send', async () => {
    const p = processOf(2, { partitions: 4, led: [2, 3], ratePerSec: 100_000 });
    const runs = p.h.map((x) => x.batch(1_000).run());
    await p.h[0]!.runUntil(1_000);
    expect(await Promise.all(runs)).toEqual(['deadline', 'deadline']);
    const sent = p.h.map((x) => x.sent().length);
    expect(p.calls.max).toBe(1);
    expect(sent[0]! + sent[1]!).toBeGreaterThanOrEqual(18); // one call at a time, each woken by the other's end
    expect(Math.min(...sent)).toBeGreaterThanOrEqual(5); // was [20, 0]: the other woken only at its refresh step, too late
  });

  it('PROVIDER_MAX_IN_FLIGHT 2 below 16 partitions, the process leading 8 permit-less ones (share 1), none paced: all send', async () => {
    const p = processOf(2, { partitions: 16, led: [2, 3, 4, 5, 6, 7, 8, 9] });
    const runs = p.h.map((x) => x.batch(3_000).run());
    await p.h[0]!.runUntil(3_000);
    expect(new Set(await Promise.all(runs))).toEqual(new Set(['deadline']));
    const sent = p.h.map((x) => x.sent().length);
    expect(p.calls.max).toBe(1);
    expect(sent.reduce((a, b) => a + b, 0)).toBeGreaterThanOrEqual(55); // one call at a time, 50 ms each, all along
    // Each may hold its own part (1) and its ahead room: the process's room counts the parts, not the share (1),
    // else the first ones' waiting attempts took it all and two partitions sent nothing ([34, 34, 33, 33, 33, 33, 0, 0]).
    expect(Math.min(...sent)).toBeGreaterThanOrEqual(3);
  });
});
