// The reassignment phases of a partition-count change, once its changer holds every lease 0..M−1
// (src/lease/partitionChanger.ts drives them): the switch, the scan of the open intents and the catch-up of rows
// inserted with the old count. Guarantees:
// - Every write (switch, move, complete) is fenced by all M leases at once: a lease lost, it writes nothing ('lost').
// - Each page's cursor is recorded with its moves, in one fenced write: a step cut short by its deadline, a crash or
//   a lost reply resumes where the recorded cursor says, and no row it passed is lost.
import type { Clock } from './clock.js';
import type { Logger } from '../observability/logger.js';
import type { Fenced } from '../store/ports.js';
import { AdaptiveLimit } from './adaptiveLimit.js';
import type { ChangerLeases } from './changerLeases.js';
import type { PartitionChange, PartitionStore } from '../store/partitionPorts.js';

export interface ReassignSettings {
  /** The partition rule (src/intents/partition.ts assignPartition), injected: the same as the insert's. */
  partitionOf: (intent: { intentId: string; partitionKey: string | null }, count: number) => number;
  /** COMMIT_GRACE_MS: a write commits within this of its last_modified_at (the preparing horizon, the catch-up window). */
  commitGraceMs: number;
  /** SCHEDULE_REFRESH_INTERVAL_MS: a leader's schedule sees a write within it (plus the grace). */
  refreshIntervalMs: number;
  /** Rows per reassignment batch (one read, one fenced write). */
  batchSize: number;
}

/** Rows last modified before this settled before the change: every leader's schedule has seen them finish (a
 *  refresh interval, plus the grace for late commits), so moving one strands no schedule entry. */
export function preparingHorizon(change: PartitionChange, s: ReassignSettings): Date {
  return new Date(change.requestedAt.getTime() - s.commitGraceMs - s.refreshIntervalMs);
}

export class Reassignment {
  /** Rows per page of the scan and the catch-up: halved after a failed batch (a statement timeout, say), doubled back
   *  after each success, so no batch fails the same way forever. */
  private readonly pages: AdaptiveLimit;
  /** The change this changer switched excluding inserts that read the old count (its catch-up waits for nothing). */
  private switchedExcluding: string | null = null;
  /** The change whose switch excluding such inserts failed here: the next try switches without. */
  private exclusionFailed: string | null = null;

  constructor(private readonly store: PartitionStore, private readonly s: ReassignSettings, private readonly held: ChangerLeases,
    private readonly clock: Clock, private readonly log: Logger) {
    this.pages = new AdaptiveLimit(s.batchSize);
  }

  /** The switch, excluding inserts that read the old count; if that failed here once (PostgreSQL: its lock not had
   *  within SWITCH_LOCK_TIMEOUT_MS, say under an anti-wraparound vacuum), without: the catch-up then waits the grace. */
  async switch(change: PartitionChange, m: number): Promise<Fenced<PartitionChange>> {
    const inserts = this.exclusionFailed === change.changeId ? 'unexcluded' : 'excluded';
    try {
      const out = await this.store.switchCount(this.held.fence(m), change.changeId, inserts);
      if (out.kind === 'ok' && inserts === 'excluded') this.switchedExcluding = change.changeId;
      return out;
    } catch (e) {
      if (inserts === 'excluded') this.exclusionFailed = change.changeId;
      throw e;
    }
  }

  /** One batch of the scan by intent_id: move the rows whose partition differs, record the cursor. */
  scanBatch(change: PartitionChange, m: number): Promise<PartitionChange | 'lost'> {
    // The open intents (failed included), and those modified since the horizon: left by the preparing pass, finished
    // after it passed them, or their attempt abandoned by the switch. Only these are read and written.
    return this.pages.run(async (limit) => {
      const rows = await this.store.listForReassign({ after: change.scanCursor, limit, scope: 'open', modifiedSince: preparingHorizon(change, this.s) });
      const out = await this.store.moveIntents(this.held.fence(m), change.changeId, this.movesFor(rows, change.toCount),
        { scanCursor: rows.at(-1)?.intentId ?? change.scanCursor, scanDone: rows.length < limit });
      return afterWrite(out);
    });
  }

  /** The catch-up: rows modified since switchedAt − COMMIT_GRACE_MS not in their partition under the new count, by
   *  intent_id from the recorded catch-up cursor (each page recorded with its moves, so a step's deadline cuts it
   *  short without losing what it passed: the rows it looks for all committed before it began, see below). After
   *  a switch this changer made excluding inserts that read the old count, it finds none (one found is moved and
   *  logged as an error) and waits for nothing. Otherwise (switched without, or by another changer: unknown here) such
   *  inserts commit within COMMIT_GRACE_MS of the switch, so it waits until database time passes scanDoneAt + grace. */
  async catchUp(change: PartitionChange, m: number, deadlineMs: number): Promise<PartitionChange | 'lost' | 'wait'> {
    const switchedAt = change.switchedAt!.getTime();
    if (this.switchedExcluding !== change.changeId) {
      const layout = await this.store.readLayout();
      // From scanDoneAt, a database time after the switch committed (switchedAt is taken before): an insert whose
      // statement read the old count began before that commit and has committed within COMMIT_GRACE_MS of it.
      const waitMs = change.scanDoneAt!.getTime() + this.s.commitGraceMs - layout.dbNow.getTime() + 1;
      if (waitMs > 0) {
        if (this.clock.nowMs() + waitMs >= deadlineMs) return 'wait';
        await new Promise((r) => setTimeout(r, waitMs));
        if (!(await this.held.renewDue(m))) return 'lost';
      }
    }
    const since = new Date(switchedAt - this.s.commitGraceMs);
    let current = change;
    for (;;) {
      const page = await this.pages.run(async (limit) => {
        const rows = await this.store.listForReassign({ after: current.catchUpCursor, limit, modifiedSince: since, scope: 'all' });
        const moves = this.movesFor(rows, change.toCount);
        const last = rows.length < limit;
        if (moves.length === 0 && last) return { moves, last, out: null };
        return { moves, last, out: await this.store.moveIntents(this.held.fence(m), change.changeId, moves,
          { scanCursor: null, scanDone: false, catchUpCursor: rows.at(-1)?.intentId ?? null }) };
      });
      const { moves, last, out } = page;
      if (out?.kind === 'leaseLost') return 'lost';
      if (out) current = out.value;
      if (moves.length > 0) {
        const excluded = this.switchedExcluding === change.changeId;
        this.log[excluded ? 'error' : 'warn']({ event: 'partition_change_late_rows', change_id: change.changeId, moved: moves.length, excluded },
          `${moves.length} intent(s) inserted with the old count moved${excluded ? ' (the switch should have excluded them)' : ''}`);
      }
      if (last) return afterWrite(await this.store.completeChange(this.held.fence(m), change.changeId));
      if (!(await this.held.renewDue(m))) return 'lost';
      if (this.clock.nowMs() >= deadlineMs) return 'wait'; // the next step resumes from the recorded cursor
    }
  }

  private movesFor(rows: { intentId: string; partitionKey: string | null; partition: number }[], count: number) {
    return rows.flatMap((r) => {
      const p = this.s.partitionOf({ intentId: r.intentId, partitionKey: r.partitionKey }, count);
      return p === r.partition ? [] : [{ intentId: r.intentId, partition: p }];
    });
  }
}

function afterWrite(out: Fenced<PartitionChange>): PartitionChange | 'lost' {
  return out.kind === 'leaseLost' ? 'lost' : out.value;
}
