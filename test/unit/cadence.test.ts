// The refresh cadence alone (src/schedule/cadence.ts): which step is due, in what order, and how long to sleep.
import { describe, expect, it } from 'vitest';
import { RefreshCadence, TAIL_SPACING_MS } from '../../src/schedule/cadence.js';

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
