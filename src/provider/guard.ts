// Provider protection, provider-wide (one guard per process, shared by every attempt the leader makes):
// - a rate limit (token bucket: `ratePerSec`, burst of 100 ms worth, at least 1) and a cap on calls in flight;
// - a 429/503 with Retry-After pauses every call until then (capped at `retryAfterMaxMs`), not just that intent;
// - a circuit breaker: after `breakerThreshold` consecutive retryable failures it opens for `breakerCooldownMs`,
//   then lets exactly one probe through (half-open); the probe's success closes it, a retryable failure reopens it.
// The executor asks `acquire(n)` BEFORE its fenced start and starts at most the granted number: holding back
// never creates an attempt row, so it never uses up an attempt and never fails an intent. Permits it did not
// use go back with `release(n)`; every call that was sent reports its result with `onResult`.
// The in-flight cap bounds calls sent (callSlots.ts): a permit's call goes out only through `beginCall()`;
// `acquire(n, ahead)` may grant permits beyond the cap for attempts that wait for a call to end (ready attempts).
// Not under a rate limit (`paced`): its tokens are taken at the grant.
// Across processes (a recorded partition count above 1, whatever EXECUTOR_PARTITIONS is): `share` gives the part of
// the cluster-wide rate and in-flight cap this process may use now (guardShare.ts; re-read at every acquire and at
// every leadership change, shareChanged), and
// `holdFor` applies a breaker or Retry-After pause another process recorded in SQL (clusterGuard.ts). While the share
// says this process leads nothing, its bucket stays empty: a new leader starts with no burst saved up, so it never
// adds a burst to the previous holder's last second.
import type { Clock } from '../lease/clock.js';
import { CallSlots } from './callSlots.js';
import type { Limits } from './guardShare.js';
import type { ProviderResult } from './provider.js';
import type { GuardSettings } from '../limits.js';

export type BreakerState = 'closed' | 'open' | 'half_open';
export type HoldReason = 'rate' | 'in_flight' | 'retry_after' | 'breaker_open' | 'probe_in_flight';

export interface Grant {
  granted: number;
  /** Why fewer than asked were granted (null when all were). */
  heldBy: HoldReason | null;
  /** Monotonic ms at which asking again may grant more (null: when a call in flight finishes). */
  retryAtMs: number | null;
}

export interface GuardState {
  breaker: BreakerState;
  consecutiveFailures: number;
  /** Remaining ms of the breaker cool-down / the Retry-After pause (0 when none). */
  openForMs: number;
  pausedForMs: number;
  /** Remaining ms of a breaker another process opened (0 when none; a recorded partition count above 1). */
  remoteOpenForMs: number;
  /** Permits held: calls sent, and attempts started whose call is not sent yet. */
  inFlight: number;
  /** Calls sent and not answered yet (at most the cap when they went out: beginCall). */
  sent: number;
  /** Calls held back (asked but not granted) since start, by reason. */
  heldBack: Record<HoldReason, number>;
}

/** A process's share: its limits now, whether it leads any partition that counts (default true), how many (each may
 *  hold its own `ahead` permits beyond the cap; default 1), and their own parts of the cap together, each at least 1
 *  (`parts`, default the cap: askers of ahead room may hold permits beyond the larger of the two, CallSlots.room). */
export type ShareNow = Limits & { leading?: boolean; led?: number; parts?: number };

export interface GuardOptions {
  /** The limits this process may use now (default: the settings' own, fixed). */
  share?: () => ShareNow;
  /** Permits a partition's executor may hold beyond its part of the in-flight cap (attempts started to wait for a
   *  call to end: readyAhead); the process allows that many per partition it leads (default 0). */
  aheadPerPartition?: number;
  /** A 429/503 Retry-After paused every call for `pauseMs` from now (called when it extends the pause; to record it
   *  for the other processes). */
  onPause?: (pauseMs: number) => void;
}

