// The share of the cluster-wide provider limits (issue 25, src/provider/guardShare.ts), table-driven: a process's
// share follows the partitions it leads; over any assignment of the partitions to processes the shares add up to
// the cluster's limits (exactly for the rate; for the in-flight cap exactly when it is at least P, else at most one
// more per leader of only permit-less partitions); one partition = the limits themselves. Then the guard using a
// share that changes with leadership (fake clock), and holds another process recorded.
import { describe, expect, it } from 'vitest';
import { fitsShare, partitionInFlightQuota, shareOf, type Limits, type Share } from '../../src/provider/guardShare.js';
import { ProviderGuard } from '../../src/provider/guard.js';
import { FakeClock } from '../../src/lease/clock.js';
import { createClusterGuard } from '../../src/provider/clusterGuard.js';
import { silentLogger } from '../../src/observability/logger.js';
import type { GuardSettings } from '../../src/limits.js';

describe('shareOf', () => {
  it.each<[string, Limits, number, number[], Share]>([
    ['one partition: the limits themselves', { ratePerSec: 20, maxInFlight: 16 }, 1, [0], { ratePerSec: 20, maxInFlight: 16, parts: 16 }],
    ['one partition, leading nothing: the same', { ratePerSec: 20, maxInFlight: 16 }, 1, [], { ratePerSec: 20, maxInFlight: 16, parts: 16 }],
    ['unlimited stays unlimited', { ratePerSec: 0, maxInFlight: 0 }, 4, [1, 2], { ratePerSec: 0, maxInFlight: 0, parts: 0 }],
    ['all partitions: the whole', { ratePerSec: 40, maxInFlight: 10 }, 4, [0, 1, 2, 3], { ratePerSec: 40, maxInFlight: 10, parts: 10 }],
    ['2 of 4, the partitions with the remainder', { ratePerSec: 40, maxInFlight: 10 }, 4, [0, 1], { ratePerSec: 20, maxInFlight: 6, parts: 6 }],
    ['2 of 4, the others', { ratePerSec: 40, maxInFlight: 10 }, 4, [2, 3], { ratePerSec: 20, maxInFlight: 4, parts: 4 }],
    ['1 of 4', { ratePerSec: 40, maxInFlight: 10 }, 4, [3], { ratePerSec: 10, maxInFlight: 2, parts: 2 }],
    ['a fractional rate', { ratePerSec: 1, maxInFlight: 4 }, 4, [2], { ratePerSec: 0.25, maxInFlight: 1, parts: 1 }],
    ['cap below P: a permit-less partition still gets 1', { ratePerSec: 10, maxInFlight: 2 }, 4, [3], { ratePerSec: 2.5, maxInFlight: 1, parts: 1 }],
    // parts: the led partitions' own parts, each at least 1 (more than the share with M < P), 0 leading nothing.
    ['cap below P: permits of the partitions led', { ratePerSec: 10, maxInFlight: 2 }, 4, [0, 1, 3], { ratePerSec: 7.5, maxInFlight: 2, parts: 3 }],
    ['leading nothing: the smallest part, never 0 (unlimited)', { ratePerSec: 40, maxInFlight: 10 }, 4, [], { ratePerSec: 10, maxInFlight: 2, parts: 0 }],
    ['leading nothing, cap below P', { ratePerSec: 40, maxInFlight: 3 }, 4, [], { ratePerSec: 10, maxInFlight: 1, parts: 0 }],
  ])('%s', (_, cluster, partitions, led, want) => {
    expect(shareOf(cluster, partitions, led)).toEqual(want);
  });

  it.each([[10, 4], [16, 4], [4, 4], [7, 3], [64, 8], [100, 7]])('in-flight parts of %s over %s partitions add up to it and differ by at most 1', (m, p) => {
    const parts = Array.from({ length: p }, (_, k) => partitionInFlightQuota(m, p, k));
    expect(parts.reduce((a, b) => a + b, 0)).toBe(m);
    expect(Math.max(...parts) - Math.min(...parts)).toBeLessThanOrEqual(1);
  });

  /** Every assignment of P partitions to `procs` processes (each partition to one process, or to none). */
  function* assignments(p: number, procs: number): Generator<number[][]> {
    const owner = new Array<number>(p).fill(0);
    for (;;) {
      yield Array.from({ length: procs }, (_, i) => owner.flatMap((o, k) => (o === i ? [k] : [])));
      let k = 0;
      while (k < p && ++owner[k]! > procs) owner[k++] = 0; // owner procs = unled
      if (k === p) return;
    }
  }

  it.each([[40, 10, 4, 3], [30, 8, 4, 2], [7, 5, 3, 3], [40, 2, 4, 3], [1, 1, 4, 4]])(
    'rate %s, cap %s, P %s over %s processes: every assignment keeps the sum within the cluster limits', (rate, cap, p, procs) => {
      for (const a of assignments(p, procs)) {
        const leading = a.filter((led) => led.length > 0);
        const shares = leading.map((led) => shareOf({ ratePerSec: rate, maxInFlight: cap }, p, led));
        const ledCount = leading.reduce((n, led) => n + led.length, 0);
        expect(shares.reduce((n, s) => n + s.ratePerSec, 0)).toBeCloseTo((rate * ledCount) / p, 9);
        const inFlight = shares.reduce((n, s) => n + s.maxInFlight, 0);
        const permitLess = leading.filter((led) => led.every((k) => partitionInFlightQuota(cap, p, k) === 0)).length;
        expect(inFlight).toBeLessThanOrEqual(cap + permitLess);
        if (cap >= p) expect(inFlight).toBeLessThanOrEqual(cap);
        if (ledCount === p && cap >= p) expect(inFlight).toBe(cap);
      }
    });
});

