// The campaign table's seed list: contiguous seeds collapse to ranges so a 200-run table stays readable.
import { describe, expect, it } from 'vitest';
import { seedRanges } from './report.js';

describe('seedRanges', () => {
  it.each([
    [[], '—'],
    [[5], '5'],
    [[1, 2, 3], '1–3'],
    [[1, 2, 3, 7, 9, 10], '1–3, 7, 9–10'],
    [[1101, 2202, 3303], '1101, 2202, 3303'],
    [[3, 2, 1], '3, 2, 1'],
  ])('%j → %s', (seeds, want) => {
    expect(seedRanges(seeds)).toBe(want);
  });
});
