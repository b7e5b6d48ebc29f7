// Unwritten results between ticks — calls carried past a tick, completions a tick could not write — are written by
// one background settler, under the newest token this process led under, whatever the gate says (a write under a
// valid fence is always safe): retried as soon as the database answers, until written, until the fence refuses (the
// row is not ours: they wait for this process's next epoch, which writes them before its orphan recovery), or until
// a batch runs (it writes them). The row is not released meanwhile (holdReleaseWhile); once they are written, the
// end of the settler's deferral hands back a row dropped meanwhile.
import type { Clock } from '../lease/clock.js';
import type { LeaseManager } from '../lease/leaseManager.js';
import type { LeaseToken } from '../store/ports.js';
import type { ExecutionState } from './executionState.js';
import type { LeaderFaults } from './leaderFaults.js';

/** Pause between two attempts to write unwritten completions between ticks, doubling up to SETTLER_MAX_RETRY_MS. */
const SETTLER_FIRST_RETRY_MS = 100;
const SETTLER_MAX_RETRY_MS = 1_000;

export class Settler {
  /** The task writing unwritten results (drain awaits it), and the newest token this process led under. */
  private task: Promise<void> | null = null;
  private token: LeaseToken | null = null;
  /** Shutdown gave up waiting: a settler still retrying stops (the row is kept, it expires). */
  private stopped = false;

  /** `batchRunning`: a batch runs now (it writes the results itself; the settler's loop yields to it). */
  constructor(private readonly state: ExecutionState, private readonly faults: LeaderFaults, private readonly lease: LeaseManager,
    private readonly clock: Clock, private readonly batchRunning: () => boolean) {}

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
        await this.state.settled();
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

  /** The loop: an SQL error drops leadership at once while that token leads (LeaderFaults) and is retried. */
  private async writeUnwritten(): Promise<void> {
    let pauseMs = SETTLER_FIRST_RETRY_MS;
    while (!this.stopped && !this.batchRunning() && this.state.pending > 0) {
      const token = this.token!;
      try {
        if ((await this.state.writeBetweenTicks(token)) === 'leaseLost') {
          this.faults.fenceRefusedSettling(token);
          return; // kept for this process's next epoch
        }
      } catch (e) {
        this.faults.settlerSqlError(token, e, this.state.pending);
        await this.clock.sleep(pauseMs);
        pauseMs = Math.min(2 * pauseMs, SETTLER_MAX_RETRY_MS);
      }
    }
  }
}