describe('fitsShare (the release condition)', () => {
  // A process lets a partition's lease go only once its calls in flight fit the share of the partitions it keeps.
  it.each<[string, number, Limits, number, number[], boolean]>([
    ['keeping nothing, calls out: wait', 1, { ratePerSec: 0, maxInFlight: 4 }, 2, [], false],
    ['keeping nothing, none out: release', 0, { ratePerSec: 0, maxInFlight: 4 }, 2, [], true],
    ['4 out, keeping 1 of 2 (quota 2): wait', 4, { ratePerSec: 0, maxInFlight: 4 }, 2, [1], false],
    ['3 out, keeping 1 of 2 (quota 2): wait', 3, { ratePerSec: 0, maxInFlight: 4 }, 2, [1], false],
    ['2 out, keeping 1 of 2 (quota 2): release', 2, { ratePerSec: 0, maxInFlight: 4 }, 2, [1], true],
    ['uneven parts: keeping partition 0 of 3 (quota 3 of 8)', 3, { ratePerSec: 0, maxInFlight: 8 }, 3, [0], true],
    ['uneven parts: keeping partition 2 of 3 (quota 2 of 8)', 3, { ratePerSec: 0, maxInFlight: 8 }, 3, [2], false],
    ['keeping 3 of 4 (quota 8 of 10)', 8, { ratePerSec: 0, maxInFlight: 10 }, 4, [0, 1, 3], true],
    ['keeping 3 of 4, one over', 9, { ratePerSec: 0, maxInFlight: 10 }, 4, [0, 1, 3], false],
    ['cap below P, keeping a permit-less partition: its one call', 1, { ratePerSec: 0, maxInFlight: 2 }, 4, [3], true],
    ['unlimited: always', 50, { ratePerSec: 0, maxInFlight: 0 }, 4, [], true],
    ['one partition, keeping it', 4, { ratePerSec: 0, maxInFlight: 4 }, 1, [0], true],
    ['one partition, letting it go with calls out', 1, { ratePerSec: 0, maxInFlight: 4 }, 1, [], false],
  ])('%s', (_, inFlight, cluster, partitions, kept, want) => {
    expect(fitsShare(inFlight, cluster, partitions, kept)).toBe(want);
  });

  it('over every assignment, released partitions moved to new leaders at their quota never exceed the cap', () => {
    // Process A leads `a`, hands back `gone` ⊆ a, and releases only when fitsShare; then B leads `gone` at its quota.
    const M = 6;
    const P = 4;
    for (let mask = 1; mask < 1 << P; mask++) {
      const a = [0, 1, 2, 3].filter((k) => mask & (1 << k));
      for (let sub = 1; sub < 1 << a.length; sub++) {
        const gone = a.filter((_, i) => sub & (1 << i));
        const kept = a.filter((k) => !gone.includes(k));
        for (let out = 0; out <= shareOf({ ratePerSec: 0, maxInFlight: M }, P, a).maxInFlight; out++) {
          if (!fitsShare(out, { ratePerSec: 0, maxInFlight: M }, P, kept)) continue;
          const b = gone.reduce((n, k) => n + partitionInFlightQuota(M, P, k), 0);
          expect(out + b).toBeLessThanOrEqual(M);
        }
      }
    }
  });
});

