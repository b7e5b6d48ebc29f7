// The pause of execution around a partition count change, judged in the product's own records, not in the runner's
// wall time: from the last attempt started before the change's switch to the first started after its completion
// (database times), counted in the ticks the processes actually ran (each timer's invocations that began and ended
// inside it: tick_summary), so a loaded machine's slower ticks do not count against it. The bound the settings give
// in time (pauseBoundMs: the drain, the changer's tick, the leaders' next tick) is that many tick periods; the resume,
// from the switch (the drain's end) to the first start, the leaders' next tick with their layout poll (resumeBoundMs).
// A change that waited, say, for leases to expire instead of their hand-back counts more ticks.
import { expect } from 'vitest';
import { arrivalGap } from '../chaos/checkerChanges.js';
import type { History } from '../chaos/checker.js';
import { shortestPeriodMs } from '../../src/limits.js';
import { CHANGE_ENV, pauseBoundMs, resumeBoundMs } from './changeCluster.js';
import type { Invocation } from './timerLog.js';

export interface ChangePause {
  change: string;
  /** Ticks of the busiest timer inside the pause, and between the switch and the first start after the completion. */
  pauseTicks: number;
  resumeTicks: number;
  /** Shown, not judged: the same spans in milliseconds (database times; provider arrivals for the gap). */
  pauseMs: number;
  arrivalGapMs: number | null;
  switchToResumeMs: number;
  rowsMoved: number;
}

/** The pause around each of `changeIds` in `history`, counted in `ticks` (timerInvocations of the hosts' logs). */
export function changePauses(history: History, ticks: Invocation[], arrivals: number[], changeIds: string[]): ChangePause[] {
  const starts = history.attempts.map((a) => a.startedAtMs!).sort((a, b) => a - b);
  const timers = [...new Set(ticks.map((t) => `${t.holderId}#${t.partition}`))];
  const ticksWithin = (from: number, to: number) => Math.max(...timers.map((k) =>
    ticks.filter((t) => `${t.holderId}#${t.partition}` === k && t.startMs >= from && t.endMs <= to).length));
  return changeIds.map((id) => {
    const c = history.partitionChanges!.find((x) => x.changeId === id)!;
    const before = Math.max(...starts.filter((t) => t <= c.switchedAtMs!));
    const after = Math.min(...starts.filter((t) => t >= c.completedAtMs!));
    return { change: `${c.fromCount} → ${c.toCount}`, pauseTicks: ticksWithin(before, after), resumeTicks: ticksWithin(c.switchedAtMs!, after),
      pauseMs: Math.round(after - before), arrivalGapMs: arrivalGap(arrivals, c), switchToResumeMs: Math.round(after - c.switchedAtMs!),
      rowsMoved: c.rowsMoved };
  });
}

/** Asserts each change's pause within the drain + one tick, and its resume within one tick of the switch, in ticks. */
export function expectPausesWithinBounds(label: string, history: History, ticks: Invocation[], arrivals: number[], changeIds: string[]): ChangePause[] {
  const { drainMs, boundMs } = pauseBoundMs();
  const tickMs = shortestPeriodMs(CHANGE_ENV.EXECUTOR_SCHEDULE!);
  const [pauseTicks, resumeTicks] = [Math.ceil(boundMs / tickMs), Math.ceil(resumeBoundMs() / tickMs)];
  const pauses = changePauses(history, ticks, arrivals, changeIds);
  console.log(`[${label}] pauses (bound ${pauseTicks} ticks = ${boundMs} ms, drain ${drainMs} ms; resume ${resumeTicks} ticks): ${JSON.stringify(pauses)}`);
  expect(ticks.length, 'the hosts logged their ticks').toBeGreaterThan(0);
  for (const p of pauses) {
    expect(Number.isFinite(p.pauseMs), `${p.change}: attempts started before its switch and after its completion`).toBe(true);
    expect(p.pauseTicks, `ticks inside the pause around ${p.change}`).toBeLessThanOrEqual(pauseTicks);
    expect(p.resumeTicks, `ticks between the switch of ${p.change} and the first start after it`).toBeLessThanOrEqual(resumeTicks);
  }
  return pauses;
}
