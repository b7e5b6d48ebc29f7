// The partition-count changer (issue 26): drives the active change to completion, a bounded step per invocation of
// partition 0's timer, on whichever process runs it (every process can; the one holding lease 0 proceeds).
// Guarantees:
// - Never a stolen lease: it takes each partition lease 0..M−1 (M = max(from, to)) only when free (tryAcquire), in
//   order, so two changers never deadlock; the leaders drain and release on seeing the change (partitionLayout.ts),
//   and no one else acquires while a change is active.
// - Every write (claim, switch, move, complete) is fenced by all M leases at once: a changer that lost any lease
//   writes nothing, forgets its leases and starts over at its next step.
// - Resumable and idempotent: the change's state and scan cursor are in SQL; a crash, a lost reply or a database
//   restart leaves a state the next step (this changer's or another's) continues from. Roll forward once switched;
//   before, an operator may cancel it (cancelChange): every step finds it ended under the change row's lock and
//   writes nothing, and this changer lets its leases go. Failed steps are reported (stepFailures.ts).
// - Once it holds every lease, the switch, scan and catch-up are changeReassignment.ts's.
// - Its holder id is its own (partitionChangerHolderId), so the instance's lease managers never adopt its rows;
//   a row found held by that id (our own lost acquire reply) is adopted.
import type { Clock } from './clock.js';
import type { Logger } from '../observability/logger.js';
import type { LeaseStore } from '../store/ports.js';
import { AdaptiveLimit } from './adaptiveLimit.js';
import { ChangerLeases } from './changerLeases.js';
import { preparingHorizon, Reassignment, type ReassignSettings } from './changeReassignment.js';
import { isChangeActive, type PartitionChange, type PartitionLayout, type PartitionStore } from '../store/partitionPorts.js';
import { StepFailures, type StepFailureMetrics } from './stepFailures.js';

export interface ChangerSettings extends ReassignSettings {
  /** Partition k's lease name (partitionLeaseName(LEASE_NAME, k)). */
  leaseNameOf: (partition: number) => string;
  /** How often a step waiting for a lease looks again (within its deadline). */
  pollMs: number;
  /** The changer's own holder id (partitionChangerHolderId of the instance's). */
  holderId: string;
  durationMs: number;
  renewIntervalMs: number;
  /** A held lease counts as ours until this long before it would expire (LEASE_SAFETY_MARGIN_MS). */
  safetyMarginMs: number;
  /** Ids per key range of the preparing pass (one set-based transaction each, execution going on beside it). */
  prepareBatchSize: number;
  /** The live instances running a release older than count changes need ("holder (version)"; default: none). A
   *  prepared change waits for them to go before it takes any lease, and again before its switch. */
  olderReleasesLive?: () => Promise<string[]>;
  /** PARTITION_CHANGE_STUCK_STEPS: failed steps in a row after which the change is reported stuck. */
  stuckSteps: number;
}

/** No longer to be switched: ended, or cancelled before its switch (its pass moving the finished rows back, holding no
 *  lease). A cancelled change found switched (an older release's changer drove it on) is rolled forward, never left. */
const givenUp = (c: PartitionChange) => !isChangeActive(c) || (c.cancelledAt !== null && c.state !== 'reassigning');

/** How far a step got. */
export type ChangerProgress =
  | { kind: 'none' }
  | { kind: 'preparing'; rowsMoved: number }
  | { kind: 'waiting'; partition: number; held: number; of: number }
  | { kind: 'olderRelease'; instances: string[] }
  | { kind: 'reassigning'; rowsMoved: number; phase: 'scan' | 'catch-up' }
  | { kind: 'completed'; change: PartitionChange }
  | { kind: 'leaseLost' }
  /** Cancelled by an operator (found so by a step): every lease this changer held let go; the change ended, or its
   *  pass moves the finished rows back at the next steps (state preparing, cancelledAt set). */
  | { kind: 'cancelled'; change: PartitionChange }
  | { kind: 'failed'; error: unknown; failedSteps: number; stuck: boolean };

export class PartitionChanger {
  /** The partition leases this changer holds, for `changeId`. */
  private readonly held: ChangerLeases;
  /** Ids per key range of the preparing pass: halved after a failed batch (a statement timeout, say), doubled back
   *  after each success, so no batch fails the same way forever. */
  private readonly ranges: AdaptiveLimit;
  /** The switch, scan and catch-up (their page size, and how this changer switched). */
  private readonly reassign: Reassignment;
  private changeId: string | null = null;
  private claimed = false;
  /** The older instances last logged as holding a change back (logged again only when they change). */
  private olderLogged = '';
  private readonly failures: StepFailures;

  constructor(
    leases: LeaseStore,
    private readonly store: PartitionStore,
    private readonly s: ChangerSettings,
    private readonly clock: Clock,
    private readonly log: Logger,
    metrics?: StepFailureMetrics,
  ) {
    this.held = new ChangerLeases(leases, s, clock, log);
    this.failures = new StepFailures(store, s.stuckSteps, log, metrics);
    this.ranges = new AdaptiveLimit(s.prepareBatchSize);
    this.reassign = new Reassignment(store, s, this.held, clock, log);
  }