describe('ProviderGuard with a share (fake clock)', () => {
  it.each<[string, number]>([['after leading nothing for 10 s', 10_000], ['at once', 0]])(
    'a new leader starts with an empty bucket (%s): it never bursts on top of the previous holder', (_, idleMs) => {
      const clock = new FakeClock();
      let led: number[] = [];
      const g = new ProviderGuard(S, clock, () => {}, { share: () => ({ ...shareOf(S, 4, led), leading: led.length > 0 }) });
      clock.advance(idleMs);
      g.shareChanged();
      led = [0, 1]; // 20/s: burst 2
      g.shareChanged(); // the lease was acquired
      expect(g.acquire(10).granted).toBe(0);
      clock.advance(50);
      expect(g.acquire(10).granted).toBe(1);
      clock.advance(5_000);
      expect(g.acquire(10).granted).toBe(2); // a full bucket only once it has led long enough
      led = [];
      g.shareChanged(); // lost
      clock.advance(5_000);
      led = [2];
      g.shareChanged();
      expect(g.acquire(10).granted).toBe(0);
    });

  const S: GuardSettings = { ratePerSec: 40, maxInFlight: 8, breakerThreshold: 0, breakerCooldownMs: 1_000, retryAfterMaxMs: 60_000 };

  it('follows leadership at each acquire: the in-flight cap and the rate of the partitions led', () => {
    const clock = new FakeClock();
    let led: number[] = [0];
    const g = new ProviderGuard(S, clock, () => {}, { share: () => shareOf(S, 4, led) });
    expect(g.acquire(10).granted).toBe(0); // a fresh share starts with an empty bucket
    expect(g.limits()).toEqual({ ratePerSec: 10, maxInFlight: 2 });
    clock.advance(100);
    expect(g.acquire(10).granted).toBe(1); // rate 10/s: burst 1
    clock.advance(1_000);
    expect(g.acquire(10).granted).toBe(1); // still a burst of 1, and 1 of the 2 permits left
    expect(g.acquire(10)).toMatchObject({ granted: 0, heldBy: 'in_flight' });
    led = [0, 1, 2, 3];
    clock.advance(1_000);
    expect(g.acquire(10).granted).toBe(1); // the bucket filled at the old rate (burst 1) until now
    expect(g.limits()).toEqual({ ratePerSec: 40, maxInFlight: 8 });
    clock.advance(100);
    expect(g.acquire(10).granted).toBe(4); // from now at 40/s: burst 4 (cap 8 − 3 out)
    led = [3];
    clock.advance(1_000);
    expect(g.acquire(1)).toMatchObject({ granted: 0, heldBy: 'in_flight' }); // 7 out above the new cap of 2
    for (let i = 0; i < 6; i++) g.onResult({ kind: 'success', httpStatus: 200 });
    expect(g.acquire(5).granted).toBe(1);
  });

  it('over 10 s, a rate that halves half-way grants the sum of both halves (within one burst each)', () => {
    const clock = new FakeClock();
    let led = [0, 1];
    const g = new ProviderGuard(S, clock, () => {}, { share: () => shareOf(S, 4, led) });
    let granted = 0;
    for (let t = 0; t < 10_000; t += 5) {
      if (t === 5_000) led = [0];
      const n = g.acquire(50).granted;
      granted += n;
      for (let i = 0; i < n; i++) g.onResult({ kind: 'success', httpStatus: 200 });
      clock.advance(5);
    }
    expect(granted).toBeLessThanOrEqual(20 * 5 + 10 * 5 + 2 + 1);
    expect(granted).toBeGreaterThanOrEqual(Math.floor((20 * 5 + 10 * 5) * 0.95));
  });

  it('holds another process recorded: a breaker until it closes (lifted when read closed), a pause only ever extended', () => {
    const clock = new FakeClock();
    const g = new ProviderGuard(S, clock);
    g.holdFor('breaker_open', 500);
    expect(g.acquire(1)).toEqual({ granted: 0, heldBy: 'breaker_open', retryAtMs: 500 });
    expect(g.state()).toMatchObject({ breaker: 'closed', remoteOpenForMs: 500 });
    g.holdFor('breaker_open', 0); // read again: recorded closed
    expect(g.acquire(1).granted).toBe(1);
    g.holdFor('retry_after', 300);
    g.holdFor('retry_after', 100);
    clock.advance(200);
    expect(g.acquire(1)).toMatchObject({ granted: 0, heldBy: 'retry_after', retryAtMs: 300 });
    clock.advance(100);
    expect(g.acquire(1).granted).toBe(1);
  });

  it('a Retry-After it sees is reported once per extension, for the others', () => {
    const clock = new FakeClock();
    const pauses: number[] = [];
    const g = new ProviderGuard(S, clock, () => {}, { onPause: (ms) => pauses.push(ms) });
    const busy = (ms: number) => ({ kind: 'retryable' as const, httpStatus: 429, error: 'HTTP 429', retryAfterMs: ms });
    g.acquire(3);
    g.onResult(busy(1_000));
    g.onResult(busy(500)); // ends earlier: not an extension
    clock.advance(100);
    g.onResult(busy(1_000));
    expect(pauses).toEqual([1_000, 1_000]);
  });
});

