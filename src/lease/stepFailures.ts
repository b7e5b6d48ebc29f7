// The failed-step report of a partition change (docs/operations.md, "A count change that does not progress"): every
// step that fails adds one to the change row's failed_steps (best effort, unfenced: a report, not a step; any
// instance's dashboard and GET /api/ops/partitions read it), with its reason; from PARTITION_CHANGE_STUCK_STEPS in a
// row on, each failed step logs partition_change_stuck at error level and counts in the stuck metric. A step that
// moves the change on (a preparing batch, a reassignment page, the completion; not a wait for a lease another changer
// holds) resets the count. The reason is the error's class and driver code only, never its message (which may quote
// a value), so no payload or secret reaches a log, a metric or the change row.
import type { Logger } from '../observability/logger.js';
import { sqlErrorField } from '../observability/logger.js';
import { isStoreError } from '../store/ports.js';
import type { PartitionChange, PartitionStore } from '../store/partitionPorts.js';

/** What the report records beside the logs (AppMetrics implements it). */
export interface StepFailureMetrics {
  partitionChangeStepFailed(stuck: boolean): void;
}

/** The reason a step failed, as recorded: `StoreError transient 57014`, `RangeError`; never a message. */
export function stepErrorReason(e: unknown): string {
  if (isStoreError(e)) return `StoreError ${e.kind}${e.code ? ` ${e.code}` : ''}`;
  const code = (e as { code?: unknown } | null)?.code;
  const name = e instanceof Error ? e.name : typeof e;
  return typeof code === 'string' || typeof code === 'number' ? `${name} ${String(code).slice(0, 40)}` : name;
}

export class StepFailures {
  /** Consecutive failed steps this process saw for `changeId` (the count when the row cannot be written either). */
  private local = { changeId: '', failed: 0 };

  constructor(private readonly store: Pick<PartitionStore, 'recordStepFailure' | 'clearStepFailures'>, private readonly stuckSteps: number,
    private readonly log: Logger, private readonly metrics?: StepFailureMetrics) {}

  /** A step of `change` failed with `e`: recorded, logged (stuck: at error level), counted. Never rejects. */
  async failed(change: PartitionChange, e: unknown): Promise<{ failedSteps: number; stuck: boolean }> {
    this.local = { changeId: change.changeId, failed: this.local.changeId === change.changeId ? this.local.failed + 1 : 1 };
    const reason = stepErrorReason(e);
    const recorded = await this.store.recordStepFailure(change.changeId, reason).catch((w: unknown) => {
      this.log.warn({ event: 'partition_change_failure_unrecorded', change_id: change.changeId, sql_error: sqlErrorField(w) },
        'failed step not recorded in the change row (this process counts it)');
      return undefined;
    });
    if (recorded === null) this.local.failed = 0; // the change ended meanwhile (cancelled, completed): nothing is stuck
    const failedSteps = Math.max(recorded?.failedSteps ?? 0, this.local.failed);
    const stuck = recorded !== null && failedSteps >= this.stuckSteps;
    this.metrics?.partitionChangeStepFailed(stuck);
    const fields = { change_id: change.changeId, state: change.state, from: change.fromCount, to: change.toCount, failed_steps: failedSteps, reason };
    if (!stuck) {
      this.log.warn({ event: 'partition_change_step_failed', ...fields }, 'partition change step failed; the next step resumes');
    } else {
      const switched = change.state === 'reassigning';
      this.log.error({ event: 'partition_change_stuck', ...fields, stuck_steps: this.stuckSteps },
        `partition change ${change.fromCount} → ${change.toCount} (${change.state}) is stuck: ${failedSteps} steps in a row failed (${reason}); ` +
        (switched ? 'it switched, so it rolls forward: remove the cause (a lock another session holds, a statement timeout) and it resumes'
          : change.cancelledAt !== null ? 'it was cancelled and moves rows back before it ends: remove the cause and it resumes'
            : `remove the cause, or cancel it: POST /api/ops/partitions/${change.changeId}/cancel`) +
        ' (docs/operations.md, "A count change that does not progress")');
    }
    return { failedSteps, stuck };
  }

  /** A step moved `change` on: the count restarts (one statement, only when the row or this process counted). */
  async succeeded(change: PartitionChange): Promise<void> {
    const counted = this.local.changeId === change.changeId && this.local.failed > 0;
    this.local = { changeId: change.changeId, failed: 0 };
    if (change.failedSteps === 0 && !counted) return;
    await this.store.clearStepFailures(change.changeId).catch((w: unknown) => {
      this.log.debug({ event: 'partition_change_failure_uncleared', change_id: change.changeId, sql_error: sqlErrorField(w) }, 'failed steps not reset');
    });
  }
}
