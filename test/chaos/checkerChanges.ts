// Issue 26's rules on changes of the partition count (history.partitionChanges). The count over time is a step
// function of database time: the toCount of the last change switched at or before t, else the first change's
// fromCount (else the count the run started with). An intent's partition at t is its key's partition of that count
// (src/intents/partition.ts) — outside a change's reassignment [switchedAt, completedAt], when no executor runs (the
// changer holds every lease), an intent has exactly that partition: so attempts, provider calls and lease rules read
// an intent's partition at the time of the attempt, and its stored partition is that of the final count.
//  - partition_change: every change requested completes; changes never overlap (at most one active) and chain
//    (each fromCount is the previous toCount); each switched between its request and its completion.
//  - change_exclusive: no start_attempts committed while a change was reassigning (between switch and completion).
// A change pauses every partition: a fault whose recovery a change interrupted is judged from the change's completion.
import { assignPartition } from '../../src/intents/partition.js';
import type { AuditRow, History, PartitionChangeRow } from './history.js';

export class CountTimeline {
  readonly changes: PartitionChangeRow[];
  /** The count before the first change. */
  readonly initial: number;

  constructor(changes: PartitionChangeRow[] | undefined, startCount: number) {
    this.changes = [...(changes ?? [])].sort((a, b) => a.requestedAtMs - b.requestedAtMs);
    this.initial = this.changes[0]?.fromCount ?? startCount;
  }

  get any(): boolean {
    return this.changes.length > 0;
  }

  /** The recorded count at database time `tMs`. */
  countAt(tMs: number): number {
    let n = this.initial;
    for (const c of this.changes) if (c.switchedAtMs !== null && c.switchedAtMs <= tMs) n = c.toCount;
    return n;
  }

  /** The count at the end (every change switched). */
  get final(): number {
    return this.countAt(Number.POSITIVE_INFINITY);
  }

  /** The first change active at some moment of [fromMs, toMs]: requested by toMs, not completed by fromMs. */
  activeDuring(fromMs: number, toMs: number): PartitionChangeRow | undefined {
    return this.changes.find((c) => c.requestedAtMs <= toMs && (c.completedAtMs ?? Number.POSITIVE_INFINITY) > fromMs);
  }

  /** The partition of an intent at `tMs`. */
  partitionAt(intent: { intentId: string; partitionKey?: string | null }, tMs: number): number {
    return assignPartition({ intentId: intent.intentId, partitionKey: intent.partitionKey ?? null }, this.countAt(tMs));
  }
}

export interface ChangeStats {
  /** Per change: from → to, request → completion (ms), switch → completion, rows moved, and the pause: the gap in
   *  provider arrivals around it (the last before its switch to the first after its completion), null if unknown. */
  changes: { from: number; to: number; ms: number | null; reassignMs: number | null; rowsMoved: number; pauseMs: number | null }[];
}

/** The gap in provider arrivals around a change: the last arrival before its switch to the first after its completion
 *  (wall ms; the provider's clock is the machine's, as the database's). Null if either side has none. */
export function arrivalGap(arrivals: readonly number[], c: PartitionChangeRow): number | null {
  if (c.switchedAtMs === null || c.completedAtMs === null) return null;
  let before = Number.NEGATIVE_INFINITY, after = Number.POSITIVE_INFINITY;
  for (const t of arrivals) {
    if (t <= c.switchedAtMs && t > before) before = t;
    if (t >= c.completedAtMs && t < after) after = t;
  }
  return Number.isFinite(before) && Number.isFinite(after) ? Math.round(after - before) : null;
}

export function changeChecks(h: History, timeline: CountTimeline, starts: AuditRow[], fail: (check: string, message: string) => void): ChangeStats {
  const arrivals = h.provider.map((p) => p.arrivedAt);
  let prev: PartitionChangeRow | null = null;
  for (const c of timeline.changes) {
    const name = `change ${c.changeId} (${c.fromCount} → ${c.toCount})`;
    if (c.completedAtMs === null) fail('partition_change', `${name} requested at ${c.requestedAtMs} never completed (state ${c.state})`);
    if (c.switchedAtMs !== null && (c.switchedAtMs < c.requestedAtMs || (c.completedAtMs !== null && c.switchedAtMs > c.completedAtMs))) {
      fail('partition_change', `${name} switched at ${c.switchedAtMs}, outside its request ${c.requestedAtMs} … completion ${c.completedAtMs}`);
    }
    if (c.completedAtMs !== null && c.switchedAtMs === null) fail('partition_change', `${name} completed without a switch`);
    if (prev) {
      if (c.fromCount !== prev.toCount) fail('partition_change', `${name} follows change ${prev.changeId} to ${prev.toCount}: it should start from ${prev.toCount}`);
      if (prev.completedAtMs === null || c.requestedAtMs < prev.completedAtMs) {
        fail('partition_change', `${name} requested at ${c.requestedAtMs} while change ${prev.changeId} was active (completed ${prev.completedAtMs ?? 'never'})`);
      }
    }
    prev = c;
    if (c.switchedAtMs === null) continue;
    const end = c.completedAtMs ?? Number.POSITIVE_INFINITY;
    for (const s of starts) {
      if (s.atMs > c.switchedAtMs && s.atMs < end) {
        fail('change_exclusive', `${name}: start_attempts seq ${s.seq} by ${s.holderId} (lease ${s.leaseName ?? '?'}, epoch ${s.epoch}) at ${s.atMs}, ` +
          `between its switch ${c.switchedAtMs} and its completion ${c.completedAtMs ?? 'never'}`);
      }
    }
  }
  return {
    changes: timeline.changes.map((c) => ({
      from: c.fromCount, to: c.toCount, rowsMoved: c.rowsMoved, pauseMs: arrivalGap(arrivals, c),
      ms: c.completedAtMs === null ? null : Math.round(c.completedAtMs - c.requestedAtMs),
      reassignMs: c.completedAtMs === null || c.switchedAtMs === null ? null : Math.round(c.completedAtMs - c.switchedAtMs),
    })),
  };
}
