// The fair share of partitions for one instance in `every-instance` timer mode (issue 25): every instance ticks every
// partition, but takes at most its share (fairShare.ts decides, from the heartbeat's live list). One owner per app:
// it decides at most once per half timer period (the policy's hysteresis counts decisions, not partition ticks),
// gates each partition's acquire (a leading partition renews regardless: the gate is asked only to acquire), and
// hands one partition back through the handover path — a local request to that partition's executor (it starts
// nothing more, finishes and fences what is in flight, then releases), cancelled if the lease goes first. Never a
// stolen lease: a partition moves only after its holder let it go. A process that cannot run every partition of the
// recorded count (EXECUTOR_PARTITIONS below it) is outside the share: it takes only partitions nobody took (fairShare.ts);
// a process of one partition inside the share is not gated at all (its lease alone decides, as before sharing).
// A process claims its place in the share (role `fair-share` in its heartbeat row, claimsShare()) only from its first
// timer tick on, and beats at once then: until its timers run the others do not count it, so they keep or take the
// partitions it could not take yet (none stays unled waiting for it); once counted, the hand-back rules rebalance.
// One counted but silent (cut off from the database, its row still live, its beats missed) delays a partition whose
// turn is its own by a couple of decisions only: an instance at its share then takes it ('stranded', fairShare.ts).
import type { Clock } from './clock.js';
import type { LeaseManager } from './leaseManager.js';
import type { Logger } from '../observability/logger.js';
import { FairShare, type FairShareDecision, type LiveInstance } from './fairShare.js';
import type { InstanceHeartbeat } from './instanceHeartbeat.js';

export class PartitionShare {
  // Patience 1: a partition free by its lease for one decision may be taken by any instance below its share (a dead
  // leader's partitions are retaken at the next decision after their leases expire, not three later). What keeps an
  // instance from re-taking the partition it just handed back is the cool-down below, not the policy's patience.
  private readonly policy = new FairShare({ patience: 1 });
  /** Partitions this instance handed back → when (ms): not re-taken by it for two timer periods. */
  private readonly handedBackAt = new Map<number, number>();
  private decision: FairShareDecision | null = null;
  /** The lease holders as of the last read (null: not read, or the read failed: the heartbeat rows then say). */
  private holders: (string | null)[] | null = null;
  /** When the soonest lease of another holder runs out, as last read (local ms): a decision is made afresh from then
   *  on, so a dead leader's partitions are taken at the next tick after their leases expire, not half a period later. */
  private nextForeignExpiryMs = Number.POSITIVE_INFINITY;
  private decidedAtMs = Number.NEGATIVE_INFINITY;
  private decidedCount = 0;
  private decidedSharing: boolean | null = null;
  /** The last decision's reason ('stranded' is logged when it starts, not at every decision). */
  private lastReason: FairShareDecision['reason'] | null = null;
  /** Partitions whose hand-back was requested and which this instance still leads. */
  private readonly handingBack = new Set<number>();
  /** A timer of this process has fired (onTick): from then on it claims its place in the share. */
  private ticking = false;

  constructor(
    private readonly leases: readonly Pick<LeaseManager, 'requireLeader' | 'onChange'>[],
    /** The recorded partition count now (issue 26): only partitions below it are shared (≤ leases.length). */
    private readonly count: () => number,
    private readonly heartbeat: Pick<InstanceHeartbeat, 'liveSharers' | 'beat' | 'listAgeMs'>,
    /** Hand partition k back through the handover path (its executor drains, then releases); `cancel` when the lease
     *  went meanwhile. Local to this instance: a hand-back never outlives the lease it was meant for. */
    private readonly handBack: { request(partition: number): void; cancel(partition: number): void },
    private readonly holderId: string,
    private readonly periodMs: number,
    /** A decision is made on a live list at most this old (INSTANCE_HEARTBEAT_MS): older, it is read again first. */
    private readonly freshListMs: number,
    /** Who holds each partition's lease now, by database time (null: free or expired), read for each new decision:
     *  what the others lead is judged by the leases, not by their heartbeat rows, which lag (a dead instance's row
     *  would claim its partitions until it leaves the live window, long after their leases expired). */
    private readonly readHolders: () => Promise<({ holderId: string; expiresInMs: number } | null)[]>,
    private readonly clock: Clock,
    private readonly log: Logger,
  ) {
    leases.forEach((lease, k) => lease.onChange((c) => {
      if (c.kind !== 'acquired' && this.handingBack.delete(k)) {
        this.handBack.cancel(k);
        this.handedBackAt.set(k, this.clock.nowMs());
      }
      void this.heartbeat.beat(true); // the others see the change at once, not a heartbeat later (a beat in flight may predate it)
    }));
  }

  /** The partitions this instance leads now. */
  held(): number[] {
    return this.leases.flatMap((l, k) => (k < this.partitionCount() && l.requireLeader() ? [k] : []));
  }