export class ProviderGuard {
  private tokens: number;
  private rate: number;
  private burst: number;
  /** The share as last applied says this process leads something (false: the bucket is kept empty). */
  private leading: boolean;
  /** A breaker another process opened (recorded in SQL): nothing is sent before this monotonic time. */
  private remoteOpenUntil = 0;
  private lastRefill: number;
  /** The in-flight cap: permits held and calls sent. */
  private readonly slots: CallSlots;
  private failures = 0;
  private breaker: BreakerState = 'closed';
  private openUntil = 0;
  private pausedUntil = 0;
  private probeOut = false;
  /** When the latest hold began (monotonic) and what it was: permits taken before it (attempts started, call not sent)
   *  are not sent after it, even once it is over (holdNow), nor do they count as the half-open probe (release). */
  private holdBegan = Number.NEGATIVE_INFINITY;
  private holdBeganBy: HoldReason | null = null;
  /** When this process's own breaker last opened: a permit taken since then, while it is half-open, is the probe. */
  private openedAt = Number.NEGATIVE_INFINITY;
  private readonly held: Record<HoldReason, number> = { rate: 0, in_flight: 0, retry_after: 0, breaker_open: 0, probe_in_flight: 0 };

  constructor(private readonly s: GuardSettings, private readonly clock: Clock, private readonly onChange: (state: BreakerState) => void = () => {},
    private readonly opts: GuardOptions = {}) {
    // The probe is the permit granted strictly after the breaker opened (probe()): a cool-down of 0 would grant it in
    // the same ms and never recognise it (the config requires ≥ 1 ms).
    if (s.breakerThreshold > 0 && !(s.breakerCooldownMs >= 1)) {
      throw new RangeError(`breakerCooldownMs must be at least 1 (got ${s.breakerCooldownMs})`);
    }
    // The share is first read at the first acquire (the partitions' leases may not exist yet).
    this.rate = s.ratePerSec;
    this.slots = new CallSlots(s.maxInFlight, opts.aheadPerPartition ?? 0);
    this.burst = burstOf(this.rate);
    // With a share, nothing is saved up before the first partition is led (see applyShare).
    this.leading = !opts.share;
    this.tokens = opts.share ? 0 : this.burst;
    this.lastRefill = clock.nowMs();
  }

  /** Leadership changed (a partition led, lost, handed back): take the share in force now, so that a bucket starts
   *  empty from the moment this process leads again, not from its next grant. */
  shareChanged(): void {
    if (this.opts.share) this.applyShare(this.clock.nowMs());
  }

  /** The limits in force (the share, as of the last acquire). */
  limits(): Limits {
    return { ratePerSec: this.rate, maxInFlight: this.slots.limit };
  }

  /** Hold every call back until `untilMs` (monotonic), as another process recorded in SQL: a Retry-After pause
   *  (`retry_after`; only ever extended, like this process's own) or a breaker it opened (`breaker_open`; the latest
   *  reading replaces the last, so a breaker recorded closed again lifts it: 0 = none). This process's own breaker is
   *  untouched: it opens only on its own failures, so the others never all probe at once as if each had failed. */
  holdFor(reason: 'breaker_open' | 'retry_after', untilMs: number): void {
    const now = this.clock.nowMs();
    if (reason === 'retry_after') {
      if (untilMs > now && now >= this.pausedUntil) this.began('retry_after', now);
      this.pausedUntil = Math.max(this.pausedUntil, untilMs);
    } else {
      if (untilMs > now && now >= this.remoteOpenUntil) this.began('breaker_open', now);
      this.remoteOpenUntil = untilMs;
    }
  }

  /** Grant nothing of `wanted` (a partition's own part is used up: partitionPermits.ts), counted as held back. */
  holdBack(wanted: number, heldBy: HoldReason): Grant {
    this.held[heldBy] += wanted;
    return { granted: 0, heldBy, retryAtMs: null };
  }

