// Provider protection, provider-wide (one guard per process, shared by every attempt the leader makes):
// - a rate limit (token bucket: `ratePerSec`, burst of 100 ms worth, at least 1) and a cap on calls in flight;
// - a 429/503 with Retry-After pauses every call until then (capped at `retryAfterMaxMs`), not just that intent;
// - a circuit breaker: after `breakerThreshold` consecutive retryable failures it opens for `breakerCooldownMs`,
//   then lets exactly one probe through (half-open); the probe's success closes it, a retryable failure reopens it.
// The executor asks `acquire(n)` BEFORE its fenced start and starts at most the granted number: holding back
// never creates an attempt row, so it never uses up an attempt and never fails an intent. Permits it did not
// use go back with `release(n)`; every call that was sent reports its result with `onResult`.
import type { Clock } from '../lease/clock.js';
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
  inFlight: number;
  /** Calls held back (asked but not granted) since start, by reason. */
  heldBack: Record<HoldReason, number>;
}

export class ProviderGuard {
  private tokens: number;
  private lastRefill: number;
  private inFlight = 0;
  private failures = 0;
  private breaker: BreakerState = 'closed';
  private openUntil = 0;
  private pausedUntil = 0;
  private probeOut = false;
  private readonly burst: number;
  private readonly held: Record<HoldReason, number> = { rate: 0, in_flight: 0, retry_after: 0, breaker_open: 0, probe_in_flight: 0 };

  constructor(private readonly s: GuardSettings, private readonly clock: Clock, private readonly onChange: (state: BreakerState) => void = () => {}) {
    this.burst = Math.max(1, Math.ceil(s.ratePerSec / 10));
    this.tokens = this.burst;
    this.lastRefill = clock.nowMs();
  }

  /** Take up to `wanted` permits now (each = one call the caller may send). */
  acquire(wanted: number): Grant {
    const now = this.clock.nowMs();
    if (wanted <= 0) return { granted: 0, heldBy: null, retryAtMs: null };
    const hold = (heldBy: HoldReason, retryAtMs: number | null, granted = 0): Grant => {
      this.held[heldBy] += wanted - granted;
      return { granted, heldBy, retryAtMs };
    };
    if (now < this.pausedUntil) return hold('retry_after', this.pausedUntil);
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
    if (this.s.maxInFlight > 0 && this.inFlight + n > this.s.maxInFlight) {
      n = Math.max(0, this.s.maxInFlight - this.inFlight);
      limit = { by: 'in_flight', at: null };
    }
    if (this.s.ratePerSec > 0) {
      this.refill(now);
      const whole = Math.floor(this.tokens);
      if (whole < n) {
        n = whole;
        limit = { by: 'rate', at: now + Math.ceil(((1 - (this.tokens - whole)) * 1000) / this.s.ratePerSec) };
      }
      this.tokens -= n;
    }
    this.inFlight += n;
    if (this.breaker === 'half_open' && n > 0) this.probeOut = true;
    return n === wanted ? { granted: n, heldBy: null, retryAtMs: null } : hold(limit!.by, limit!.at, n);
  }

  /** Give back permits that were not used (the fenced start started fewer intents than granted). */
  release(unused: number): void {
    if (unused <= 0) return;
    this.inFlight = Math.max(0, this.inFlight - unused);
    if (this.s.ratePerSec > 0) this.tokens = Math.min(this.burst, this.tokens + unused);
    if (this.breaker === 'half_open') this.probeOut = false;
  }

  /** A sent call whose failure says nothing about the provider: this process stalled (a GC pause, SIGSTOP, a
   *  starved event loop) past the call's timeout, so the timeout is ours. Frees its slot; counts as neither a
   *  failure nor a success (a probe left this way lets the next call probe). */
  onInconclusive(): void {
    this.inFlight = Math.max(0, this.inFlight - 1);
    if (this.breaker === 'half_open') this.probeOut = false;
  }

  /** The outcome of a call that was sent. Permanent errors (4xx) say nothing about the provider's health. */
  onResult(r: ProviderResult): void {
    const now = this.clock.nowMs();
    this.inFlight = Math.max(0, this.inFlight - 1);
    if (r.kind === 'retryable' && (r.httpStatus === 429 || r.httpStatus === 503) && r.retryAfterMs !== null && r.retryAfterMs > 0) {
      this.pausedUntil = Math.max(this.pausedUntil, now + Math.min(r.retryAfterMs, this.s.retryAfterMaxMs));
    }
    const probe = this.breaker === 'half_open' && this.probeOut;
    if (r.kind === 'retryable') {
      this.failures += 1;
      if (this.s.breakerThreshold > 0 && (probe || (this.breaker === 'closed' && this.failures >= this.s.breakerThreshold))) {
        this.openUntil = now + this.s.breakerCooldownMs;
        this.probeOut = false;
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
      breaker, consecutiveFailures: this.failures, inFlight: this.inFlight, heldBack: { ...this.held },
      openForMs: breaker === 'open' ? this.openUntil - now : 0, pausedForMs: Math.max(0, this.pausedUntil - now),
    };
  }

  private refill(now: number): void {
    this.tokens = Math.min(this.burst, this.tokens + ((now - this.lastRefill) * this.s.ratePerSec) / 1000);
    this.lastRefill = now;
  }

  private setBreaker(b: BreakerState): void {
    if (b === this.breaker) return;
    this.breaker = b;
    this.onChange(b);
  }
}