  /** A partition's timer fired: decide again if the last decision is older than half a period (a hand-back due is
   *  requested here, so an instance leading all its partitions still gives one back), on a live list no older than
   *  a heartbeat (read again first if it is: instances started together would otherwise each see a list without
   *  the others, take too much and hand it back). Never rejects (the heartbeat never does). */
  async onTick(): Promise<void> {
    if (!this.ticking) {
      this.ticking = true;
      // The row claims the share from now (claimsShare()): written at once, so the others count this one from now.
      if (this.sharing()) await this.heartbeat.beat(true);
    }
    if (this.ungated()) return;
    if (!this.decisionFresh()) {
      const age = this.heartbeat.listAgeMs();
      if (age === null || age > this.freshListMs) await this.heartbeat.beat();
      const readAt = this.clock.nowMs();
      const rows = await this.readHolders().catch((e: unknown) => {
        this.log.debug({ event: 'partition_holders_read_failed', err: (e as Error).message }, 'lease holders not read: judging by the heartbeat rows');
        return null;
      });
      this.holders = rows && rows.map((r) => r?.holderId ?? null);
      const foreign = (rows ?? []).flatMap((r) => (r && r.holderId !== this.holderId ? [r.expiresInMs] : []));
      this.nextForeignExpiryMs = foreign.length ? readAt + Math.min(...foreign) : Number.POSITIVE_INFINITY;
      this.decision = null; // decide on what was just read
    }
    this.current();
  }

  /** The live sharers, each with the partitions whose lease it holds now (when the leases were read), and the
   *  partitions whose lease another instance outside the share holds. */
  private view(): { live: LiveInstance[] | null; elsewhere: number[] } {
    const sharers = this.heartbeat.liveSharers();
    const holders = this.holders;
    if (!sharers || !holders) return { live: sharers, elsewhere: [] };
    const ids = new Set([this.holderId, ...sharers.map((i) => i.holderId)]);
    const ofHolder = (want: (h: string) => boolean) => holders.flatMap((h, k) => (h !== null && want(h) && k < this.partitionCount() ? [k] : []));
    return { live: sharers.map((i) => ({ ...i, partitions: ofHolder((h) => h === i.holderId) })),
      elsewhere: ofHolder((h) => !ids.has(h)) };
  }

  /** Whether this process takes part in the fair share: it can run every partition of the recorded count. */
  sharing(): boolean {
    return this.count() <= this.leases.length;
  }

  /** Whether this process's heartbeat row claims its place in the share (role `fair-share`): it can run every
   *  partition of the recorded count and a timer of it has fired. Before that, nobody counts it. */
  claimsShare(): boolean {
    return this.ticking && this.sharing();
  }

  /** A process of one partition inside the share: no decision, no gate (its lease alone decides). */
  private ungated(): boolean {
    return this.leases.length === 1 && this.sharing();
  }

  /** May partition k try to acquire now? (Only asked while not leading k.) */
  mayAcquire(k: number): boolean {
    // Only the decision's first acquireMax candidates (free ones first): partition timers ticking at once can never
    // take more than the share, and a partition just freed goes to the instance whose turn it is, not the quickest.
    if (this.ungated()) return true;
    const d = this.current();
    const handedBack = this.handedBackAt.get(k);
    if (handedBack !== undefined && this.clock.nowMs() - handedBack < 2 * this.periodMs) return false;
    return d.acquire.slice(0, d.acquireMax).includes(k);
  }

  private partitionCount(): number {
    return Math.min(this.count(), this.leases.length);
  }

  private decisionFresh(): boolean {
    const now = this.clock.nowMs();
    return this.decision !== null && now - this.decidedAtMs < this.periodMs / 2 && now < this.nextForeignExpiryMs &&
      this.decidedCount === this.count();
  }

  private current(): FairShareDecision {
    const now = this.clock.nowMs();
    if (this.decision && this.decisionFresh()) return this.decision;
    const sharing = this.sharing();
    const d = this.policy.decide({ partitionCount: this.partitionCount(), self: this.holderId, held: this.held(),
      draining: [...this.handingBack], ...this.view(), sharing });
    this.decision = d;
    this.decidedAtMs = now;
    this.decidedCount = this.count();
    // Joining or leaving the share: the row says so now (its roles), not a heartbeat later.
    if (this.decidedSharing !== null && this.decidedSharing !== sharing) void this.heartbeat.beat(true);
    this.decidedSharing = sharing;
    if (d.reason === 'stranded' && this.lastReason !== 'stranded') {
      this.log.info({ event: 'partition_stranded', partitions: d.acquire, share: d.share, live_instances: d.liveInstances },
        `partition(s) ${d.acquire.join(',')} left free by the instance whose turn it was: trying one above the fair share ${d.share}`);
    }
    this.lastReason = d.reason;
    if (d.handBack !== null && !this.handingBack.has(d.handBack)) {
      const k = d.handBack;
      this.handingBack.add(k);
      this.log.info({ event: 'partition_hand_back', partition: k, share: d.share, live_instances: d.liveInstances, reason: d.reason },
        `handing partition ${k} back (fair share ${d.share} of ${this.partitionCount()} over ${d.liveInstances} live instances)`);
      this.handBack.request(k);
    }
    return d;
  }
}
