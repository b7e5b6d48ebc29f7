// Between two timer ticks the leader goes on refreshing and executing: one batch with no budget that renews when
// due until the timer's next occurrence, until the next tick takes over ('next_tick': its calls carried, its
// completions written), the local lease deadline (a leader whose ticks stop coming steps down one timer period +
// the lease after its last tick began), or any other stop reason (drain, handover, SQL error, lease lost). One at
// a time; the executor builds its batch and counts its work.
import type { LeaseManager } from '../lease/leaseManager.js';
import type { Logger } from '../observability/logger.js';
import { sqlErrorField } from '../observability/logger.js';
import type { LeaseToken } from '../store/ports.js';
import type { Batch } from './batch.js';

export class TickBridge {
  private running: { batch: Batch; ended: Promise<void> } | null = null;
  private handingOver = false;

  constructor(private readonly lease: LeaseManager, private readonly log: Logger) {}

  /** The bridge batch's stop request: 'next_tick' while a tick takes over. */
  stopRequest(): 'next_tick' | null {
    return this.handingOver ? 'next_tick' : null;
  }

  /** Resolves once the running bridge (if any) has ended. */
  ended(): Promise<void> | undefined {
    return this.running?.ended;
  }

  /** Run `batch` until it stops; `after` runs once it has (inside the release deferral held meanwhile). */
  start(token: LeaseToken, batch: Batch, after: () => void): void {
    const releaseDeferred = this.lease.deferRelease(); // a step-down's release waits for its completions
    const fields = { holder_id: token.holderId, lease_epoch: token.leaseEpoch };
    const ended = (async () => {
      try {
        const reason = await batch.run();
        if (reason !== 'next_tick') this.log.info({ event: 'bridge_ended', ...fields, stop_reason: reason }, 'the leader stopped executing between ticks');
      } catch (e) {
        this.log.error({ event: 'executor_sql_error', ...fields, sql_error: sqlErrorField(e) }, 'executor stopped on SQL error');
        this.lease.drop('sql_error', e);
      } finally {
        this.running = null;
        after();
        await releaseDeferred();
      }
    })();
    this.running = { batch, ended };
  }

  /** A tick begins: the bridge closes (its calls carried, its completions written) before anything else runs. */
  async handOver(): Promise<void> {
    const running = this.running;
    if (!running) return;
    this.handingOver = true;
    try {
      running.batch.interrupt();
      await running.ended;
    } finally {
      this.handingOver = false;
    }
  }
}
