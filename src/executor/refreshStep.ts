// One refresh step of the leader's batch (the cadence chose it: ExecutionState.takeRefreshStep): the interval refresh
// and a notice's tail read each read the control flags after their rows (a pause set before those intents were
// written holds for them); the reconcile runs one page per step, so execution never waits for more than one page.
import type { Clock } from '../lease/clock.js';
import type { CadenceStep } from '../schedule/cadence.js';
import type { ScheduleRefresher } from '../schedule/refresher.js';
import type { ExecutionState } from './executionState.js';
import type { ExecutorOps } from './executorOps.js';
import type { TickSummary } from './tickSummary.js';

export interface RefreshStepDeps {
  refresher: ScheduleRefresher;
  ops: Pick<ExecutorOps, 'refreshControl'>;
  state: Pick<ExecutionState, 'refreshRead'>;
  clock: Clock;
}

/** Run `step` (null: nothing due), reading until `deadlineMs` (monotonic), counting in `sum`. Throws on an SQL error. */
export async function refreshStep(d: RefreshStepDeps, step: CadenceStep, sum: TickSummary, deadlineMs: number): Promise<void> {
  const { refresher, ops, state } = d;
  if (step === 'refresh') {
    const stats = await refresher.refresh(deadlineMs);
    await ops.refreshControl(); // pause flag and handover request, at the refresh cadence (never per attempt)
    state.refreshRead(d.clock.nowMs()); // how overdue its rows are: the cadence begins the next one that early
    sum.refreshedRows += stats.rows;
    sum.refreshes++;
  } else if (step === 'tail') {
    // A notice says intents became due: read the tail past what was already read, now. The interval refresh
    // stays the guarantee (a notice may be lost; it also re-reads the commit-grace window).
    const stats = await refresher.refreshTail(deadlineMs);
    await ops.refreshControl(); // a pause set before these intents were written must hold for them too
    sum.refreshedRows += stats.rows;
    sum.nudgedRefreshes++;
  } else if (step === 'reconcilePage') {
    // The periodic reconcile (defence in depth against late commits): one page per step into the live schedule,
    // so execution never waits for more than one page, under load too (the schedule is never emptied).
    sum.refreshedRows += (await refresher.reconcilePage()).stats.rows;
  } else if (step === 'reconcile') {
    await refresher.beginReconcile();
  }
}
