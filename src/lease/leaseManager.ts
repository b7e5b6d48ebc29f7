// The lease algorithm: acquire / renew / release against a LeaseStore port (it never sees SQL), a local
// monotonic deadline (enforced by a timer), follower retry timing, and the structured leader_* logs. Any renew
// failure or SQL error drops leadership immediately. A local step-down that says nothing about the row
// (sql_error, renew_error, local_deadline) hands the row back best-effort, conditional on holder and epoch,
// so a transient fault costs a tick instead of a lease; renew_refused / fence_failed (the row is not ours) do not.
// Never while results are unwritten (holdReleaseWhile): a released row lets another instance recover their
// attempts as orphans and send them again, so the row is kept (to be written under its fence) or left to expire.
// Nor while this process's provider calls exceed the share of the partitions it keeps (releaseWhenFits): a graceful
// release waits for them, leading and renewing, and is `releasing` meanwhile (the partition counts for no share).
// When and how a row of ours is handed back (deferrals, retries, an unseen epoch) is handBack.ts.
// Query-named methods (requireLeader, ensureEpoch, remainingMs, renewDueInMs, status) have no side effects.
import type { Logger } from '../observability/logger.js';
import { sqlErrorField } from '../observability/logger.js';
import type { LeaseRow, LeaseStore, LeaseToken } from '../store/ports.js';
import type { Clock } from './clock.js';
import { HandBack } from './handBack.js';
import { leadUntilFits } from './shareWait.js';
import type { LeaderGate } from './leaderGate.js';
import { FollowerRetry } from './followerRetry.js';
import type { Config } from '../config.js';

/** The lease settings as resolved by src/config.ts. */
export type LeaseSettings = Config['lease'];

export type LeadershipChange =
  | { kind: 'acquired'; token: LeaseToken; expiresAt: Date }
  | { kind: 'lost'; token: LeaseToken; reason: string };

interface Held {
  token: LeaseToken;
  expiresAt: Date;
  /** Monotonic time after which we must not act. */
  deadlineMs: number;
  /** Monotonic time the last successful acquire/renew was sent. */
  sentAtMs: number;
  /** Aborts the local-deadline timer. */
  timer: AbortController;
}

export class LeaseManager implements LeaderGate {
  private held: Held | null = null;
  /** When a follower tries again (from the observed expires_at), and how refusals are logged. */
  private readonly retry: FollowerRetry;
  private readonly listeners = new Set<(c: LeadershipChange) => void>();
  /** Rows of ours to hand back: after a step-down (deferred while results are unwritten), an unseen epoch. */
  private readonly handBack: HandBack;
  /** A renew on the wire: the deadline timer leaves the decision to it. The gate is closed meanwhile (requireLeader
   *  is past the deadline); a success counts from its send time, which is before the deadline, so it is safe. */
  private renewing: Held | null = null;
  /** A graceful release waits for the calls to fit the kept share (release()); its bound (releaseWhenFits). */
  private releasingHeld: Held | null = null;
  private fitsWaitMs = 0;

  constructor(
    private readonly store: LeaseStore,
    private readonly settings: LeaseSettings,
    private readonly clock: Clock,
    private readonly log: Logger,
    random: () => number = Math.random,
    /** Whether this instance may try to acquire now (the fair share of partitions in every-instance mode; default:
     *  always). Asked only while not leading: a held lease renews regardless. */
    private readonly mayAcquire: () => boolean = () => true,
  ) {
    this.handBack = new HandBack(store, settings.holderId, clock, log);
    this.retry = new FollowerRetry(settings, clock, random);
  }

  get holderId(): string {
    return this.settings.holderId;
  }

  onChange(fn: (c: LeadershipChange) => void): () => void {
    this.listeners.add(fn);
    return () => this.listeners.delete(fn);
  }

  /** The token while leading and before the local deadline (no side effect: a timer drops at the deadline). */
  requireLeader(): LeaseToken | null {
    if (!this.held || this.clock.nowMs() >= this.held.deadlineMs) return null;
    return this.held.token;
  }

  ensureEpoch(epoch: number): boolean {
    return this.requireLeader()?.leaseEpoch === epoch;
  }

  remainingMs(): number {
    return this.requireLeader() ? Math.max(0, this.held!.deadlineMs - this.clock.nowMs()) : 0;
  }

  /** Monotonic local deadline of the held lease (null when not leading). */
  deadlineMs(): number | null {
    return this.requireLeader() ? this.held!.deadlineMs : null;
  }

  /**
   * Hold back the best-effort release of a step-down until the returned function is called (and awaited):
   * an executor tick still has in-flight calls whose completions must be written under the fence first.
   * The release runs when the last deferral ends and nothing is unwritten (holdReleaseWhile); otherwise it
   * waits for a later deferral to end, or never runs (the row expires).
   */
  deferRelease(): () => Promise<void> {
    return this.handBack.defer();
  }

