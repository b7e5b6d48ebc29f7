// The campaign table: contiguous seeds collapse to ranges (a 200-run table stays readable); the optional rows
// (faults alongside, clock offsets) appear only when the campaign had them; violations are counted by check.
import { describe, expect, it } from 'vitest';
import type { FaultRecord } from './faults.js';
import { campaignTable, seedRanges } from './report.js';
import type { RunResult } from './runOne.js';

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

describe('campaignTable', () => {
  const fault = (kind: FaultRecord['kind'], alongside: boolean): FaultRecord => ({
    kind, slot: 0, victim: 'h', victimWasLeader: !alongside, epochAtFault: 1, startedAt: 0, endedAt: 1, measureFrom: 0,
    exclude: null, detail: '', resumedAt: 1, ...(alongside ? { alongside } : {}),
  });
  const run = (seed: number, faults: FaultRecord[], clockOffsets: Record<string, number>, failed = false): RunResult => ({
    index: seed, seed, faults, stats: null, violations: failed ? [{ check: 'fencing', message: 'stale write' }] : [],
    error: null, dir: '', wallMs: 1, drainMs: 100, clockOffsets, pgRestartsSkipped: seed === 2 ? 1 : 0,
  });

  it('counts faults alongside, clock offsets and violations; omits the optional rows when absent', () => {
    const info = { title: 't', leaseMs: 2_000, resumeBound: 2.5, wallMs: 60_000 };
    const table = campaignTable([
      run(1, [fault('kill', false), fault('proxy_drop', true)], { a: -600, b: 12 }),
      run(2, [fault('stop', false), fault('terminate', true), fault('proxy_drop', true)], { c: 599 }, true),
    ], info);
    expect(table).toContain('| runs (passed / failed) | 2 (1 / 1); seeds 1–2 |');
    expect(table).toContain('| faults injected | 5: proxy_drop 2, kill 1, stop 1, terminate 1 |');
    expect(table).toContain('| … of which ran alongside another fault | proxy_drop 2, terminate 1 |');
    expect(table).toContain('| host wall-clock offsets | 3 processes, -600 s … +599 s |');
    expect(table).toContain('| violations | **1** (fencing 1) |');
    expect(table).toContain('| PostgreSQL restarts replaced by a kill (other tests were running) | 1 |');
    const plain = campaignTable([run(3, [fault('kill', false)], {})], info);
    expect(plain).not.toContain('alongside');
    expect(plain).not.toContain('wall-clock');
    expect(plain).not.toContain('replaced by a kill');
    expect(plain).toContain('| violations | **0** |');
  });
});