  /** The number of leases held now (the dashboard reads the rows; this is for logs and tests). */
  heldCount(): number {
    return this.held.size;
  }

  /** Drive the layout's active change until done or `deadlineMs` (clock.nowMs()); once switched, until done or
   *  `finishByMs` (default deadlineMs): every partition waits for the completion, so it runs on rather than leave it
   *  to the next step, a tick later. Never rejects. */
  async step(layout: PartitionLayout, deadlineMs: number, finishByMs = deadlineMs): Promise<ChangerProgress> {
    const change = layout.active;
    if (!change) {
      await this.releaseAll('no change active');
      return { kind: 'none' };
    }
    if (this.changeId !== change.changeId) {
      await this.releaseAll('another change');
      this.changeId = change.changeId;
      this.claimed = change.changer === this.s.holderId;
    }
    let progress: ChangerProgress;
    try {
      progress = await this.drive(change, deadlineMs, Math.max(deadlineMs, finishByMs));
    } catch (e) {
      return { kind: 'failed', error: e, ...(await this.failures.failed(change, e)) };
    }
    // Only a step that moved the change on resets the count: a changer that waits (for a lease another changer holds,
    // for an older release) says nothing of the step that fails.
    if (progress.kind === 'preparing' || progress.kind === 'reassigning' || progress.kind === 'completed') await this.failures.succeeded(change);
    return progress;
  }

  /** A live instance of an older release (whose intake the switch would not exclude, whose changer raises no layout
   *  generation): the change waits, holding lease 0 only (taken if free, else left to whoever has it). An older
   *  release's changer takes the leases in order from 0 and has no such wait: while a changer of this release holds
   *  lease 0 it takes none of them; when it holds lease 0, the database refuses it the claim and the switch of a change
   *  this release requested (the release guard, partitionMapping.ts requestingRelease), so it takes no further lease.
   *  Execution waits either way: every partition has drained to the change (partitionLayout.ts). */
  private async olderRelease(change: PartitionChange): Promise<ChangerProgress | null> {
    const older = (await this.s.olderReleasesLive?.()) ?? [];
    if (older.length === 0) {
      this.olderLogged = '';
      return null;
    }
    await this.held.releaseAbove(0, 'an older release is live');
    if (!(await this.held.hold(0))) this.claimed = false;
    const list = older.join(', ');
    if (list !== this.olderLogged) {
      this.olderLogged = list;
      this.log.warn({ event: 'partition_change_waiting_release', change_id: change.changeId, older_instances: older },
        `partition change waits: ${list} run(s) a release older than count changes need; it switches once none is live`);
    }
    return { kind: 'olderRelease', instances: older };
  }

  /** Release every lease held (graceful stop): the next changer need not wait for them to expire. Never rejects. */
  async close(): Promise<void> {
    await this.releaseAll('closing');
  }