  /** Set once by the executor: while `unwritten()` is true, no row is released (neither after a step-down nor by
   *  release()). Results are written under the fence first; only a refused fence loses them. */
  holdReleaseWhile(unwritten: () => boolean, writeUnder: (token: LeaseToken) => Promise<void> = async () => {}): void {
    this.handBack.holdWhile(unwritten, writeUnder);
  }

  /** Set once by the app: no row is released while `fits()` is false — this process's provider calls exceed the share
   *  of the partitions it keeps. A graceful release waits for them (leading, renewing when due) for at most `maxWaitMs`
   *  (then it steps down and the row expires); a release after a step-down waits while the row is surely ours. */
  releaseWhenFits(fits: () => boolean, maxWaitMs: number): void {
    this.handBack.holdUntilFits(fits);
    this.fitsWaitMs = maxWaitMs;
  }

  /** A graceful release is waiting for this process's calls to fit the share it keeps: the partition counts for none. */
  get releasing(): boolean {
    return this.releasingHeld !== null && this.releasingHeld === this.held;
  }

  /** Status for /readyz and /lease: what this instance believes (its database view is in the store). */
  status(): { mode: 'leader' | 'follower'; holderId: string; leaseEpoch: number | null; expiresAt: Date | null } {
    const token = this.requireLeader();
    return {
      mode: token ? 'leader' : 'follower',
      holderId: this.settings.holderId,
      leaseEpoch: token?.leaseEpoch ?? null,
      expiresAt: token ? this.held!.expiresAt : null,
    };
  }

  /** Milliseconds until a follower should try again: right after the observed expiry plus jitter. */
  followerRetryDelayMs(): number {
    return this.retry.delayMs();
  }

  /** Renew interval elapsed since the last successful acquire/renew was sent. */
  renewDue(): boolean {
    return this.held !== null && this.clock.nowMs() - this.held.sentAtMs >= this.settings.renewIntervalMs;
  }

  /** Milliseconds until a renew is due (0: due now; Infinity: not leading). */
  renewDueInMs(): number {
    return this.held === null ? Number.POSITIVE_INFINITY
      : Math.max(0, this.held.sentAtMs + this.settings.renewIntervalMs - this.clock.nowMs());
  }

  /** Leader: renew when due. Follower: try to acquire (one conditional statement per timer tick, so a released
   *  lease is taken at the next tick; LEASE_ACQUIRE_INTERVAL_MS caps the in-tick wait for an observed expiry,
   *  see followerRetryDelayMs). Returns the token if leading afterwards. */
  async tryAcquireOrRenew(): Promise<LeaseToken | null> {
    this.dropIfPastDeadline();
    if (this.requireLeader()) {
      if (this.renewDue()) await this.renew();
      return this.requireLeader();
    }
    return (await this.tryAcquire()) ? this.requireLeader() : null;
  }

  async tryAcquire(): Promise<boolean> {
    this.dropIfPastDeadline();
    if (this.requireLeader()) return true;
    const { name, holderId, durationMs } = this.settings;
    if (!this.mayAcquire()) {
      // Not ours to take now (a partition change, the fair share), but a row our lost acquire reply took is still
      // handed back at once: whoever may take it (the changer) must not wait out a lease for our lost reply.
      if (this.handBack.unseenAcquirePending) await this.store.get(name).then((row) => this.handBack.releaseUnseen(row)).catch(() => false);
      return false;
    }
    let sentAtMs = this.clock.nowMs();
    try {
      let out = await this.store.tryAcquire(name, holderId, durationMs);
      if (!out.acquired && (await this.handBack.releaseUnseen(out.current))) {
        sentAtMs = this.clock.nowMs();
        out = await this.store.tryAcquire(name, holderId, durationMs); // at once, not after the row's expiry
      }
      if (out.acquired) {
        this.becomeLeader(out.lease, sentAtMs);
        // A reply that arrives past the local deadline must not report leadership (requireLeader drops it);
        // the row is then handed back so that others need not wait for it to expire.
        if (this.requireLeader() !== null) return true;
        this.dropIfPastDeadline();
        return false;
      }
      this.retry.refused(out.current, out.dbNow, holderId, this.log);
      return false;
    } catch (e) {
      this.handBack.acquireMayHaveCommitted(); // a row of ours with an epoch we never saw is released
      this.retry.failed();
      this.log.warn({ event: 'leader_acquire_failed', holder_id: holderId, sql_error: sqlErrorField(e) }, 'lease acquire failed');
      return false;
    }
  }

