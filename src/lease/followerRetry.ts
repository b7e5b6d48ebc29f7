// When a follower tries the lease again: right after the expiry it observed (by database time, so a skewed local
// clock changes nothing), at most LEASE_ACQUIRE_INTERVAL_MS later, plus jitter; after an SQL error within a second.
// Refusals by the same holder and epoch say so at info once a minute (debug in between).
import type { Logger } from '../observability/logger.js';
import type { LeaseRow } from '../store/ports.js';
import type { Clock } from './clock.js';
import { RepeatLog } from './repeatLog.js';

const REFUSAL_INFO_EVERY_MS = 60_000;

export class FollowerRetry {
  /** Monotonic time before which a follower need not try again. -Infinity = no wait: the monotonic clock has an
   *  arbitrary origin and may be negative. */
  private retryAtMs = Number.NEGATIVE_INFINITY;
  private readonly refusals = new RepeatLog(REFUSAL_INFO_EVERY_MS);

  constructor(
    private readonly settings: { acquireIntervalMs: number; acquireJitterMs: number },
    private readonly clock: Clock,
    private readonly random: () => number,
  ) {}

  /** Milliseconds until a follower should try again (0: now). */
  delayMs(): number {
    return Math.max(0, this.retryAtMs - this.clock.nowMs());
  }

  /** Refused: try again once the row we saw expires (capped), and log it at the level the repeat allows. */
  refused(current: LeaseRow | null, dbNow: Date, holderId: string, log: Logger): void {
    const untilExpiry = current ? Math.max(0, current.expiresAt.getTime() - dbNow.getTime()) : 0;
    this.retryAtMs = this.clock.nowMs() + Math.min(untilExpiry, this.settings.acquireIntervalMs) + this.jitter();
    const observed = current ? `${current.holderId}#${current.leaseEpoch}` : '';
    const { level, repeats } = this.refusals.next(observed, this.clock.nowMs());
    log[level]({ event: 'leader_acquire_failed', holder_id: holderId, lease_epoch: current?.leaseEpoch,
      current_holder_id: current?.holderId, expires_at: current?.expiresAt.toISOString(), repeats }, 'lease held by another instance');
  }

  /** The acquire failed (SQL error): try again within a second. */
  failed(): void {
    this.retryAtMs = this.clock.nowMs() + this.jitter() + Math.min(this.settings.acquireIntervalMs, 1_000);
  }

  /** Just stepped down: the next try may come at once. */
  steppedDown(): void {
    this.retryAtMs = Number.NEGATIVE_INFINITY;
  }

  /** Leading: the next refusal is news again. */
  led(): void {
    this.refusals.reset();
  }

  private jitter(): number {
    return Math.floor(this.random() * this.settings.acquireJitterMs);
  }
}
