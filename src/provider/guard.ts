// Provider protection, provider-wide (one guard per process, shared by every attempt the leader makes):
// - a rate limit (token bucket: `ratePerSec`, burst of 100 ms worth, at least 1) and a cap on calls in flight;
// - a 429/503 with Retry-After pauses every call until then (capped at `retryAfterMaxMs`), not just that intent;
// - a circuit breaker: after `breakerThreshold` consecutive retryable failures it opens for `breakerCooldownMs`,
//   then lets exactly one probe through (half-open); the probe's success closes it, a retryable failure reopens it.
// The executor asks `acquire(n)` BEFORE its fenced start and starts at most the granted number: holding back
// never creates an attempt row, so it never uses up an attempt and never fails an intent. Permits it did not
// use go back with `release(n)`; every call that was sent reports its result with `onResult`.
// The in-flight cap bounds calls sent: a permit's call goes out only through `beginCall()`, which keeps the calls
// sent within the cap (as the share is now) and calls back a refused caller once a sent call ends; `acquire(n,
// ahead)` may grant up to `ahead` permits beyond it (attempts started to wait for a call to end, the executor's ready
// attempts), so a cap equal to the executor's concurrency leaves them room. Not under a rate limit (`paced`): rate
// tokens are taken at the grant, so only calls about to go out are granted.
// Across processes (a recorded partition count above 1, whatever EXECUTOR_PARTITIONS is): `share` gives the part of
// the cluster-wide rate and in-flight cap this process may use now (guardShare.ts; re-read at every acquire and at
// every leadership change, shareChanged), and
// `holdFor` applies a breaker or Retry-After pause another process recorded in SQL (clusterGuard.ts). While the share
// says this process leads nothing, its bucket stays empty: a new leader starts with no burst saved up, so it never
// adds a burst to the previous holder's last second.
import type { Clock } from '../lease/clock.js';
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

/** A process's share: its limits now, whether it leads any partition that counts (default true), and how many (each
 *  may hold its own `ahead` permits beyond the cap; default 1). */
export type ShareNow = Limits & { leading?: boolean; led?: number };

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
  private maxInFlight: number;
  private burst: number;
  /** The share as last applied says this process leads something (false: the bucket is kept empty). */
  private leading: boolean;
  /** The partitions it leads, as last applied (at least 1): each may hold aheadPerPartition permits beyond the cap. */
  private led = 1;
  /** A breaker another process opened (recorded in SQL): nothing is sent before this monotonic time. */
  private remoteOpenUntil = 0;
  private lastRefill: number;
  /** Permits out (sent or waiting to be sent) and, of them, calls sent. */
  private inFlight = 0;
  private sent = 0;
  /** Callers beginCall refused, called back by freed(). */
  private readonly waiting = new Set<() => void>();
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
    // The share is first read at the first acquire (the partitions' leases may not exist yet).
    this.rate = s.ratePerSec;
    this.maxInFlight = s.maxInFlight;
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
    return { ratePerSec: this.rate, maxInFlight: this.maxInFlight };
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

  /** Take up to `wanted` permits now (each = one call the caller may send, through beginCall); up to `ahead` beyond
   *  the in-flight cap (their calls wait for sent ones to end). With partitions, each partition's own part bounds its
   *  own (partitionPermits.ts) and the process allows an asker `aheadPerPartition` per partition led: one partition's
   *  waiting attempts never take the permits of another's own part when it asks for some too. One asking none gets
   *  none beyond the cap (all it is granted can go out: a batch with no later batch starts nothing to abort unsent),
   *  so others' waiting attempts may take part of its room until they are sent. */
  acquire(wanted: number, ahead = 0): Grant {
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
    const cap = this.maxInFlight + (ahead > 0 ? Math.max(ahead, (this.opts.aheadPerPartition ?? 0) * this.led) : 0);
    if (this.maxInFlight > 0 && this.inFlight + n > cap) {
      n = Math.max(0, cap - this.inFlight);
      limit = { by: 'in_flight', at: null };
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
    this.inFlight += n;
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
    return this.maxInFlight;
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
    if (this.maxInFlight > 0 && this.sent >= this.maxInFlight) {
      if (onFree) this.waiting.add(onFree);
      return false;
    }
    this.sent += 1;
    return true;
  }

  /** A sent call ended (or the cap grew): those refused by beginCall are called back, once each, in a microtask
   *  (never inside the caller's own send loop; before the ended call's own batch is woken, so they get their turn). */
  private freed(): void {
    if (this.waiting.size === 0) return;
    const waiting = [...this.waiting];
    this.waiting.clear();
    queueMicrotask(() => { for (const w of waiting) w(); });
  }

  /** Give back permits that were not used (the fenced start started fewer intents than granted, an attempt not sent;
   *  `begun`: beginCall had let them go out, and the send gate stopped them).
   *  Permits taken before this process's breaker opened (`grantedAtMs`) were not the half-open probe: it stays out. */
  release(unused: number, grantedAtMs?: number, begun = false): void {
    if (unused <= 0) return;
    this.inFlight = Math.max(0, this.inFlight - unused);
    if (this.rate > 0) this.tokens = Math.min(this.burst, this.tokens + unused);
    if (this.probe(grantedAtMs)) this.probeOut = false;
    if (begun) {
      this.sent = Math.max(0, this.sent - unused);
      this.freed();
    }
  }

  /** Whether a permit taken at `grantedAtMs` (unknown: assumed so) is the half-open probe that is out: the only
   *  permit granted since this process's own breaker opened. */
  private probe(grantedAtMs: number | undefined): boolean {
    return this.breaker === 'half_open' && this.probeOut && (grantedAtMs === undefined || grantedAtMs >= this.openedAt);
  }

  /** A sent call whose failure says nothing about the provider: this process stalled (a GC pause, SIGSTOP, a
   *  starved event loop) past the call's timeout, so the timeout is ours. Frees its slot; counts as neither a
   *  failure nor a success (a probe left this way lets the next call probe; a call sent before the breaker opened
   *  is not the probe: `grantedAtMs`, when its permit was taken). */
  onInconclusive(grantedAtMs?: number): void {
    this.inFlight = Math.max(0, this.inFlight - 1);
    this.sent = Math.max(0, this.sent - 1);
    if (this.probe(grantedAtMs)) this.probeOut = false;
    this.freed();
  }

  /** The outcome of a call that was sent (its permit taken at `grantedAtMs`: only the probe's decides a half-open
   *  breaker). Permanent errors (4xx) say nothing about the provider's health. */
  onResult(r: ProviderResult, grantedAtMs?: number): void {
    const now = this.clock.nowMs();
    this.inFlight = Math.max(0, this.inFlight - 1);
    this.sent = Math.max(0, this.sent - 1);
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
    this.freed();
  }

  state(): GuardState {
    const now = this.clock.nowMs();
    const breaker = this.breaker === 'open' && now >= this.openUntil ? 'half_open' : this.breaker;
    return {
      breaker, consecutiveFailures: this.failures, inFlight: this.inFlight, sent: this.sent, heldBack: { ...this.held },
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
    const raised = this.maxInFlight > 0 && (l.maxInFlight === 0 || l.maxInFlight > this.maxInFlight);
    this.maxInFlight = l.maxInFlight;
    this.led = Math.max(1, l.led ?? 1);
    const leading = l.leading ?? true;
    if (!leading || !this.leading) {
      // Leading nothing: nothing is saved up; a share that begins now starts with an empty bucket.
      this.tokens = 0;
      this.lastRefill = now;
    }
    this.leading = leading;
    if (raised) this.freed();
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
