// Completions (provider results and aborts) waiting to be written under the fence. The buffer belongs to the
// executor, not to one tick: what a tick could not write (SQL error, deadline) stays here, keeps the lease row
// (LeaseManager.holdReleaseWhile) and is written by the executor's settler under the same token; after a refused
// fence, by this process's next leader tick before its orphan recovery — the store closes an attempt only if it
// is still open, so a result whose attempt another leader abandoned meanwhile changes nothing.
// A provider result is therefore never thrown away, with two exceptions: the cap below bounds memory, and a
// completion the database refuses every time (a data error, e.g. a constraint) even with its error text cleaned is
// dropped alone (reported to `onUnwritable`), so that it neither fails the results batched with it nor keeps the
// lease row for ever; its attempt stays open and the next epoch's orphan recovery closes it.
import type { AttemptCompletion, CompletedAttempt, ExecutionStore } from '../store/intentPorts.js';
import { isStoreError, type LeaseToken, type StoreError } from '../store/ports.js';
import type { TickSummary } from './tickSummary.js';

/** More than this many unwritten completions (a process that never leads again): the oldest go first. */
const MAX_CARRIED = 10_000;

export type FlushOutcome = 'ok' | 'leaseLost' | 'empty';

export class CompletionBuffer {
  /** `returnRows`: the one road back to the schedule for written rows (set once by the executor);
   *  `onUnwritable`: a completion dropped because the database refuses it (log and count it);
   *  `onRefused`: the fence refused `token` (that epoch ended): `kept` completions wait for a later epoch (log it). */
  constructor(private readonly returnRows: (rows: CompletedAttempt[]) => void = () => {},
    private readonly onUnwritable: (c: AttemptCompletion, e: StoreError) => void = () => {},
    private readonly onRefused: (token: LeaseToken, kept: number) => void = () => {}) {}

  private pending: AttemptCompletion[] = [];
  /** Completions taken by the flush being written now (they count in `size` until written). */
  private writing = 0;
  /** Flushes run one at a time (a tail of the chain): size 0 then means nothing is pending *or* on the wire. */
  private queue: Promise<unknown> = Promise.resolve();
  /** Completions dropped by the cap (for logs). */
  droppedByCap = 0;

  /** Completions not yet written: pending plus those a flush is writing now. */
  get size(): number {
    return this.pending.length + this.writing;
  }

  push(c: AttemptCompletion): void {
    this.pending.push(c);
    if (this.pending.length > MAX_CARRIED) {
      this.droppedByCap += this.pending.length - MAX_CARRIED;
      this.pending.splice(0, this.pending.length - MAX_CARRIED);
    }
  }

  /**
   * Write everything pending in one fenced statement. On an SQL error (thrown) or a refused fence the batch
   * goes back to the buffer, in front of what arrived meanwhile; written rows go back to the schedule, and
   * `onWritten` (the caller's counts) sees them too.
   */
  flush(store: ExecutionStore, token: LeaseToken,
    onWritten: (batch: AttemptCompletion[], rows: CompletedAttempt[]) => void = () => {}): Promise<FlushOutcome> {
    // Serialised: a caller that finds a flush on the wire waits for it, then writes what is left (including a
    // batch that flush put back after a failure), so "size 0" after a flush is a fact, not a race.
    const run = this.queue.then(() => this.flushNow(store, token, onWritten));
    this.queue = run.catch(() => {});
    return run;
  }

  private async flushNow(store: ExecutionStore, token: LeaseToken,
    onWritten: (batch: AttemptCompletion[], rows: CompletedAttempt[]) => void): Promise<FlushOutcome> {
    const batch = this.pending.splice(0);
    if (batch.length === 0) return 'empty';
    this.writing = batch.length;
    try {
      return await this.writeApart(store, token, [batch], onWritten);
    } finally {
      this.writing = 0;
    }
  }

  /** Write `groups` in order, each in one fenced statement. A group the database refuses (a data error) is split in
   *  halves; a single refused completion is tried once more with its error text cleaned, then dropped. On any other
   *  error (thrown) or a refused fence, the unwritten groups go back in front of the buffer. */
  private async writeApart(store: ExecutionStore, token: LeaseToken, groups: AttemptCompletion[][],
    onWritten: (batch: AttemptCompletion[], rows: CompletedAttempt[]) => void): Promise<FlushOutcome> {
    while (groups.length > 0) {
      const group = groups.shift()!;
      let res;
      try {
        res = await store.fencedCompleteAttempts(token, group);
      } catch (e) {
        if (!(isStoreError(e) && e.kind === 'data')) {
          this.pending.unshift(...group, ...groups.flat());
          throw e;
        }
        if (group.length > 1) {
          const half = Math.ceil(group.length / 2);
          groups.unshift(group.slice(0, half), group.slice(half));
        } else {
          const c = group[0]!;
          const cleaned = cleanError(c.error);
          if (cleaned !== c.error) groups.unshift([{ ...c, error: cleaned }]);
          else this.drop(c, e);
        }
        continue;
      }
      if (res.kind === 'leaseLost') {
        this.pending.unshift(...group, ...groups.flat());
        this.onRefused(token, this.pending.length);
        return 'leaseLost';
      }
      this.returnRows(res.value);
      onWritten(group, res.value);
    }
    return 'ok';
  }

  /** The database refuses this completion even with a clean error text: drop it (its schedule claim returns). */
  private drop(c: AttemptCompletion, e: StoreError): void {
    this.returnRows([{ intentId: c.intentId, applied: false, row: null }]);
    this.onUnwritable(c, e);
  }
}

/** Error text any column accepts: printable ASCII only (other characters become '?'), at most 200 characters. */
export function cleanError(error: string | null): string | null {
  return error === null ? null : error.slice(0, 200).replace(/[^\x20-\x7e]/g, '?');
}

/** Count written completions in the tick summary. */
export function countCompleted(sum: TickSummary, batch: AttemptCompletion[], rows: CompletedAttempt[]): void {
  const byId = new Map(batch.map((b) => [b.intentId, b]));
  for (const r of rows) {
    const c = byId.get(r.intentId)!;
    if (!r.applied) sum.skipped++;
    else if (c.outcome === 'succeeded') sum.succeeded++;
    else if (c.outcome === 'aborted') sum.aborted++;
    else if (c.next.status === 'scheduled') sum.retried++;
    else sum.failed++;
  }
}
