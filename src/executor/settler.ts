// Unwritten results between ticks — calls carried past a tick, completions a tick could not write — are written by
// one background settler, under the newest token this process led under, whatever the gate says (a write under a
// valid fence is always safe): retried as soon as the database answers, until written, until the fence refuses (the
// row is not ours: they wait for this process's next epoch, which writes them before its orphan recovery), or until
// a batch runs (it writes them). The row is not released meanwhile (holdReleaseWhile); once they are written, the
// end of the settler's deferral hands back a row dropped meanwhile.
import type { Clock } from '../lease/clock.js';
import type { LeaseManager } from '../lease/leaseManager.js';
import type { Logger } from '../observability/logger.js';
import { sqlErrorField } from '../observability/logger.js';
import type { LeaseToken } from '../store/ports.js';
import type { ExecutionState } from './executionState.js';
import type { LeaderFaults } from './leaderFaults.js';

/** Pause between two attempts to write unwritten completions between ticks, doubling up to SETTLE_MAX_RETRY_MS. */
const SETTLE_RETRY_MS = 100;
const SETTLE_MAX_RETRY_MS = 1_000;

export class Settler {
  /** The task writing unwritten results (drain awaits it), and the newest token this process led under. */
  private task: Promise<void> | null = null;
  private token: LeaseToken | null = null;
  /** Shutdown gave up waiting: a settler still retrying stops (the row is kept, it expires). */
  private stopped = false;

  /** `batchRunning`: a batch runs now (it writes the results itself; the settler's loop yields to it). */
  constructor(private readonly state: ExecutionState, private readonly faults: LeaderFaults, private readonly lease: LeaseManager,
    private readonly clock: Clock, private readonly log: Logger, private readonly batchRunning: () => boolean) {}

  /** This process leads under `token`: the newest, which the settler writes under from now on. */
  ledUnder(token: LeaseToken): void {
    this.token = token;
  }

  /** Write what is unwritten under `token` (the newest), in the background; one task at a time. */
  settle(token: LeaseToken): void {
    this.token = token;
    if (this.task) return;
    const releaseDeferred = this.lease.deferRelease();
    this.task = (async () => {
      try {
        await this.state.inFlight.settled();
        await this.writeUnwritten();
      } finally {
        this.task = null;
        await releaseDeferred();
      }
    })();
  }

  /** Shutdown: settle what is unwritten under the newest token; resolves once the task (if any) has ended. */
  async settleNewest(): Promise<void> {
    if (this.token && this.state.unwritten) this.settle(this.token);
    await this.task;
  }

  /** Shutdown gave up waiting: a loop still retrying stops. */
  stop(): void {
    this.stopped = true;
  }

  /** The loop: an SQL error drops leadership at once (as on any leader path) and is retried. */
  private async writeUnwritten(): Promise<void> {
    let pauseMs = SETTLE_RETRY_MS;
    while (!this.stopped && !this.batchRunning() && this.state.completions.size > 0) {
      const token = this.token!;
      try {
        if ((await this.state.write(token, this.state.between)) === 'leaseLost') {
          this.faults.fenceRefused(token, null);
          return; // kept for this process's next epoch
        }
      } catch (e) {
        this.log.warn({ event: 'carried_flush_failed', holder_id: token.holderId, lease_epoch: token.leaseEpoch, sql_error: sqlErrorField(e),
          pending: this.state.completions.size }, 'completions not written; retrying under the same fence (the lease row is kept meanwhile)');
        if (this.lease.ensureEpoch(token.leaseEpoch)) this.lease.drop('sql_error', e);
        await this.clock.sleep(pauseMs);
        pauseMs = Math.min(2 * pauseMs, SETTLE_MAX_RETRY_MS);
      }
    }
  }
}
