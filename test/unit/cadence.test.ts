// The refresh cadence alone (src/schedule/cadence.ts): which step is due, in what order, and how long to sleep.
import { describe, expect, it } from 'vitest';
import { LEAD_CAP_SHARE, RefreshCadence, TailEstimate, TAIL_SPACING_MS } from '../../src/schedule/cadence.js';

const cadence = () => new RefreshCadence({ refreshIntervalMs: 1_000, reconcileIntervalMs: 60_000 });

describe('refresh cadence', () => {
  it('after a full load: nothing until the refresh interval, then one refresh per interval', () => {
    const c = cadence();
    c.loaded(0);
    expect(c.take(999, false)).toBeNull();
    expect(c.untilNextMs(400, false)).toBe(600);
    expect(c.take(1_000, false)).toBe('refresh');
    expect(c.take(1_500, false)).toBeNull();
    expect(c.take(2_000, false)).toBe('refresh');
  });

  it('a notice asks for one tail read, spaced; the interval refresh covers a pending notice', () => {
    const c = cadence();
    c.loaded(0);
    c.noticed();
    expect(c.untilNextMs(100, false)).toBe(0);
    expect(c.take(100, false)).toBe('tail');
    expect(c.take(101, false)).toBeNull(); // read: nothing pending
    c.noticed();
    expect(c.untilNextMs(105, false)).toBe(100 + TAIL_SPACING_MS - 105);
    expect(c.take(105, false)).toBeNull(); // spaced
    expect(c.take(100 + TAIL_SPACING_MS, false)).toBe('tail');
    c.noticed();
    expect(c.take(1_000, false)).toBe('refresh'); // the refresh reads past the tail too
    expect(c.take(1_100, false)).toBeNull();
  });

  it('reconcile when its interval is due (after refresh and tail reads); its pages come before the next reconcile', () => {
    const c = cadence();
    c.loaded(0);
    expect(c.take(60_000, false)).toBe('refresh');
    expect(c.take(60_000, false)).toBe('reconcile');
    expect(c.untilNextMs(60_001, true)).toBe(0);
    expect(c.take(60_001, true)).toBe('reconcilePage');
    expect(c.take(61_000, true)).toBe('refresh'); // the refresh goes on during a reconcile
    expect(c.take(61_001, true)).toBe('reconcilePage');
    expect(c.take(61_002, false)).toBeNull();
    expect(c.untilNextMs(61_002, false)).toBe(998);
  });

  it('before any load, everything is due at once (a new epoch rebuilds first)', () => {
    const c = cadence();
    expect(c.take(0, false)).toBe('refresh');
    expect(c.take(0, false)).toBe('reconcile');
  });

});

/** One interval refresh driven by the injected times: the loop wakes `lateMs` past the planned begin, the read (and
 *  the control row) takes `readMs`, then one fenced START of `startMs`. Returns when it began and its lead then. */
function cycle(c: RefreshCadence, at: { now: number }, { lateMs, readMs, startMs }: { lateMs: number; readMs: number; startMs: number }) {
  const lead = c.refreshLeadMs;
  const planned = at.now + c.untilNextMs(at.now, false);
  const begin = planned + lateMs;
  expect(c.take(planned - 1, false)).toBeNull(); // not before its planned time
  expect(c.take(begin, false)).toBe('refresh');
  c.refreshRead(begin + readMs);
  c.startTook(startMs);
  at.now = begin + readMs + startMs;
  return { begin, lead };
}

