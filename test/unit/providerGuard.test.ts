// Provider protection: table-driven against a fake clock (rate, in-flight cap, Retry-After pause, breaker
// open → probe → close/reopen), then against the real recording provider over HTTP with a small driver that
// does what the executor does — ask the guard first, send only what it grants, count an attempt only for a
// call that was sent — so holding back is visibly free: no attempt lost, no intent failed.
import { describe, expect, it } from 'vitest';
import { FakeClock, systemClock, type Clock } from '../../src/lease/clock.js';
import { burstOf, ProviderGuard, type BreakerState } from '../../src/provider/guard.js';
import type { GuardSettings } from '../../src/limits.js';
import { HttpProvider } from '../../src/provider/httpProvider.js';
import type { ProviderResult } from '../../src/provider/provider.js';
import { startRecordingProvider, type Answer } from '../support/recordingProvider.js';

const OFF: GuardSettings = { ratePerSec: 0, maxInFlight: 0, breakerThreshold: 0, breakerCooldownMs: 1_000, retryAfterMaxMs: 60_000 };
const ok: ProviderResult = { kind: 'success', httpStatus: 200 };
const fail: ProviderResult = { kind: 'retryable', httpStatus: 500, error: 'HTTP 500', retryAfterMs: null };
const busy = (ms: number | null): ProviderResult => ({ kind: 'retryable', httpStatus: 429, error: 'HTTP 429', retryAfterMs: ms });
const bad: ProviderResult = { kind: 'permanent', httpStatus: 400, error: 'HTTP 400' };

function guard(s: Partial<GuardSettings>, clock: Clock = new FakeClock()) {
  const changes: BreakerState[] = [];
  return { g: new ProviderGuard({ ...OFF, ...s }, clock, (b) => changes.push(b)), changes, clock: clock as FakeClock };
}

