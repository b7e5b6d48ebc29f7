// Between two timer ticks the leader goes on refreshing and executing: one batch with no budget that renews when
// due until the timer's next occurrence, until the next tick takes over ('next_tick': its calls carried, its
// completions written), the local lease deadline (a leader whose ticks stop coming steps down one timer period +
// the lease after its last tick began), or any other stop reason (drain, handover, SQL error, lease lost). One at
// a time; the executor builds its batch and counts its work.
import type { Clock } from '../lease/clock.js';
import type { LeaseManager } from '../lease/leaseManager.js';
import type { Logger } from '../observability/logger.js';
import type { LeaseToken } from '../store/ports.js';
import type { Batch } from './batch.js';
import type { LeaderFaults } from './leaderFaults.js';

/** How often a tick waiting for the bridge's hand-over checks whether a renew is due. */
const HANDOVER_RENEW_POLL_MS = 50;

export class TickBridge {
  private running: { batch: Batch; ended: Promise<void> } | null = null;
  private handingOver = false;

  constructor(private readonly lease: LeaseManager, private readonly clock: Clock, private readonly log: Logger,
    private readonly faults: LeaderFaults) {}

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
        this.faults.sqlError(token, e);
      } finally {
        this.running = null;
        after();
        await releaseDeferred();
      }
    })();
    this.running = { batch, ended };
  }

  /** A tick begins: the bridge closes (its calls carried, its completions written) before anything else runs, and
   *  meanwhile the tick renews on time. A bridge write held up (a slow or lost reply waits up to the client deadline)
   *  must not let the lease run out behind it: the next leader would send its 2xx again (campaign on 544d11c,
   *  every-instance: 18 re-sends). */
  async handOver(): Promise<void> {
    const running = this.running;
    if (!running) return;
    let handed = false;
    const handing = this.close(running).finally(() => (handed = true));
    while (!handed) {
      if (this.lease.requireLeader() && this.lease.renewDue()) await this.lease.renew();
      const stop = new AbortController();
      await Promise.race([handing, this.clock.sleep(HANDOVER_RENEW_POLL_MS, stop.signal).catch(() => {})]);
      stop.abort();
    }
    await handing;
  }

  private async close(running: { batch: Batch; ended: Promise<void> }): Promise<void> {
    this.handingOver = true;
    try {
      running.batch.interrupt();
      await running.ended;
    } finally {
      this.handingOver = false;
    }
  }
}
