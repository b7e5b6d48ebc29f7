// Which rows of ours the lease manager hands back, and when: after a local step-down that says nothing about the row
// (released best-effort, conditional on holder and epoch, retried while the row is surely valid), and an epoch of
// ours whose acquire committed with its reply lost (handed back at the next try). Guarantees: never while results
// are unwritten (holdWhile), since a released row lets another instance recover their attempts as orphans and send
// them again; never while an executor tick defers it (defer); never the row of an epoch this process leads again;
// never while this process's provider calls exceed the share of the partitions it keeps (fits: the next leader would
// add its share on top), waiting for them as long as the row is surely ours, then leaving it to expire.
// It speaks to the LeaseStore port only (release), never SQL.
import type { Logger } from '../observability/logger.js';
import { sqlErrorField } from '../observability/logger.js';
import type { LeaseRow, LeaseStore, LeaseToken } from '../store/ports.js';
import type { Clock } from './clock.js';

/** Local step-downs after which the row may still be ours: release it (conditional, harmless otherwise). */
const RELEASE_ON_DROP = new Set(['sql_error', 'renew_error', 'local_deadline']);

/** A failed best-effort release is retried this often, at most RELEASE_ATTEMPTS times in all. */
const RELEASE_RETRY_MS = 100;
const RELEASE_ATTEMPTS = 4;

/** How often a release held back by calls above the kept share looks again. */
export const SHARE_POLL_MS = 20;

/** A row to hand back, and (monotonic) how long a retry is surely useful: the row does not expire before the last
 *  acquire/renew's send time + duration (it counts from that statement's arrival). */
export interface Dropped {
  token: LeaseToken;
  untilMs: number;
}

export class HandBack {
  /** While > 0 (an executor tick finishing in-flight work), releases after a drop wait in `deferred`. */
  private deferrals = 0;
  private deferred: Dropped[] = [];
  /** True while results (provider calls, completions) are unwritten: no row is released then, not even on shutdown. */
  private unwrittenNow: () => boolean = () => false;
  /** Writes what is unwritten under a token of ours (an unseen epoch, before it is handed back); must not throw. */
  private writeUnder: (token: LeaseToken) => Promise<void> = async () => {};
  /** The highest epoch this manager ever led, and whether an acquire of ours may have committed unseen (its reply
   *  was lost: client deadline, reset after commit). Cleared by the next acquire that succeeds. */
  private knownEpoch = 0;
  private acquireUnseen = false;
  /** This process's provider calls fit the share of the partitions it keeps (releaseWhenFits; default: always). */
  private fitsNow: () => boolean = () => true;
  /** Releases waiting for the calls to fit (polled every SHARE_POLL_MS while the row is surely ours). */
  private overShare: Dropped[] = [];
  private polling = false;

  constructor(private readonly store: Pick<LeaseStore, 'release'>, private readonly holderId: string,
    private readonly clock: Clock, private readonly log: Logger) {}

  /** See LeaseManager.holdReleaseWhile. */
  holdWhile(unwritten: () => boolean, writeUnder: (token: LeaseToken) => Promise<void>): void {
    this.unwrittenNow = unwritten;
    this.writeUnder = writeUnder;
  }

  /** See LeaseManager.releaseWhenFits. */
  holdUntilFits(fits: () => boolean): void {
    this.fitsNow = fits;
  }

  /** This process's calls fit the share of the partitions it keeps now. */
  get fits(): boolean {
    return this.fitsNow();
  }

  /** Results are unwritten now: no row may be released. */
  get unwritten(): boolean {
    return this.unwrittenNow();
  }

  /** See LeaseManager.deferRelease. */
  defer(): () => Promise<void> {
    this.deferrals++;
    let done = false;
    return async () => {
      if (done) return;
      done = true;
      if (--this.deferrals > 0 || this.unwrittenNow()) return;
      const dropped = this.deferred.splice(0);
      await Promise.all(dropped.map((d) => this.releaseWhenFits(d)));
    };
  }

  /** A step-down for `reason` from `dropped`: handed back if the row may still be ours (RELEASE_ON_DROP). */
  steppedDown(reason: string, dropped: Dropped): void {
    if (RELEASE_ON_DROP.has(reason)) this.releaseOrDefer(dropped);
  }

  /** Hand `dropped` back now, or once no deferral holds it and nothing is unwritten. */
  releaseOrDefer(dropped: Dropped): void {
    if (this.deferrals > 0 || this.unwrittenNow()) this.deferred.push(dropped);
    else void this.releaseWhenFits(dropped);
  }