describe('ProviderGuard (fake clock)', () => {
  it.each([
    { name: 'nothing', stage: () => {}, hold: null },
    { name: 'the rate and the in-flight cap used up (permits account for them)', s: { ratePerSec: 1, maxInFlight: 1 },
      stage: (g: ProviderGuard) => void g.acquire(5), hold: null },
    { name: 'a 429 Retry-After pause', stage: (g: ProviderGuard) => { g.acquire(1); g.onResult(busy(5_000)); }, hold: 'retry_after' },
    { name: 'own breaker open', s: { breakerThreshold: 1 }, stage: (g: ProviderGuard) => { g.acquire(1); g.onResult(fail); }, hold: 'breaker_open' },
    { name: 'own breaker open, cool-down over (no probe sent yet)', s: { breakerThreshold: 1 },
      stage: (g: ProviderGuard, c: FakeClock) => { g.acquire(1); g.onResult(fail); c.advance(1_000); }, hold: 'breaker_open' },
    { name: 'half-open, the probe granted', s: { breakerThreshold: 1 },
      stage: (g: ProviderGuard, c: FakeClock) => { g.acquire(1); g.onResult(fail); c.advance(1_000); g.acquire(1); }, hold: null },
    { name: "another process's breaker", stage: (g: ProviderGuard, c: FakeClock) => g.holdFor('breaker_open', c.nowMs() + 5_000), hold: 'breaker_open' },
    { name: "another process's Retry-After", stage: (g: ProviderGuard, c: FakeClock) => g.holdFor('retry_after', c.nowMs() + 5_000), hold: 'retry_after' },
  ])('holdNow, $name: $hold, asked without taking or counting anything', ({ s = {}, stage, hold }) => {
    const { g, clock } = guard(s);
    stage(g, clock);
    const before = g.state();
    expect([g.holdNow(), g.holdNow()]).toEqual([hold, hold]);
    expect(g.state()).toEqual(before); // breaker, permits in flight and counts held back as they were
  });

  it.each([
    { name: 'own breaker opened and half-open again', s: { breakerThreshold: 1 },
      stage: (g: ProviderGuard, c: FakeClock) => { g.acquire(1); c.advance(10); g.onResult(fail); c.advance(1_000); g.acquire(1); }, hold: 'breaker_open' },
    { name: 'a Retry-After pause begun and over', stage: (g: ProviderGuard, c: FakeClock) => { g.acquire(1); c.advance(10); g.onResult(busy(500)); c.advance(1_000); },
      hold: 'retry_after' },
    { name: "another process's breaker recorded and lifted",
      stage: (g: ProviderGuard, c: FakeClock) => { c.advance(10); g.holdFor('breaker_open', c.nowMs() + 500); c.advance(1_000); g.holdFor('breaker_open', 0); },
      hold: 'breaker_open' },
    { name: 'a hold over before the grant', stage: (g: ProviderGuard, c: FakeClock) => { g.acquire(1); g.onResult(busy(5)); c.advance(10); }, hold: null },
  ])('holdNow(grantedAt), $name: $hold for a permit taken before it began, whether or not it still holds', ({ s = {}, stage, hold }) => {
    const { g, clock } = guard({ breakerCooldownMs: 1_000, ...s });
    const grantedAt = clock.nowMs();
    stage(g, clock);
    expect(g.holdNow(hold === null ? grantedAt + 10 : grantedAt)).toBe(hold);
    expect(g.holdNow(clock.nowMs() + 1)).toBeNull(); // a permit taken now is not held by it
  });

  it.each([
    { name: "another process's breaker", stage: (g: ProviderGuard, c: FakeClock) => g.holdFor('breaker_open', c.nowMs() + 500) },
    { name: "another process's Retry-After", stage: (g: ProviderGuard, c: FakeClock) => g.holdFor('retry_after', c.nowMs() + 500) },
  ])('half-open: the probe aborted by a hold begun after its grant ($name), given back, lets the next probe out once the hold ends',
    ({ stage }) => {
      const { g, clock } = guard({ breakerThreshold: 1, breakerCooldownMs: 1_000 });
      g.acquire(1);
      clock.advance(10);
      g.onResult(fail); // the breaker opens
      clock.advance(1_000);
      const probeAt = clock.nowMs();
      expect(g.acquire(1)).toMatchObject({ granted: 1 }); // the probe, its START on the wire …
      clock.advance(1);
      stage(g, clock); // … when another process's hold is read
      expect(g.holdNow(probeAt)).not.toBeNull(); // so the probe is not sent
      g.release(1, probeAt);
      clock.advance(600); // the hold is over
      expect(g.acquire(1)).toMatchObject({ granted: 1 }); // the next probe (not held for good as probe_in_flight)
    });

  it('a 429 whose Retry-After is capped to 0 (PROVIDER_RETRY_AFTER_MAX_MS 0) begins no hold: permits taken before it are sent', () => {
    const { g, clock } = guard({ retryAfterMaxMs: 0 });
    const grantedAt = clock.nowMs();
    g.acquire(2);
    clock.advance(5);
    g.onResult(busy(5_000));
    expect(g.holdNow(grantedAt)).toBeNull();
  });

  it.each([
    { name: 'answered 200', end: (g: ProviderGuard, at: number) => g.onResult({ kind: 'success', httpStatus: 200 }, at) },
    { name: 'failed', end: (g: ProviderGuard, at: number) => g.onResult(fail, at) },
    { name: 'inconclusive (a stall of ours)', end: (g: ProviderGuard, at: number) => g.onInconclusive(at) },
  ])('half-open: a call sent before the breaker opened, $name after the probe went out, decides nothing; the probe does', ({ end }) => {
    const { g, clock } = guard({ breakerThreshold: 1, breakerCooldownMs: 1_000 });
    const staleAt = clock.nowMs();
    g.acquire(2); // two calls out
    clock.advance(10);
    g.onResult(fail); // one fails: the breaker opens; the other is still out
    clock.advance(1_000);
    const probeAt = clock.nowMs();
    expect(g.acquire(1)).toMatchObject({ granted: 1 }); // the probe
    end(g, staleAt);
    expect(g.state().breaker).toBe('half_open');
    expect(g.acquire(1)).toMatchObject({ granted: 0, heldBy: 'probe_in_flight' }); // still one probe
    g.onResult({ kind: 'success', httpStatus: 200 }, probeAt);
    expect(g.state().breaker).toBe('closed');
  });

  it('half-open: a permit taken before the breaker opened, given back, does not let a second probe out', () => {
    const { g, clock } = guard({ breakerThreshold: 1, breakerCooldownMs: 1_000 });
    const staleAt = clock.nowMs();
    expect(g.acquire(2).granted).toBe(2); // one call, one attempt waiting ready
    clock.advance(10);
    g.onResult(fail); // the breaker opens
    clock.advance(1_000);
    expect(g.acquire(1)).toMatchObject({ granted: 1 }); // the probe
    g.release(1, staleAt); // the waiting attempt is aborted, its permit back
    expect(g.acquire(1)).toMatchObject({ granted: 0, heldBy: 'probe_in_flight' });
    g.release(1, clock.nowMs()); // the probe itself given back unsent: the next may probe
    expect(g.acquire(1)).toMatchObject({ granted: 1 });
  });

  it('half-open: the very ms the breaker opened is before it: a permit of that ms is not the probe', () => {
    const { g, clock, changes } = guard({ breakerThreshold: 1, breakerCooldownMs: 100 });
    const t = clock.nowMs();
    expect(g.acquire(3).granted).toBe(3); // two calls and a START's permit, all in this ms
    expect([g.beginCall(), g.beginCall()]).toEqual([true, true]);
    g.onResult(fail, t); // the first fails in the same ms: open
    clock.advance(100);
    expect(g.acquire(1).granted).toBe(1); // the probe
    g.release(1, t); // the START's permit back unused: not the probe, which is still out
    expect(g.acquire(1)).toMatchObject({ granted: 0, heldBy: 'probe_in_flight' });
    g.onResult(ok, t); // the second call, sent before the open, answers: it does not decide
    expect(changes).toEqual(['open', 'half_open']);
  });

  it('a breaker with a cool-down below 1 ms is refused at construction (its probe would never be recognised)', () => {
    expect(() => guard({ breakerThreshold: 1, breakerCooldownMs: 0 })).toThrow(/breakerCooldownMs must be at least 1/);
    expect(() => guard({ breakerThreshold: 0, breakerCooldownMs: 0 })).not.toThrow(); // no breaker
  });

  it('an asker the cap refused is called back once room frees (a call answered, or permits back unsent), in a microtask', async () => {
    const g = new ProviderGuard({ ...OFF, maxInFlight: 2 }, new FakeClock());
    expect(g.acquire(2).granted).toBe(2);
    let woken = 0;
    expect(g.acquire(1, 0, () => woken++)).toMatchObject({ granted: 0, heldBy: 'in_flight' });
    g.release(1); // a permit back unsent
    expect(woken).toBe(0);
    await Promise.resolve();
    expect(woken).toBe(1);
    expect(g.acquire(2, 0, () => woken++).granted).toBe(1);
    expect(g.beginCall()).toBe(true);
    g.onResult(ok);
    await Promise.resolve();
    expect(woken).toBe(2);
    g.onResult(ok);
    await Promise.resolve();
    expect(woken).toBe(2); // once per refusal
  });

  it.each([[1], [20], [250], [2.5]])('rate %s/s: over 10 s at most rate × 10 + burst calls, and every 1 s window within 10 %% + 1', (rate) => {
    const { g, clock } = guard({ ratePerSec: rate });
    const grants: number[] = [];
    for (let t = 0; t < 10_000; t += 5) {
      const n = g.acquire(50).granted;
      for (let i = 0; i < n; i++) grants.push(t);
      for (let i = 0; i < n; i++) g.onResult(ok);
      clock.advance(5);
    }
    const burst = Math.max(1, Math.ceil(rate / 10));
    expect(grants.length).toBeLessThanOrEqual(Math.floor(rate * 10) + burst);
    expect(grants.length).toBeGreaterThanOrEqual(Math.floor(rate * 10 * 0.9));
    for (let w = 0; w <= 9_000; w += 250) {
      expect(grants.filter((t) => t >= w && t < w + 1_000).length).toBeLessThanOrEqual(Math.ceil(rate * 1.1) + burst);
    }
  });

  it('rate: a held-back ask says when to ask again; unused permits go back', () => {
    const { g, clock } = guard({ ratePerSec: 10 });
    expect(g.acquire(5)).toEqual({ granted: 1, heldBy: 'rate', retryAtMs: 100 });
    expect(g.acquire(1)).toMatchObject({ granted: 0, heldBy: 'rate' });
    g.release(1);
    expect(g.acquire(1).granted).toBe(1);
    clock.advance(100);
    expect(g.acquire(1).granted).toBe(1);
    expect(g.state().heldBack.rate).toBe(5);
  });

  it('in flight: never more than maxInFlight outstanding; each result frees one', () => {
    const { g } = guard({ maxInFlight: 3 });
    expect(g.acquire(10)).toEqual({ granted: 3, heldBy: 'in_flight', retryAtMs: null });
    expect(g.acquire(1).granted).toBe(0);
    g.onResult(ok);
    expect(g.acquire(5).granted).toBe(1);
    expect(g.state().inFlight).toBe(3);
  });

  it('the cap bounds calls sent: up to `ahead` permits beyond it wait; beginCall lets one out as a sent call ends', () => {
    const { g } = guard({ maxInFlight: 3 });
    expect(g.acquire(10, 2)).toEqual({ granted: 5, heldBy: 'in_flight', retryAtMs: null }); // 3 + 2 waiting
    expect([g.beginCall(), g.beginCall(), g.beginCall(), g.beginCall()]).toEqual([true, true, true, false]);
    expect([g.state().inFlight, g.state().sent, g.callLimit()]).toEqual([5, 3, 3]);
    g.onResult(ok); // a sent call ended: one waiting may go
    expect([g.beginCall(), g.beginCall()]).toEqual([true, false]);
    g.release(1, undefined, true); // let out, then stopped at its gate: its place goes back
    expect(g.beginCall()).toBe(true);
    g.onInconclusive();
    expect([g.state().inFlight, g.state().sent]).toEqual([2, 2]);
    expect(g.acquire(10).granted).toBe(1); // without `ahead`, the cap counts every permit
    const unlimited = guard({}).g;
    expect(unlimited.acquire(4).granted).toBe(4);
    expect([unlimited.beginCall(), unlimited.beginCall(), unlimited.callLimit()]).toEqual([true, true, 0]);
  });

  it('a refused beginCall is called back once a sent call ends, in a microtask; an asker of no `ahead` gets none beyond the cap', async () => {
    const g = new ProviderGuard({ ...OFF, maxInFlight: 2 }, new FakeClock(), () => {}, { aheadPerPartition: 3 });
    expect(g.acquire(5).granted).toBe(2); // no ahead asked: the cap, whatever the process allows
    expect(g.acquire(5, 1).granted).toBe(3); // ahead asked: the process's allowance per partition (3)
    expect([g.beginCall(), g.beginCall()]).toEqual([true, true]);
    let woken = 0;
    expect(g.beginCall(() => woken++)).toBe(false);
    g.onResult(ok);
    expect(woken).toBe(0); // not inside the ender's own call
    await Promise.resolve();
    expect(woken).toBe(1);
    g.onResult(ok);
    await Promise.resolve();
    expect(woken).toBe(1); // once per refusal
  });

  it('beginCall takes the share as it is now: a lowered share lets nothing more out, a raised one calls back the refused', async () => {
    let share = 4;
    const g = new ProviderGuard({ ...OFF, maxInFlight: 4 }, new FakeClock(), () => {}, { share: () => ({ ratePerSec: 0, maxInFlight: share }) });
    expect(g.acquire(4).granted).toBe(4);
    expect([g.beginCall(), g.beginCall(), g.beginCall()]).toEqual([true, true, true]);
    share = 2; // a partition handed back, no acquire since
    let woken = 0;
    expect(g.beginCall(() => woken++)).toBe(false);
    g.onResult(ok);
    await Promise.resolve();
    expect(woken).toBe(1);
    expect(g.beginCall(() => woken++)).toBe(false); // 2 still out, the share 2
    share = 4;
    g.shareChanged();
    await Promise.resolve();
    expect([woken, g.beginCall()]).toEqual([2, true]);
  });

  it('Retry-After on a 429/503 pauses every call until then, capped; a 500 with Retry-After does not', () => {
    const { g, clock } = guard({ retryAfterMaxMs: 5_000 });
    g.acquire(1);
    g.onResult(busy(2_000));
    expect(g.acquire(4)).toEqual({ granted: 0, heldBy: 'retry_after', retryAtMs: 2_000 });
    clock.advance(1_999);
    expect(g.acquire(1).granted).toBe(0);
    clock.advance(1);
    expect(g.acquire(4).granted).toBe(4);
    for (let i = 0; i < 4; i++) g.onResult(i === 0 ? busy(600_000) : ok);
    expect(g.state().pausedForMs).toBe(5_000); // capped
    clock.advance(5_000);
    g.acquire(1);
    g.onResult({ kind: 'retryable', httpStatus: 500, error: 'x', retryAfterMs: 9_000 });
    expect(g.state().pausedForMs).toBe(0);
    expect(g.acquire(1).granted).toBe(1);
  });

  it('breaker: opens after N consecutive retryable failures, one probe after the cool-down, reopens on failure, closes on success', () => {
    const { g, clock, changes } = guard({ breakerThreshold: 3, breakerCooldownMs: 1_000 });
    g.acquire(3);
    g.onResult(fail);
    g.onResult(bad); // a permanent error (4xx: the provider answered) resets the consecutive count
    g.onResult(fail);
    expect(g.state().breaker).toBe('closed');
    g.acquire(2);
    g.onResult(fail);
    g.onResult(fail);
    expect(g.state()).toMatchObject({ breaker: 'open', openForMs: 1_000, consecutiveFailures: 3 });
    expect(g.acquire(5)).toEqual({ granted: 0, heldBy: 'breaker_open', retryAtMs: 1_000 });
    clock.advance(1_000);
    expect(g.acquire(5)).toEqual({ granted: 1, heldBy: 'probe_in_flight', retryAtMs: null });
    expect(g.acquire(5).granted).toBe(0); // only one probe
    g.onResult(fail);
    expect(g.state().breaker).toBe('open');
    clock.advance(1_000);
    expect(g.acquire(1).granted).toBe(1);
    g.onResult(ok);
    expect(g.state()).toMatchObject({ breaker: 'closed', consecutiveFailures: 0 });
    expect(g.acquire(5).granted).toBe(5);
    expect(changes).toEqual(['open', 'half_open', 'open', 'half_open', 'closed']);
  });

  it('an inconclusive call (this process stalled past its timeout) frees its slot and counts for nothing', () => {
    const { g, clock } = guard({ breakerThreshold: 2, breakerCooldownMs: 1_000, maxInFlight: 3 });
    expect(g.acquire(3).granted).toBe(3);
    g.onInconclusive();
    g.onInconclusive();
    g.onInconclusive();
    expect(g.state()).toMatchObject({ breaker: 'closed', consecutiveFailures: 0, inFlight: 0 });
    g.acquire(2);
    g.onResult(fail);
    g.onResult(fail);
    clock.advance(1_000);
    expect(g.acquire(1).granted).toBe(1); // the probe…
    g.onInconclusive(); // …stalled: says nothing, so the next call may probe
    expect(g.state().breaker).toBe('half_open');
    expect(g.acquire(1).granted).toBe(1);
  });

  it('success resets the consecutive count; threshold 0 never opens', () => {
    const { g } = guard({ breakerThreshold: 2 });
    for (let i = 0; i < 10; i++) {
      g.acquire(2);
      g.onResult(fail);
      g.onResult(ok);
    }
    expect(g.state().breaker).toBe('closed');
    const off = guard({ breakerThreshold: 0 }).g;
    for (let i = 0; i < 100; i++) {
      off.acquire(1);
      off.onResult(fail);
    }
    expect(off.acquire(1).granted).toBe(1);
  });
});