  async renew(): Promise<boolean> {
    this.dropIfPastDeadline();
    const held = this.held;
    if (!held) return false;
    const sentAtMs = this.clock.nowMs();
    this.renewing = held;
    try {
      const row = await this.store.renew(held.token, this.settings.durationMs);
      if (this.held !== held) {
        // Dropped while the statement ran (local deadline): the row we just extended would block every
        // other instance for a whole lease; hand it back (best effort; the fence protects either way).
        if (row) this.handBack.releaseOrDefer({ token: held.token, untilMs: sentAtMs + this.settings.durationMs });
        return false;
      }
      if (!row) {
        this.log.warn({ event: 'leader_renew_failed', ...this.fields(held) }, 'lease renew refused: no longer held');
        this.drop('renew_refused');
        return false;
      }
      held.expiresAt = row.expiresAt;
      held.sentAtMs = sentAtMs;
      held.deadlineMs = sentAtMs + this.settings.durationMs - this.settings.safetyMarginMs;
      if (this.dropIfPastDeadline()) return false; // the reply came after the new deadline (renew took a lease)
      this.armDeadline(held);
      this.log.info({ event: 'leader_renewed', ...this.fields(held) }, 'lease renewed');
      return true;
    } catch (e) {
      this.log.warn({ event: 'leader_renew_failed', ...this.fields(held), sql_error: sqlErrorField(e) }, 'lease renew failed');
      this.drop('renew_error', e);
      return false;
    } finally {
      if (this.renewing === held) this.renewing = null;
      if (this.held === held) this.dropIfPastDeadline(); // a renew that failed or came too late
    }
  }

  /** Graceful release (shutdown, drain): expire the row in place so a follower takes over at once — unless results
   *  are unwritten (then the step-down keeps the row: it expires, or is released once they are written). */
  async release(): Promise<boolean> {
    const held = this.held;
    if (!held) return false;
    this.releasingHeld = held; // from now on the partition counts for no share (kept until the drop below)
    if (!this.handBack.fits && !(await this.awaitFits(held))) return false;
    if (this.handBack.unwritten) {
      this.drop('stopped_unwritten');
      this.handBack.keep({ token: held.token, untilMs: held.sentAtMs + this.settings.durationMs });
      return false;
    }
    this.drop('released');
    try {
      return await this.store.release(held.token);
    } catch (e) {
      this.log.warn({ event: 'leader_release_failed', ...this.fields(held), sql_error: sqlErrorField(e) }, 'lease release failed');
      return false;
    }
  }

  /** Lead on until the calls fit the kept share (shareWait.ts); false if leadership went meanwhile, or stepped down. */
  private awaitFits(held: Held): Promise<boolean> {
    return leadUntilFits({
      leading: () => this.held === held && this.requireLeader() !== null,
      renewIfDue: async () => !this.renewDue() || (await this.renew()),
      stepDown: (reason) => this.drop(reason),
      logFields: () => this.fields(held),
    }, () => this.handBack.fits, this.fitsWaitMs, this.clock, this.log).then((fit) => fit && this.held === held);
  }

  /** Step down now: the gate closes at once; the row is handed back best-effort when the reason allows. */
  drop(reason: string, sqlError?: unknown): void {
    const held = this.held;
    if (!held) return;
    this.held = null;
    held.timer.abort();
    this.retry.steppedDown();
    this.log.warn({ event: 'leader_lost', reason, ...this.fields(held), sql_error: sqlErrorField(sqlError) }, 'leadership lost');
    this.emit({ kind: 'lost', token: held.token, reason });
    this.handBack.steppedDown(reason, { token: held.token, untilMs: held.sentAtMs + this.settings.durationMs });
  }

  /** A command's guard: past the local deadline (the timer may not have fired yet) → step down. */
  private dropIfPastDeadline(): boolean {
    if (!this.held || this.clock.nowMs() < this.held.deadlineMs) return false;
    this.drop('local_deadline');
    return true;
  }

  /** (Re)arm the timer that steps down at the local deadline even when nothing else runs. */
  private armDeadline(held: Held): void {
    held.timer.abort();
    held.timer = new AbortController();
    const signal = held.timer.signal;
    void this.clock.sleep(held.deadlineMs - this.clock.nowMs(), signal).then(() => {
      if (signal.aborted || this.held !== held || this.renewing === held) return; // a renew in flight decides
      if (!this.dropIfPastDeadline()) this.armDeadline(held); // woke early
    });
  }

  private becomeLeader(lease: LeaseRow, sentAtMs: number): void {
    const token = { leaseName: lease.leaseName, holderId: lease.holderId, leaseEpoch: lease.leaseEpoch };
    // A release still waiting for an older step-down's results must never hit the row we now hold.
    this.handBack.led(token.leaseEpoch);
    this.held = {
      token,
      expiresAt: lease.expiresAt,
      sentAtMs,
      deadlineMs: sentAtMs + this.settings.durationMs - this.settings.safetyMarginMs,
      timer: new AbortController(),
    };
    this.retry.led();
    this.armDeadline(this.held);
    this.log.info({ event: 'leader_acquired', ...this.fields(this.held) }, 'lease acquired');
    this.emit({ kind: 'acquired', token, expiresAt: lease.expiresAt });
  }

  private fields(h: Held) {
    return { holder_id: h.token.holderId, lease_epoch: h.token.leaseEpoch, expires_at: h.expiresAt.toISOString() };
  }

  private emit(c: LeadershipChange): void {
    for (const fn of this.listeners) {
      try {
        fn(c);
      } catch (e) {
        this.log.error({ err: e }, 'leadership listener failed');
      }
    }
  }
}