  private async drive(initial: PartitionChange, deadlineMs: number, finishByMs: number): Promise<ChangerProgress> {
    let change = initial;
    if (change.cancelledAt !== null && change.state !== 'reassigning') {
      await this.releaseAll('change cancelled'); // its pass moves the rows back, no lease
      // Pending once cancelled: a previous release's changer ran that pass to its end (its last batch knows no cancel).
      if (change.state === 'pending') {
        await this.store.cancelChange(change.changeId, change.cancelledBy ?? this.s.holderId); // ends it: nothing left to move
        return this.ended(change);
      }
    }
    if (change.state === 'preparing') {
      const prepared = await this.prepare(change, deadlineMs);
      if (!isChangeActive(prepared)) return this.ended(prepared);
      if (prepared.state === 'preparing') return { kind: 'preparing', rowsMoved: prepared.rowsMoved };
      change = prepared;
    }
    const m = Math.max(change.fromCount, change.toCount);
    if (change.state === 'pending') {
      const older = await this.olderRelease(change);
      if (older) return older;
    }
    for (let k = 0; k < m; k++) {
      if (this.clock.nowMs() >= deadlineMs) return { kind: 'waiting', partition: k, held: this.held.size, of: m };
      // A lease still held by a draining leader: look again every pollMs until the deadline (renewing ours).
      while (!(await this.held.hold(k))) {
        // A lease below others we hold went (it expired and was taken): let the higher ones go too, so a changer
        // that took the lower one need not wait them out; taking in order resumes at the next step.
        if (this.held.anyAbove(k)) return this.lost(change);
        const waitMs = Math.min(this.s.pollMs, deadlineMs - this.clock.nowMs());
        if (waitMs <= 0 || !(await this.held.renewDue(k))) return { kind: 'waiting', partition: k, held: this.held.size, of: m };
        await new Promise((r) => setTimeout(r, waitMs));
        // Cancelled while this changer waits: let go now rather than hold leases until its deadline.
        const now = await this.store.getChange(change.changeId);
        if (!now || givenUp(now)) return this.ended(now ?? change);
      }
      if (k === 0) {
        // Holding lease 0, read the change as it is now: another changer may have completed it while this one
        // waited (its layout was read before), and then every lease this one would take must stay free.
        const now = this.claimed ? await this.store.getChange(change.changeId) : await this.claim(change);
        if (now === 'lost') return this.lost(change);
        if (!now || givenUp(now)) return this.ended(now ?? change);
        change = now;
      }
    }
    if (change.state === 'pending') {
      const older = await this.olderRelease(change); // one may have started while the leases were taken
      if (older) return older;
      const out = await this.reassign.switch(change, m);
      if (out.kind === 'leaseLost') return this.lost(change);
      if (out.value.state !== 'reassigning') return this.ended(out.value); // cancelled after the claim: nothing switched
      change = out.value;
      this.log.warn({ event: 'partition_change_switched', change_id: change.changeId, from: change.fromCount, to: change.toCount },
        `partition count switched to ${change.toCount}: every lease held, in-flight work recovered; moving intents`);
    }
    while (change.state === 'reassigning') {
      if (this.clock.nowMs() >= finishByMs) return { kind: 'reassigning', rowsMoved: change.rowsMoved, phase: change.scanDoneAt ? 'catch-up' : 'scan' };
      if (!(await this.held.renewDue(m))) return this.lost(change);
      const next = change.scanDoneAt === null ? await this.reassign.scanBatch(change, m) : await this.reassign.catchUp(change, m, finishByMs);
      if (next === 'lost') return this.lost(change);
      if (next === 'wait') return { kind: 'reassigning', rowsMoved: change.rowsMoved, phase: 'catch-up' };
      change = next;
    }
    // Ended by completeChange ('cancelled' when it was cancelled and then switched by an older release's changer).
    if (isChangeActive(change)) return { kind: 'none' };
    this.held.forget(); // released by completeChange, in its transaction
    this.log.warn({ event: 'partition_change_completed', change_id: change.changeId, from: change.fromCount, to: change.toCount,
      rows_moved: change.rowsMoved, requested_at: change.requestedAt.toISOString(), completed_at: change.completedAt?.toISOString() ?? null },
    `partition change completed: ${change.toCount} partition(s), ${change.rowsMoved} intent(s) moved; every lease released`);
    return { kind: 'completed', change };
  }

  /** The preparing pass, with no lease while execution goes on: finished intents (which nothing executes, and which
   *  the store moves only while finished) go to their partition under the new count, a key range at a time, set-based
   *  in SQL (the store computes the partition rule; no row is read here), the cursor recorded with each. Several
   *  changers may run it at once: each batch continues from the recorded cursor under the change row's lock. */
  private async prepare(initial: PartitionChange, deadlineMs: number): Promise<PartitionChange> {
    let change = initial;
    while (change.state === 'preparing' && this.clock.nowMs() < deadlineMs) {
      const next = await this.ranges.run((limit) => this.store.prepareBatch(change.changeId, { limit, horizon: preparingHorizon(change, this.s) }));
      if (!next) return change;
      change = next;
    }
    if (change.state === 'pending' && initial.state === 'preparing') {
      this.log.info({ event: 'partition_change_prepared', change_id: change.changeId, rows_moved: change.rowsMoved },
        `partition change ${change.fromCount} → ${change.toCount}: finished intents moved; leaders now drain`);
    }
    return change;
  }

  private async claim(change: PartitionChange): Promise<PartitionChange | 'lost'> {
    const out = await this.store.claimChange(this.held.fence(1), change.changeId);
    if (out.kind === 'leaseLost') return 'lost';
    this.claimed = true;
    this.log.info({ event: 'partition_change_claimed', change_id: change.changeId, from: change.fromCount, to: change.toCount },
      `partition change ${change.fromCount} → ${change.toCount}: taking the partition leases as they are released`);
    return out.value;
  }

  /** The change ended while this changer drove it (cancelled, or completed by another changer): let every lease go. */
  private async ended(change: PartitionChange): Promise<ChangerProgress> {
    const cancelled = change.state === 'cancelled' || change.cancelledAt !== null;
    if (cancelled) {
      this.log.warn({ event: 'partition_change_cancel_seen', change_id: change.changeId, cancelled_by: change.cancelledBy, held: this.held.size },
        'partition change cancelled: this changer writes nothing more and lets its leases go');
    }
    await this.releaseAll(cancelled ? 'change cancelled' : 'change already completed');
    return cancelled ? { kind: 'cancelled', change } : { kind: 'none' };
  }

  private async lost(change: PartitionChange): Promise<ChangerProgress> {
    this.log.warn({ event: 'partition_change_lease_lost', change_id: change.changeId },
      'partition change: a lease of the fence is not ours any more; starting over at the next step');
    await this.releaseAll('lease lost');
    return { kind: 'leaseLost' };
  }

  private async releaseAll(reason: string): Promise<void> {
    this.claimed = false;
    await this.held.releaseAll(reason);
  }
}