/** What the executor does, in small: ask the guard, send only what it grants, count attempts only for calls sent. */
async function drive(g: ProviderGuard, intents: number, provider: HttpProvider, url: string, untilMs: number, maxAttempts = 100) {
  const attempts = new Map<string, number>();
  const done = new Set<string>();
  const failed = new Set<string>();
  let held = 0;
  const inFlight = new Set<Promise<void>>();
  const pending = () => Array.from({ length: intents }, (_, i) => `i-${i}`).filter((id) => !done.has(id) && !failed.has(id) && ![...inFlightIds].includes(id));
  const inFlightIds = new Set<string>();
  const grants: number[] = []; // each permit, when the guard granted it (its own clock)
  const end = Date.now() + untilMs;
  while (Date.now() < end && done.size + failed.size < intents) {
    const want = pending();
    const grant = g.acquire(want.length);
    for (let i = 0; i < grant.granted; i++) grants.push(systemClock.nowMs());
    held += want.length - grant.granted;
    for (const id of want.slice(0, grant.granted)) {
      const no = (attempts.get(id) ?? 0) + 1;
      attempts.set(id, no);
      inFlightIds.add(id);
      const p = provider.submit({ intentId: id, attemptNo: no, leaseEpoch: 1, payload: { id }, url }, { timeoutMs: 2_000 }).then((r) => {
        g.onResult(r);
        inFlightIds.delete(id);
        if (r.kind === 'success') done.add(id);
        else if (r.kind === 'permanent' || no >= maxAttempts) failed.add(id);
      });
      inFlight.add(p);
      void p.finally(() => inFlight.delete(p));
    }
    await new Promise((r) => setTimeout(r, grant.granted > 0 ? 1 : 5));
  }
  await Promise.all(inFlight);
  return { attempts, done, failed, held, grants };
}