  /** Take up to `wanted` permits now (each = one call the caller may send, through beginCall); beyond the in-flight
   *  cap only for an asker of `ahead` room (CallSlots.room): one asking none is granted only what can go out. Where
   *  the cap refused some, `onRoom` is called back (once, in a microtask) when calls or permits have freed since: the
   *  asker need not wait for one of its own calls to end (another partition's may be what holds the room). */
  acquire(wanted: number, ahead = 0, onRoom?: () => void): Grant {
    const now = this.clock.nowMs();
    if (wanted <= 0) return { granted: 0, heldBy: null, retryAtMs: null };
    const hold = (heldBy: HoldReason, retryAtMs: number | null, granted = 0): Grant => {
      this.held[heldBy] += wanted - granted;
      return { granted, heldBy, retryAtMs };
    };
    if (this.opts.share) this.applyShare(now);
    if (now < this.pausedUntil) return hold('retry_after', this.pausedUntil);
    if (now < this.remoteOpenUntil) return hold('breaker_open', this.remoteOpenUntil);
    if (this.breaker === 'open') {
      if (now < this.openUntil) return hold('breaker_open', this.openUntil);
      this.setBreaker('half_open');
    }
    let n = wanted;
    let limit: { by: HoldReason; at: number | null } | null = null;
    if (this.breaker === 'half_open') {
      if (this.probeOut) return hold('probe_in_flight', null);
      if (n > 1) limit = { by: 'probe_in_flight', at: null };
      n = 1;
    }
    const room = this.slots.room(n, ahead);
    if (room < n) {
      n = room;
      limit = { by: 'in_flight', at: null };
      if (onRoom) this.slots.waitRoom(onRoom);
    }
    if (this.rate > 0) {
      this.refill(now);
      const whole = Math.floor(this.tokens);
      if (whole < n) {
        n = whole;
        limit = { by: 'rate', at: now + Math.ceil(((1 - (this.tokens - whole)) * 1000) / this.rate) };
      }
      this.tokens -= n;
    }
    this.slots.take(n);
    if (this.breaker === 'half_open' && n > 0) this.probeOut = true;
    return n === wanted ? { granted: n, heldBy: null, retryAtMs: null } : hold(limit!.by, limit!.at, n);
  }

  /** What holds a permit taken at `grantedAtMs` (monotonic; attempts started, call not sent yet) from being used now,
   *  without taking or counting anything: a Retry-After pause, a breaker another process recorded, or this process's
   *  own breaker open (its cool-down over too: the next acquire lets one probe through); or any of these begun since
   *  the grant, over or not (the half-open probe is a later grant). Not the rate or the in-flight cap (permits
   *  already account for those). */
  holdNow(grantedAtMs?: number): HoldReason | null {
    const now = this.clock.nowMs();
    if (now < this.pausedUntil) return 'retry_after';
    if (now < this.remoteOpenUntil || this.breaker === 'open') return 'breaker_open';
    return grantedAtMs !== undefined && this.holdBegan >= grantedAtMs ? this.holdBeganBy : null;
  }

  /** How many calls the in-flight cap lets out at once (as of the last share applied; 0: no cap). */
  callLimit(): number {
    return this.slots.limit;
  }

  /** Calls are paced by a rate limit: nothing should be granted ahead of a free call slot (see the header). */
  paced(): boolean {
    return this.rate > 0;
  }

  /** A permit's call goes out now: true when the calls sent are below the in-flight cap as the share is now (then it
   *  counts as sent until its onResult, onInconclusive or release with `begun`); false: not now, and `onFree` is
   *  called once a sent call has ended or the cap was raised. */
  beginCall(onFree?: () => void): boolean {
    if (this.opts.share) this.applyShare(this.clock.nowMs());
    return this.slots.begin(onFree);
  }

  /** Give back permits that were not used (the fenced start started fewer intents than granted, an attempt not sent;
   *  `begun`: beginCall had let them go out, and the send gate stopped them).
   *  Permits taken before this process's breaker opened (`grantedAtMs`) were not the half-open probe: it stays out. */
  release(unused: number, grantedAtMs?: number, begun = false): void {
    if (unused <= 0) return;
    this.slots.giveBack(unused, begun);
    if (this.rate > 0) this.tokens = Math.min(this.burst, this.tokens + unused);
    if (this.probe(grantedAtMs)) this.probeOut = false;
  }

  /** Whether a permit taken at `grantedAtMs` (unknown: assumed so) is the half-open probe that is out: the only
   *  permit granted since this process's own breaker opened. */
  private probe(grantedAtMs: number | undefined): boolean {
    // Strictly after: nothing is granted while open (the cool-down is at least 1 ms), so a permit of the very ms the
    // breaker opened was taken before it did.
    return this.breaker === 'half_open' && this.probeOut && (grantedAtMs === undefined || grantedAtMs > this.openedAt);
  }

