// The leader's in-memory schedule: what is due when, and nothing else (never payloads). Applying a row is
// idempotent and newer state wins (versions are last_modified_at as fixed-width database text), so the same
// row observed twice — by refresh, reconcile or our own writes — never enqueues a duplicate attempt.
import type { ScheduleRow } from '../store/intentPorts.js';
import { DueHeap, type DueEntry } from './dueHeap.js';

export type ApplyResult = 'scheduled' | 'removed' | 'stale' | 'claimed';

export class Schedule {
  private readonly heap = new DueHeap();
  /** Version of every intent we know the state of and that is not in the heap (claimed or no longer
   *  schedulable); a scheduled intent's version is its heap entry's (one map entry per intent, not two: a
   *  1 M-intent rebuild is dominated by map inserts). */
  private readonly versions = new Map<string, string>();
  /** Intents taken for execution and not yet completed (refresh must not re-enqueue them), with the
   *  newest row observed meanwhile, applied when the claim is released. */
  private readonly claimed = new Map<string, ScheduleRow | null>();

  get size(): number {
    return this.heap.size;
  }

  get claimedCount(): number {
    return this.claimed.size;
  }

  has(intentId: string): boolean {
    return this.heap.get(intentId) !== undefined;
  }

  /** Due time (database ms) of the earliest entry, if any. */
  nextDueMs(): number | undefined {
    return this.heap.peek()?.dueMs;
  }

  apply(row: ScheduleRow): ApplyResult {
    if (this.claimed.has(row.intentId)) {
      const pending = this.claimed.get(row.intentId);
      if (!pending || pending.version < row.version) this.claimed.set(row.intentId, row);
      return 'claimed'; // applied (if still newest) when the claim is released
    }
    const known = this.knownVersion(row.intentId);
    if (known !== undefined && known > row.version) return 'stale';
    // Scheduled means schedulable: the attempt budget (which discounts aborted attempts) is enforced by
    // the fenced start in SQL.
    if (row.status === 'scheduled') {
      if (known !== undefined) this.versions.delete(row.intentId); // the heap entry carries it from now on
      this.heap.upsert({
        intentId: row.intentId, dueMs: row.nextAttemptAt.getTime(), attemptCount: row.attemptCount,
        maxAttempts: row.maxAttempts, version: row.version,
      });
      return 'scheduled';
    }
    this.versions.set(row.intentId, row.version);
    this.heap.remove(row.intentId);
    return 'removed';
  }

  /** Pop up to `limit` entries due at `dbNowMs` (database clock) and mark them claimed. */
  takeDue(dbNowMs: number, limit: number): DueEntry[] {
    const out: DueEntry[] = [];
    while (out.length < limit) {
      const top = this.heap.peek();
      if (!top || top.dueMs > dbNowMs) break;
      this.heap.pop();
      this.versions.set(top.intentId, top.version); // out of the heap: its version is remembered here
      this.claimed.set(top.intentId, null);
      out.push(top);
    }
    return out;
  }

  /** Completion (or a skipped start) releases the claim; `row` is the new state when known. Only a claim of this
   *  schedule is released: after clear() (leadership lost) the rows of old claims are ignored, since the next
   *  rebuild reads the database instead (a stale row applied then could stay queued forever). */
  release(intentId: string, row: ScheduleRow | null): void {
    if (!this.claimed.has(intentId)) return;
    const pending = this.claimed.get(intentId);
    this.claimed.delete(intentId);
    if (row) this.apply(row);
    if (pending) this.apply(pending); // ignored as stale unless newer than `row`
  }

  /** The newest version applied for an intent (heap entry or `versions`), if any. */
  private knownVersion(intentId: string): string | undefined {
    return this.heap.get(intentId)?.version ?? this.versions.get(intentId);
  }

  /** End of a paged reconcile: drop scheduled entries it did not see that are older than `before` (its start less the
   *  commit grace) — no longer schedulable in the database. Newer ones were applied after it began; refresh re-reads
   *  them. Returns how many were dropped. */
  sweepUnseen(seen: ReadonlySet<string>, before: string): number {
    let dropped = 0;
    for (const e of this.heap.entries()) {
      if (seen.has(e.intentId) || e.version >= before) continue;
      this.heap.remove(e.intentId);
      this.versions.set(e.intentId, e.version);
      dropped++;
    }
    return dropped;
  }

  /** Forget versions older than the settled cursor: rows at or before it will not be re-read. */
  pruneVersionsBefore(version: string): void {
    for (const [id, v] of this.versions) {
      if (v < version && !this.heap.get(id) && !this.claimed.has(id)) this.versions.delete(id);
    }
  }

  /** Lag of the oldest due entry behind `dbNowMs` (0 when nothing is overdue). */
  oldestDueLagMs(dbNowMs: number): number {
    const top = this.heap.peek();
    return top ? Math.max(0, dbNowMs - top.dueMs) : 0;
  }

  clear(): void {
    this.heap.clear();
    this.versions.clear();
    this.claimed.clear();
  }
}