describe('the cluster guard\'s release condition counts calls sent', () => {
  it('a kept partition\'s attempts waiting to be sent do not hold a hand-back; its calls sent do', async () => {
    const led = [0, 2];
    const store = { recordProviderBreaker: async () => {}, recordProviderPause: async () => {}, getProviderHold: async () => null };
    const cg = createClusterGuard({ guard: { ratePerSec: 0, maxInFlight: 8, breakerThreshold: 0, breakerCooldownMs: 1_000, retryAfterMaxMs: 60_000 },
      partitionCount: () => 4, leaseName: 'sm', holderId: 'h', syncMs: 60_000, aheadPerPartition: 2 },
    store as never, new FakeClock(), silentLogger, { breakerChanged: () => {} } as never, () => led);
    try {
      const p0 = cg.permitsFor(0);
      expect(p0.acquire(4, 2).granted).toBe(4); // its part (2) and 2 waiting
      expect([p0.beginCall(), p0.beginCall()]).toEqual([true, true]);
      led.splice(1, 1); // partition 2 handed back: the share is partition 0's part, 2
      expect(cg.fits()).toBe(true); // 2 sent fit; the 2 waiting are no calls
      led.splice(0, 1); // nothing kept: only with nothing sent
      expect(cg.fits()).toBe(false);
      p0.onResult({ kind: 'success', httpStatus: 200 });
      p0.onResult({ kind: 'success', httpStatus: 200 });
      expect(cg.fits()).toBe(true);
    } finally {
      await cg.stop();
    }
  });
});
