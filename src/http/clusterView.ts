// The cluster's leader as SQL holds it, for any instance's /readyz and /metrics (on Flex, HTTP instances never
// lead: their own role says nothing about the executor). One lease-row read per app at most once a second;
// concurrent callers share it. A failed read is reported (error), never thrown: readiness stays answerable.
import type { LeaseStore } from '../store/ports.js';

export interface ClusterLeader {
  holderId: string;
  leaseEpoch: number;
  expiresAt: Date;
  renewedAt: Date;
  acquiredAt: Date;
  /** expiresAt > database now when read. */
  live: boolean;
}

export interface ClusterView {
  /** The lease row's holder (null: never acquired); `live` false once it expired or was released. */
  leader: ClusterLeader | null;
  /** Database time of the read (null when it failed). */
  readAt: Date | null;
  /** Why the read failed (no secrets, no SQL text), else null. */
  error: string | null;
}

export const CLUSTER_VIEW_MAX_AGE_MS = 1_000;

export class ClusterViewCache {
  private last: { atMs: number; view: Promise<ClusterView> } | null = null;

  constructor(private readonly lease: LeaseStore, private readonly leaseName: string, private readonly nowMs: () => number = () => performance.now()) {}

  /** The cached view if at most CLUSTER_VIEW_MAX_AGE_MS old, else a fresh read. */
  get(): Promise<ClusterView> {
    const now = this.nowMs();
    if (this.last && now - this.last.atMs <= CLUSTER_VIEW_MAX_AGE_MS) return this.last.view;
    const view = this.read();
    this.last = { atMs: now, view };
    return view;
  }

  private async read(): Promise<ClusterView> {
    try {
      const r = await this.lease.get(this.leaseName);
      if (!r) return { leader: null, readAt: null, error: null };
      return {
        leader: { holderId: r.holderId, leaseEpoch: r.leaseEpoch, expiresAt: r.expiresAt, renewedAt: r.renewedAt, acquiredAt: r.acquiredAt,
          live: r.expiresAt.getTime() > r.dbNow.getTime() },
        readAt: r.dbNow,
        error: null,
      };
    } catch (e) {
      this.last = null; // do not cache a failure
      return { leader: null, readAt: null, error: `database read failed: ${String((e as Error)?.message ?? e).split('\n')[0]!.slice(0, 200)}` };
    }
  }
}