  /** A sent call whose failure says nothing about the provider: this process stalled (a GC pause, SIGSTOP, a
   *  starved event loop) past the call's timeout, so the timeout is ours. Frees its slot; counts as neither a
   *  failure nor a success (a probe left this way lets the next call probe; a call sent before the breaker opened
   *  is not the probe: `grantedAtMs`, when its permit was taken). */
  onInconclusive(grantedAtMs?: number): void {
    this.slots.answered();
    if (this.probe(grantedAtMs)) this.probeOut = false;
  }

  /** The outcome of a call that was sent (its permit taken at `grantedAtMs`: only the probe's decides a half-open
   *  breaker). Permanent errors (4xx) say nothing about the provider's health. */
  onResult(r: ProviderResult, grantedAtMs?: number): void {
    const now = this.clock.nowMs();
    this.slots.answered();
    if (r.kind === 'retryable' && (r.httpStatus === 429 || r.httpStatus === 503) && r.retryAfterMs !== null && r.retryAfterMs > 0) {
      const pauseMs = Math.min(r.retryAfterMs, this.s.retryAfterMaxMs);
      if (now + pauseMs > this.pausedUntil) {
        if (pauseMs > 0 && now >= this.pausedUntil) this.began('retry_after', now);
        this.pausedUntil = now + pauseMs;
        if (pauseMs > 0) this.opts.onPause?.(pauseMs);
      }
    }
    const probe = this.probe(grantedAtMs);
    if (r.kind === 'retryable') {
      this.failures += 1;
      if (this.s.breakerThreshold > 0 && (probe || (this.breaker === 'closed' && this.failures >= this.s.breakerThreshold))) {
        this.openUntil = now + this.s.breakerCooldownMs;
        this.probeOut = false;
        this.began('breaker_open', now);
        this.openedAt = now;
        this.setBreaker('open');
      }
    } else {
      this.failures = 0;
      if (probe) {
        this.probeOut = false;
        this.setBreaker('closed');
      }
    }
  }

  state(): GuardState {
    const now = this.clock.nowMs();
    const breaker = this.breaker === 'open' && now >= this.openUntil ? 'half_open' : this.breaker;
    return {
      breaker, consecutiveFailures: this.failures, inFlight: this.slots.permits, sent: this.slots.sent, heldBack: { ...this.held },
      openForMs: breaker === 'open' ? this.openUntil - now : 0, pausedForMs: Math.max(0, this.pausedUntil - now),
      remoteOpenForMs: Math.max(0, this.remoteOpenUntil - now),
    };
  }

  private refill(now: number): void {
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.lastRefill) * this.rate) / 1000);
    this.lastRefill = now;
  }

  /** Take the share in force now: the bucket fills at the old rate up to now, then at the new one (its burst
   *  follows the rate; tokens above the new burst go); the in-flight cap applies to the next grant and the next
   *  call sent (calls already out above a lowered cap finish; nothing more is sent until they did). Leading nothing: empty, as above. */
  private applyShare(now: number): void {
    const l = this.opts.share!();
    if (l.ratePerSec !== this.rate) {
      if (this.rate > 0) this.refill(now);
      else this.lastRefill = now;
      this.rate = l.ratePerSec;
      this.burst = burstOf(this.rate);
      this.tokens = Math.min(this.tokens, this.burst);
    }
    this.slots.setCap(l.maxInFlight, l.led ?? 1, l.parts ?? l.maxInFlight);
    const leading = l.leading ?? true;
    if (!leading || !this.leading) {
      // Leading nothing: nothing is saved up; a share that begins now starts with an empty bucket.
      this.tokens = 0;
      this.lastRefill = now;
    }
    this.leading = leading;
  }

  private began(by: HoldReason, now: number): void {
    this.holdBegan = now;
    this.holdBeganBy = by;
  }

  private setBreaker(b: BreakerState): void {
    if (b === this.breaker) return;
    this.breaker = b;
    this.onChange(b);
  }
}

/** The bucket holds 100 ms worth of calls, at least 1 (what a leader may send at once after a quiet spell). */
export const burstOf = (ratePerSec: number) => Math.max(1, Math.ceil(ratePerSec / 10));
