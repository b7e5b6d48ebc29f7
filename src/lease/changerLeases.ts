// The partition leases a changer holds (src/lease/partitionChanger.ts, issue 26), their one owner: taken only when
// free (tryAcquire), a row held by the changer's own id adopted (its lost acquire reply), renewed when due, counted
// as ours locally until LEASE_DURATION_MS − LEASE_SAFETY_MARGIN_MS after the renew was sent (writes are fenced in SQL
// regardless), released conditionally (holder and epoch) when the changer lets go.
import type { Clock } from './clock.js';
import type { Logger } from '../observability/logger.js';
import { sqlErrorField } from '../observability/logger.js';
import type { LeaseStore, LeaseToken } from '../store/ports.js';

interface Held { token: LeaseToken; validUntilMs: number; renewedAtMs: number }

export interface ChangerLeaseSettings {
  leaseNameOf: (partition: number) => string;
  holderId: string;
  durationMs: number;
  renewIntervalMs: number;
  safetyMarginMs: number;
}

export class ChangerLeases {
  private readonly held = new Map<number, Held>();

  constructor(private readonly store: LeaseStore, private readonly s: ChangerLeaseSettings, private readonly clock: Clock,
    private readonly log: Logger) {}

  get size(): number {
    return this.held.size;
  }

  /** Whether a lease above partition k is held (taking in order: one below it was lost). */
  anyAbove(k: number): boolean {
    return [...this.held.keys()].some((j) => j > k);
  }

  /** Forget every lease without a statement (completeChange released them in its transaction). */
  forget(): void {
    this.held.clear();
  }

  /** The fence of the first `n` partition leases, in partition order. */
  fence(n: number): LeaseToken[] {
    return Array.from({ length: n }, (_, k) => this.held.get(k)!.token);
  }

  /** Hold partition k's lease: renew it when due, else take it if free (or adopt it: our own lost reply). */
  async hold(k: number): Promise<boolean> {
    const h = this.held.get(k);
    if (h && (await this.renewIfDue(k, h))) return true;
    const name = this.s.leaseNameOf(k);
    const sentAt = this.clock.nowMs();
    const out = await this.store.tryAcquire(name, this.s.holderId, this.s.durationMs);
    if (out.acquired) {
      this.keep(k, { leaseName: name, holderId: this.s.holderId, leaseEpoch: out.lease.leaseEpoch }, sentAt);
      return true;
    }
    const cur = out.current;
    if (cur && cur.holderId === this.s.holderId && cur.expiresAt.getTime() > out.dbNow.getTime()) {
      // Ours: an acquire whose reply was lost. Renew it at once to learn it is still ours.
      const token = { leaseName: name, holderId: this.s.holderId, leaseEpoch: cur.leaseEpoch };
      const renewedSentAt = this.clock.nowMs();
      if (await this.store.renew(token, this.s.durationMs)) {
        this.keep(k, token, renewedSentAt);
        return true;
      }
    }
    return false;
  }

  private keep(k: number, token: LeaseToken, sentAtMs: number): void {
    this.held.set(k, { token, renewedAtMs: sentAtMs, validUntilMs: sentAtMs + this.s.durationMs - this.s.safetyMarginMs });
  }

  /** Renew a held lease if its renew interval passed. false: not ours any more (forgotten). A renew that failed
   *  (no reply) keeps the lease while its local validity lasts. */
  private async renewIfDue(k: number, h: Held): Promise<boolean> {
    const now = this.clock.nowMs();
    if (now - h.renewedAtMs < this.s.renewIntervalMs && now < h.validUntilMs) return true;
    try {
      if (await this.store.renew(h.token, this.s.durationMs)) {
        this.keep(k, h.token, now);
        return true;
      }
    } catch (e) {
      if (this.clock.nowMs() < h.validUntilMs) return true;
      this.log.warn({ event: 'partition_change_renew_failed', partition: k, sql_error: sqlErrorField(e) }, 'changer lease renew failed');
    }
    this.held.delete(k);
    return false;
  }

  /** Renew each of the first m leases that is due; false if any is not ours any more. */
  async renewDue(m: number): Promise<boolean> {
    for (let k = 0; k < m; k++) {
      const h = this.held.get(k);
      if (!h || !(await this.renewIfDue(k, h))) return false;
    }
    return true;
  }

  async releaseAll(reason: string): Promise<void> {
    return this.releaseAbove(-1, reason);
  }

  /** Release every lease held above partition k (those up to k are kept). */
  async releaseAbove(k: number, reason: string): Promise<void> {
    const above = [...this.held].filter(([j]) => j > k);
    if (above.length === 0) return;
    const tokens = above.map(([, h]) => h.token);
    for (const [j] of above) this.held.delete(j);
    await Promise.all(tokens.map((t) => this.store.release(t).catch((e: unknown) => {
      this.log.warn({ event: 'partition_change_release_failed', lease_name: t.leaseName, reason, sql_error: sqlErrorField(e) }, 'changer lease not released: it expires');
    })));
  }
}
