// UUIDv7 ids: canonical form, version/variant bits, the timestamp, and strict increase (also within one
// millisecond and when the clock steps back).
import { describe, expect, it } from 'vitest';
import { isUuid, uuidv7 } from '../../src/intents/ids.js';

const V7 = /^[0-9a-f]{8}-[0-9a-f]{4}-7[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$/;

describe('uuidv7', () => {
  it('is lower-case v7, variant 10, carrying the millisecond timestamp', () => {
    const now = Date.UTC(2031, 4, 6, 7, 8, 9, 123);
    const id = uuidv7(now + 1e6); // later than any id made so far in this process
    expect(id).toMatch(V7);
    expect(isUuid(id)).toBe(true);
    expect(parseInt(id.replace(/-/g, '').slice(0, 12), 16)).toBe(now + 1e6);
  });

  it('strictly increases: many per millisecond, across a pool refill, and when the clock goes back', () => {
    const t = Date.UTC(2032, 0, 1);
    const ids = [...Array.from({ length: 3_000 }, () => uuidv7(t)), uuidv7(t - 5_000), ...Array.from({ length: 3_000 }, (_, i) => uuidv7(t + 1 + (i >> 10)))];
    for (const id of ids) expect(id).toMatch(V7);
    for (let i = 1; i < ids.length; i++) expect(ids[i]! > ids[i - 1]!).toBe(true);
    expect(new Set(ids.map((s) => s.slice(19))).size).toBeGreaterThan(ids.length - 2); // rand_b differs
  });
});