describe('ProviderGuard against the recording provider (real HTTP)', () => {
  it('rate limit 20/s: any window of grants within rate × window + burst; every intent succeeds with exactly one attempt', async () => {
    // Judged where the limit is kept, the guard's grants on its own clock (a token bucket: exact whatever the
    // machine's speed); the provider's arrivals follow them, bunched by however a loaded machine delivers the calls.
    const rec = await startRecordingProvider();
    const http = new HttpProvider(rec.url);
    try {
      const g = new ProviderGuard({ ...OFF, ratePerSec: 20, maxInFlight: 8 }, systemClock);
      const r = await drive(g, 400, http, rec.url, 10_000);
      const inWindow = (from: number, ms: number) => r.grants.filter((t) => t >= from && t < from + ms).length;
      for (const ms of [1_000, 10_000]) expect(Math.max(...r.grants.map((t) => inWindow(t, ms))), `${ms} ms`).toBeLessThanOrEqual((20 * ms) / 1_000 + burstOf(20));
      expect(r.grants.length).toBe(rec.calls.length); // every call sent was granted, once
      expect(r.held).toBeGreaterThan(0);
      expect(r.failed.size).toBe(0);
      for (const [id, n] of r.attempts) expect(n, id).toBe(1); // held back ≠ an attempt
      expect(rec.calls.length).toBe(r.attempts.size);
    } finally {
      http.close();
      await rec.close();
    }
  }, 30_000);

  it('a 429 with Retry-After pauses every call, not only that intent', async () => {
    let first = true;
    const rec = await startRecordingProvider((): Answer => {
      if (first) { first = false; return { status: 429, headers: { 'retry-after': '1' } }; }
      return { status: 200 };
    });
    const http = new HttpProvider(rec.url);
    try {
      const g = new ProviderGuard({ ...OFF, maxInFlight: 1 }, systemClock);
      const r = await drive(g, 20, http, rec.url, 15_000);
      const [c0, c1] = rec.calls;
      expect(c1!.arrivedAt - c0!.arrivedAt).toBeGreaterThanOrEqual(950); // nobody was sent during the pause
      expect(r.done.size).toBe(20);
      expect(r.failed.size).toBe(0);
      expect(g.state().heldBack.retry_after).toBeGreaterThan(0);
      expect([...r.attempts.values()].reduce((a, b) => a + b, 0)).toBe(21); // 20 successes + the one 429
    } finally {
      http.close();
      await rec.close();
    }
  }, 30_000);

  it('the breaker opens after 5 failures, sends one probe after the cool-down, closes; nothing fails', async () => {
    let failing = 5;
    const rec = await startRecordingProvider((): Answer => (failing-- > 0 ? { status: 503 } : { status: 200 }));
    const http = new HttpProvider(rec.url);
    try {
      const changes: BreakerState[] = [];
      const g = new ProviderGuard({ ...OFF, maxInFlight: 1, breakerThreshold: 5, breakerCooldownMs: 400 }, systemClock, (b) => changes.push(b));
      const r = await drive(g, 10, http, rec.url, 15_000, 10);
      expect(changes).toEqual(['open', 'half_open', 'closed']);
      const gap = rec.calls[5]!.arrivedAt - rec.calls[4]!.arrivedAt;
      expect(gap).toBeGreaterThanOrEqual(380); // the cool-down: nothing sent while open
      expect(r.done.size).toBe(10);
      expect(r.failed.size).toBe(0);
      expect(g.state().heldBack.breaker_open).toBeGreaterThan(0);
      expect(rec.calls.length).toBe(15);
    } finally {
      http.close();
      await rec.close();
    }
  }, 30_000);
});
