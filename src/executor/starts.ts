// Fenced starts of due intents: up to the guard's grant taken from the schedule and started in one fenced statement.
// Guard permits not turned into a started attempt go back; intents the database skipped or held go back to the schedule;
// a START whose reply was lost records its attempts as aborted (never sent, so never charged as sent).
import type { ProviderPermits } from '../provider/partitionPermits.js';
import { aborted } from '../provider/retryPolicy.js';
import type { DueEntry } from '../schedule/dueHeap.js';
import type { ScheduleRefresher } from '../schedule/refresher.js';
import type { ExecutionStore, StartHold, StartedAttempt } from '../store/intentPorts.js';
import type { LeaseToken } from '../store/ports.js';
import type { ExecutionState } from './executionState.js';
import type { TickSummary } from './tickSummary.js';

/** A start the database skipped (intent changed, not yet due) is queued again this long after now (or after its
 *  due time, if later): at most one START per this interval for an intent whose change refresh has not read yet. */
const SKIPPED_RETRY_MS = 50;

export interface StartDeps {
  store: ExecutionStore;
  refresher: ScheduleRefresher;
  guard: ProviderPermits | null;
  /** Where a START whose reply was lost records its attempts as aborted. */
  state: Pick<ExecutionState, 'record'>;
}

/** What becomes of the started attempts (`call`: run the provider call), of a refused fence (`refused`) and of a
 *  START the database held (`held`: a pause or a drain this leader's flags did not show yet); all run before the
 *  unused permits go back. */
export interface StartOutlets {
  call(a: StartedAttempt): void;
  refused(): void;
  held(by: StartHold, intents: number): void;
}

/** Fenced start of up to `granted` due intents, their permits taken at `grantedAtMs` (monotonic; given back with it).
 *  Throws on an SQL error (its attempts recorded as aborted first). */
export async function startDue(d: StartDeps, token: LeaseToken, granted: number, sum: TickSummary, out: StartOutlets,
  grantedAtMs: number): Promise<void> {
  const due = d.refresher.schedule.takeDue(d.refresher.dbNowMs(), granted);
  let unused = granted;
  try {
    if (due.length === 0) return;
    let res;
    try {
      res = await d.store.fencedStartAttempts(token, due.map((x) => ({ intentId: x.intentId, expectedAttemptCount: x.attemptCount })));
    } catch (e) {
      startUnknown(d, token, due);
      throw e;
    }
    if (res.kind === 'leaseLost') return out.refused();
    if (res.kind === 'held') {
      // Back as they were (their due times, so their order: intents of one partition key keep it); the leader reads
      // its flags before its next START, so no START follows at once while the hold lasts.
      for (const x of due) d.refresher.schedule.release(x.intentId, { ...x, status: 'scheduled', nextAttemptAt: new Date(x.dueMs) });
      return out.held(res.by, due.length);
    }
    unused = granted - res.value.length;
    started(d, due, res.value, sum, out);
  } finally {
    d.guard?.release(unused, grantedAtMs);
  }
}

/** The START failed on the client side (deadline, reset): it may have committed with its reply lost. None of its
 *  attempts was sent, so each is recorded as aborted (a no-op where no attempt row exists): written under the
 *  fence before this process's next orphan recovery, an attempt that was never sent is never charged as sent. */
function startUnknown(d: StartDeps, token: LeaseToken, due: DueEntry[]): void {
  for (const x of due) {
    d.state.record({ ...aborted({ intentId: x.intentId, attemptNo: x.attemptCount + 1 }, 'the start\'s reply was lost'),
      attemptEpoch: token.leaseEpoch });
  }
}

/** Due intents the start skipped go back to the schedule; started ones run their provider call. */
function started(d: StartDeps, due: DueEntry[], startedRows: StartedAttempt[], sum: TickSummary, out: StartOutlets): void {
  const startedIds = new Set(startedRows.map((a) => a.intentId));
  sum.skipped += putBack(d, due, startedIds);
  sum.started += startedRows.length;
  for (const a of startedRows) out.call(a);
}

/** Every due intent not in `startedIds` back to the schedule; returns how many. Changed meanwhile (cancelled,
 *  rescheduled) or not yet due in database time: queued again SKIPPED_RETRY_MS from now (not
 *  from its old due time, which would leave an overdue intent due: a START per iteration); a newer row from refresh
 *  wins over this one. Released whatever the gate says now: only a reset schedule (leadership lost) ignores it. */
function putBack(d: StartDeps, due: DueEntry[], startedIds: Set<string>): number {
  const { refresher } = d;
  let n = 0;
  for (const x of due) {
    if (startedIds.has(x.intentId)) continue;
    n++;
    const retryAt = Math.max(x.dueMs, refresher.dbNowMs()) + SKIPPED_RETRY_MS;
    refresher.schedule.release(x.intentId, { ...x, status: 'scheduled', nextAttemptAt: new Date(retryAt) });
  }
  return n;
}