describe('refresh cadence: the early start that keeps pickup within the interval', () => {
  const I = 1_000;
  const cap = LEAD_CAP_SHARE * I;
  // Steady overhead per refresh (late + read + START, all from the injected clock) → the lead it settles at, and the
  // spacing between refresh begins. Pickup of an intent committed just after a refresh began ≤ spacing + read + START.
  it.each([
    { name: 'no overhead: one refresh per interval', lateMs: 0, readMs: 0, startMs: 0, lead: 0 },
    { name: 'timer 2 ms late, read 5 ms, START 8 ms', lateMs: 2, readMs: 5, startMs: 8, lead: 15 },
    { name: 'loaded machine: 20 + 20 + 30 ms', lateMs: 20, readMs: 20, startMs: 30, lead: 70 },
    { name: 'slow database: 150 ms read, capped', lateMs: 5, readMs: 150, startMs: 40, lead: cap },
  ])('$name → lead $lead ms', ({ lateMs, readMs, startMs, lead }) => {
    const c = new RefreshCadence({ refreshIntervalMs: I, reconcileIntervalMs: 3_600_000 });
    const at = { now: 0 };
    c.loaded(0);
    const begins: number[] = [];
    for (let i = 0; i < 200; i++) begins.push(cycle(c, at, { lateMs, readMs, startMs }).begin);
    expect(c.refreshLeadMs).toBeCloseTo(lead, 6);
    const spacing = begins.at(-1)! - begins.at(-2)!;
    expect(spacing).toBeCloseTo(I - lead + lateMs, 6);
    // The promise: commit just after a refresh began → its START done, within the interval (unless capped).
    const pickup = spacing + readMs + startMs;
    if (lead < cap) expect(pickup).toBeLessThanOrEqual(I + 1e-6);
    else expect(pickup).toBeGreaterThan(I); // past the cap the interval is not kept: more refreshes would not help
  });

  it('the first refresh after a load, and one after a long pause, teach it nothing / at most one interval', () => {
    const c = new RefreshCadence({ refreshIntervalMs: I, reconcileIntervalMs: 3_600_000 });
    expect(c.take(0, false)).toBe('refresh'); // never loaded: not planned
    c.refreshRead(5_000);
    expect(c.refreshLeadMs).toBe(0);
    c.loaded(10_000);
    expect(c.take(11_000, false)).toBe('refresh'); // the first after a load: planned at load + interval
    c.refreshRead(11_004);
    expect(c.refreshLeadMs).toBeCloseTo(4 + 4 * 2, 6); // one sample x: mean x, deviation x / 2
    expect(c.take(60_000, false)).toBe('refresh'); // a leader paused for a minute
    c.refreshRead(60_001);
    expect(c.refreshLeadMs).toBe(cap); // sampled as one interval, capped
    const at = { now: 60_001 };
    for (let i = 0; i < 60; i++) cycle(c, at, { lateMs: 1, readMs: 3, startMs: 0 });
    expect(c.refreshLeadMs).toBeLessThan(10); // and it decays back
  });

  it('a slow START alone moves the refresh (capped); notice tail reads and the reconcile keep their own spacing', () => {
    const c = new RefreshCadence({ refreshIntervalMs: I, reconcileIntervalMs: 60_000 });
    c.loaded(0);
    c.startTook(50); // estimate 50 + 4 × 25 = 150
    expect(c.refreshLeadMs).toBe(cap);
    expect(c.untilNextMs(0, false)).toBe(I - cap);
    c.noticed();
    expect(c.take(10, false)).toBe('tail'); // a tail read is not moved by the lead
    expect(c.take(I - cap, false)).toBe('refresh');
    expect(c.untilNextMs(I - cap, false)).toBe(I - cap);
    expect(c.take(60_000, false)).toBe('refresh');
    expect(c.take(60_000, false)).toBe('reconcile'); // the reconcile keeps its interval
  });
});

describe('tail estimate (mean + 4 mean deviations)', () => {
  it.each([
    { samples: [], ms: 0 },
    { samples: [10], ms: 30 },
    { samples: Array(100).fill(10), ms: 10 },
    { samples: [...Array(100).fill(10), 50], ms: 10 + 40 / 8 + 4 * (40 / 4) }, // one outlier: 55, not 50
  ])('$samples.length samples → $ms', ({ samples, ms }) => {
    const e = new TailEstimate();
    for (const x of samples) e.sample(x);
    expect(e.ms).toBeCloseTo(ms, 1);
  });
});