  /** Release now if the calls fit the kept share; else once they do, while the row is surely ours (else it expires). */
  private async releaseWhenFits(dropped: Dropped): Promise<void> {
    if (this.fitsNow()) return this.releaseQuietly(dropped);
    this.overShare.push(dropped);
    this.pollShare();
  }

  private pollShare(): void {
    if (this.polling) return;
    this.polling = true;
    void this.clock.sleep(SHARE_POLL_MS).then(() => {
      this.polling = false;
      const waiting = this.overShare.splice(0);
      const fits = this.fitsNow();
      for (const d of waiting) {
        if (fits && !this.unwrittenNow()) void this.releaseQuietly(d);
        else if (this.clock.nowMs() + SHARE_POLL_MS < d.untilMs) this.overShare.push(d);
      }
      if (this.overShare.length > 0) this.pollShare();
    });
  }

  /** Keep `dropped` (results are unwritten): handed back when a later deferral ends with everything written. */
  keep(dropped: Dropped): void {
    this.deferred.push(dropped);
  }

  /** This process leads `epoch` (an acquire succeeded and was seen): a release still waiting for an older step-down's
   *  results must never hit the row we now hold, and no acquire of ours is unseen any more. */
  led(epoch: number): void {
    this.deferred = this.deferred.filter((d) => d.token.leaseEpoch !== epoch);
    this.overShare = this.overShare.filter((d) => d.token.leaseEpoch !== epoch);
    this.knownEpoch = Math.max(this.knownEpoch, epoch);
    this.acquireUnseen = false;
  }

  /** Whether an acquire of ours may have committed unseen (releaseUnseen has work to do). */
  get unseenAcquirePending(): boolean {
    return this.acquireUnseen;
  }

  /** An acquire of ours failed on the client side: it may have committed (an epoch we never saw). */
  acquireMayHaveCommitted(): void {
    this.acquireUnseen = true;
  }

  /** A live row held by our holder id with an epoch we never led, after an acquire whose reply was lost: that acquire
   *  committed. No token of that epoch ever existed here, so nothing was (or can be) written under it: hand it back,
   *  conditional on that epoch, so that we (or anyone) acquire at once instead of after its expiry. Adopting it instead
   *  would need a local deadline counted from the lost statement's arrival, which we cannot bound from here.
   *  Without a lost reply such a row is another process with our holder id (misconfigured): left alone.
   *  Results of an earlier epoch still unwritten are written under it first (the fence makes that safe: nobody else
   *  held that epoch); while any stay unwritten the row is kept (released at a later try, or it expires), since
   *  another instance acquiring in the gap would recover their attempts and send them again. */
  async releaseUnseen(current: LeaseRow | null): Promise<boolean> {
    if (!this.acquireUnseen || !current || current.holderId !== this.holderId || current.leaseEpoch <= this.knownEpoch) return false;
    const token = { leaseName: current.leaseName, holderId: current.holderId, leaseEpoch: current.leaseEpoch };
    if (this.unwrittenNow()) await this.writeUnder(token);
    if (this.unwrittenNow()) return false;
    const released = await this.store.release(token);
    this.log.warn({ event: 'leader_unseen_acquire_released', holder_id: token.holderId, lease_epoch: token.leaseEpoch, released },
      'an acquire of ours committed but its reply was lost: that epoch was never used and is handed back');
    return released;
  }

  /** Conditional release (holder + epoch, not expired): harmless when the row is no longer ours. A failure is retried
   *  in the background while the row is surely valid: the fault behind the step-down (sessions terminated) often
   *  leaves a dead pooled connection for the first release, and then everyone waited out the lease. The caller
   *  awaits only the first attempt (a tick's bound is unchanged). */
  private async releaseQuietly({ token, untilMs }: Dropped, attempt = 1): Promise<void> {
    const fields = { holder_id: token.holderId, lease_epoch: token.leaseEpoch };
    try {
      const released = await this.store.release(token);
      this.log.info({ event: 'leader_released_after_step_down', ...fields, released, attempt },
        released ? 'lease row handed back after a local step-down' : 'lease row was no longer ours');
    } catch (e) {
      const retry = attempt < RELEASE_ATTEMPTS && this.clock.nowMs() + RELEASE_RETRY_MS < untilMs;
      this.log.debug({ event: 'leader_release_failed', ...fields, attempt, retry, sql_error: sqlErrorField(e) }, 'late release failed');
      if (retry) void this.clock.sleep(RELEASE_RETRY_MS).then(() => this.releaseQuietly({ token, untilMs }, attempt + 1));
    }
  }
}
