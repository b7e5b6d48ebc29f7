// Pre-started attempts (the ready queue of src/executor/executionState.ts, filled and sent by src/executor/batch.ts),
// judged on a fake clock with a provider of fixed latency and a START that takes a few ms:
//  - a START may start up to 2 × startBatch attempts beyond the free slots; they wait, in START order, and a call that
//    ends sends the next one at once, before any further START; calls in flight never exceed the concurrency;
//  - a ready attempt goes through the send gate: a pause read meanwhile aborts it (never sent, permit back), and so
//    does a provider hold (Retry-After, a breaker open here or recorded by another process);
//  - a START refills the queue once fewer than startBatch are left: one START per startBatch + 1 sends at most;
//  - a batch that stops other than by running out (drain, handover, lost lease) aborts its ready attempts before its
//    completions are written, and sends nothing after; one that ends at its deadline still leading carries them,
//    and the next batch sends them before it starts anything of its own.
import { describe, expect, it } from 'vitest';
import type { ProviderPermits } from '../../src/provider/partitionPermits.js';
import type { ProviderResult } from '../../src/provider/provider.js';
import type { GuardSettings } from '../../src/limits.js';
import type { LeaseToken } from '../../src/store/ports.js';
import type { StartedAttempt } from '../../src/store/intentPorts.js';
import { ahead, CALL_MS, flush, harness, id, START_MS, TOKEN } from '../support/readyHarness.js';

describe('ready attempts: a freed slot sends the next started attempt at once', () => {
  it('c=4, startBatch 1, fixed latency: after warm-up every call that ends is followed by a send before any START', async () => {
    // Intents fall due faster (one per 10 ms) than four 50 ms calls take them (one per 12.5 ms): a backlog forms.
    const h = harness({ concurrency: 4, startBatch: 1, dueAt: Array.from({ length: 40 }, (_, i) => i * 10) });
    const run = h.batch(450).run();
    await h.runUntil(450);
    expect(await run).toBe('deadline');
    const warm = h.events.findIndex((e) => e.kind === 'end'); // from the first call that ends
    const after = h.events.slice(warm);
    const ends = after.flatMap((e, i) => (e.kind === 'end' ? [i] : []));
    expect(ends.length).toBeGreaterThan(20);
    for (const i of ends) {
      const next = after.slice(i + 1).find((e) => e.kind !== 'end');
      if (next) expect(next.kind, `after the end of ${(after[i] as { id: string }).id}`).toBe('send');
    }
    // Sends keep START order (due order here), and no more STARTs than sends were needed.
    expect(h.sent()).toEqual(h.sent().slice().sort());
    const starts = after.filter((e) => e.kind === 'start').length;
    expect(starts).toBeLessThanOrEqual(after.filter((e) => e.kind === 'send').length);
  });

  it.each([
    { concurrency: 4, startBatch: 1 },
    { concurrency: 4, startBatch: 2 },
    { concurrency: 3, startBatch: 3 },
  ])('c=$concurrency, startBatch $startBatch: a START takes up to 2 × startBatch beyond the free slots; calls in flight never exceed c',
    async ({ concurrency, startBatch }) => {
      const h = harness({ concurrency, startBatch, dueAt: Array.from({ length: 30 }, () => 0) });
      const run = h.batch(600).run();
      await h.runUntil(600);
      expect(await run).toBe('deadline');
      expect(h.fencedStartAttempts.mock.calls[0]![1]).toHaveLength(concurrency + ahead(startBatch)); // nothing in flight yet
      expect(h.calls.max).toBe(concurrency);
      expect(h.sent()).toEqual(Array.from({ length: 30 }, (_, i) => id(i)));
    });

  it('a pause read while attempts wait: none of them is sent, each is recorded aborted, its permit back', async () => {
    const h = harness({ concurrency: 2, startBatch: 2, dueAt: [0, 0, 0, 0, 0, 0] });
    const run = h.batch(400).run();
    await h.runUntil(10); // i0, i1 in flight; i2…i5 ready
    expect(h.sent()).toEqual(['i00', 'i01']);
    h.ctl.paused = true;
    await h.runUntil(400);
    expect(await run).toBe('deadline');
    expect(h.sent()).toEqual(['i00', 'i01']);
    expect(h.aborted()).toEqual(['i02', 'i03', 'i04', 'i05']);
    expect(h.recorded.filter((c) => c.outcome === 'aborted').map((c) => c.error))
      .toEqual(Array(4).fill('aborted before the provider call: execution paused before the provider call'));
    expect(h.permits.out).toBe(0);
    expect(h.state.pending).toBe(0); // written under the fence
  });

  it.each([
    { name: 'drain', stop: (c: { stop: string | null }) => void (c.stop = 'draining'), reason: 'draining' },
    { name: 'handover', stop: (c: { handover: boolean }) => void (c.handover = true), reason: 'handover' },
    { name: 'lease lost', stop: (c: { leading: boolean }) => void (c.leading = false), reason: 'lease_lost' },
    { name: 'drain, no guard', stop: (c: { stop: string | null }) => void (c.stop = 'draining'), reason: 'draining', noGuard: true },
  ])('$name: the ready attempts are aborted before the completions are written; nothing is sent after', async ({ stop, reason, noGuard }) => {
    const h = harness({ concurrency: 2, startBatch: 2, dueAt: [0, 0, 0, 0, 0, 0], noGuard });
    const run = h.batch(1_000).run();
    await h.runUntil(10);
    expect(h.sent()).toEqual(['i00', 'i01']);
    stop(h.ctl as never);
    await h.runUntil(300);
    expect(await run).toBe(reason);
    expect(h.sent()).toEqual(['i00', 'i01']);
    expect(h.aborted()).toEqual(['i02', 'i03', 'i04', 'i05']);
    expect(h.recorded.filter((c) => c.outcome === 'aborted').map((c) => c.error))
      .toEqual(Array(4).fill(`aborted before the provider call: the batch stopped (${reason})`));
    expect(h.permits.out).toBe(0);
    expect(h.state.readyAttempts).toBe(0);
    expect(h.state.unwritten).toBe(false);
  });

  it.each([
    { name: 'handover', request: (c: { handover: boolean }) => void (c.handover = true), reason: 'handover requested' },
    { name: 'drain', request: (c: { stop: string | null }) => void (c.stop = 'draining'), reason: 'stop requested (draining)' },
  ])('a $name the send gate\'s own control read brings: that ready attempt is aborted, not sent', async ({ request, reason }) => {
    const h = harness({ concurrency: 1, startBatch: 1, dueAt: [0, 0] });
    const run = h.batch(1_000).run();
    await h.runUntil(10); // i00 in flight, i01 ready
    expect([h.sent(), h.state.readyAttempts]).toEqual([['i00'], 1]);
    h.ctl.onFreshRead = () => request(h.ctl as never); // the next control read (i01's gate, when i00 ends) brings it
    await h.runUntil(400);
    await run;
    expect(h.sent()).toEqual(['i00']);
    expect(h.recorded.filter((c) => c.intentId === 'i01').map((c) => c.error)).toEqual([`aborted before the provider call: ${reason}`]);
    expect(h.permits.out).toBe(0);
  });

  it('a batch ending at its deadline still leading carries its ready attempts; the next batch sends them first', async () => {
    const h = harness({ concurrency: 2, startBatch: 2, dueAt: [0, 0, 0, 0] });
    expect(await Promise.all([h.batch(20).run(), h.runUntil(20)]).then(([r]) => r)).toBe('deadline');
    expect(h.sent()).toEqual(['i00', 'i01']);
    expect(h.state.readyAttempts).toBe(2);
    const startsBefore = h.fencedStartAttempts.mock.calls.length;
    const run = h.batch(300).run();
    await h.runUntil(300);
    expect(await run).toBe('deadline');
    expect(h.sent()).toEqual(['i00', 'i01', 'i02', 'i03']);
    expect(h.fencedStartAttempts.mock.calls.length).toBe(startsBefore); // sent from the queue, no START of its own
    expect(h.aborted()).toEqual([]);
    expect(h.permits.out).toBe(0);
  });
});

describe('ready attempts: only where a later batch sends them', () => {
  it.each([
    { concurrency: 4, startBatch: 1, ahead: false, renewsUntil: Infinity, name: 'a tick with no next occurrence' },
    { concurrency: 4, startBatch: 2, ahead: false, renewsUntil: Infinity, name: 'a tick with no next occurrence' },
    { concurrency: 3, startBatch: 3, ahead: false, renewsUntil: Infinity, name: 'a tick with no next occurrence' },
    { concurrency: 4, startBatch: 2, ahead: true, renewsUntil: 0, name: 'a bridge past its renew window (no tick came)' },
  ])('$name, c=$concurrency, startBatch $startBatch: STARTs fill free slots only, none left ready, none aborted',
    async ({ concurrency, startBatch, ahead, renewsUntil }) => {
      const h = harness({ concurrency, startBatch, dueAt: Array.from({ length: 30 }, () => 0) });
      const run = h.batch(170, ahead, renewsUntil).run();
      await h.runUntil(400);
      expect(await run).toBe('deadline');
      expect(h.fencedStartAttempts.mock.calls[0]![1]).toHaveLength(concurrency);
      for (const [, requests] of h.fencedStartAttempts.mock.calls) expect(requests.length).toBeLessThanOrEqual(concurrency);
      expect(h.state.readyAttempts).toBe(0);
      expect(h.aborted()).toEqual([]);
      expect(h.sent().length).toBeGreaterThan(concurrency);
      expect(h.permits.out).toBe(0);
    });
});

describe('ready attempts: a provider hold keeps them from the provider', () => {
  const limits: GuardSettings = { ratePerSec: 0, maxInFlight: 0, breakerThreshold: 0, breakerCooldownMs: 10_000, retryAfterMaxMs: 30_000 };
  const failed = (httpStatus: number, retryAfterMs: number | null): ProviderResult => ({ kind: 'retryable', httpStatus, error: `${httpStatus}`, retryAfterMs });
  it.each([
    { name: '429 with Retry-After', hold: 'retry_after', answer: failed(429, 10_000) },
    { name: 'own breaker opened', hold: 'breaker_open', answer: failed(500, null), breakerThreshold: 1 },
    { name: "another process's breaker", hold: 'breaker_open', remote: 'breaker_open' as const },
    { name: "another process's Retry-After", hold: 'retry_after', remote: 'retry_after' as const },
  ])('$name while attempts wait ready: none of them is sent, each is recorded aborted, its permit back',
    async ({ hold, answer, breakerThreshold = 0, remote }) => {
      const h = harness({ concurrency: 1, startBatch: 2, dueAt: [0, 0, 0], guarded: { ...limits, breakerThreshold },
        answer: (i) => (i === id(0) && answer) || { kind: 'success', httpStatus: 200 } });
      const run = h.batch(400).run();
      await h.runUntil(10); // i00 in flight; i01, i02 ready
      expect([h.sent(), h.state.readyAttempts]).toEqual([['i00'], 2]);
      if (remote) h.real!.holdFor(remote, h.clock.nowMs() + 10_000);
      await h.runUntil(400);
      expect(await run).toBe('deadline');
      expect(h.sent()).toEqual(['i00']);
      expect(h.aborted()).toEqual(['i01', 'i02']);
      expect(h.recorded.filter((c) => c.outcome === 'aborted').map((c) => c.error))
        .toEqual(Array(2).fill(`aborted before the provider call: provider calls held (${hold})`));
      expect([h.real!.state().inFlight, h.state.readyAttempts, h.state.unwritten]).toEqual([0, 0, false]);
    });

  it.each([
    { name: "another process's Retry-After", hold: 'retry_after', remote: 'retry_after' as const },
    { name: "another process's breaker", hold: 'breaker_open', remote: 'breaker_open' as const },
  ])('$name read while the send gate reads the flags: that attempt is aborted, its permit back', async ({ hold, remote }) => {
    const h = harness({ concurrency: 1, startBatch: 1, dueAt: [0, 0], guarded: limits });
    const run = h.batch(400).run();
    await h.runUntil(10); // i00 in flight, i01 ready
    expect([h.sent(), h.state.readyAttempts]).toEqual([['i00'], 1]);
    h.ctl.onFreshRead = () => h.real!.holdFor(remote, h.clock.nowMs() + 10_000); // i01's gate, when i00 ends
    await h.runUntil(400);
    await run;
    expect(h.sent()).toEqual(['i00']);
    expect(h.recorded.filter((c) => c.intentId === 'i01').map((c) => c.error))
      .toEqual([`aborted before the provider call: provider calls held (${hold})`]);
    expect(h.real!.state().inFlight).toBe(0);
  });
});

describe('ready attempts: START batching', () => {
  it.each([
    { concurrency: 8, startBatch: 2 },
    { concurrency: 8, startBatch: 4 },
    { concurrency: 12, startBatch: 3 },
  ])('c=$concurrency, startBatch $startBatch, a backlog: after warm-up, one START per startBatch + 1 sends at most, none waited for',
    async ({ concurrency, startBatch }) => {
      // One falls due every 2 ms, faster than the calls take them (c per 50 ms): calls end one at a time, a backlog forms.
      const h = harness({ concurrency, startBatch, dueAt: Array.from({ length: 300 }, (_, i) => i * 2) });
      const run = h.batch(600).run();
      await h.runUntil(600);
      expect(await run).toBe('deadline');
      expect(h.sent()).toHaveLength(Math.floor(600 / CALL_MS) * concurrency); // every slot busy all along
      const after = h.events.slice(h.events.findIndex((e) => e.kind === 'end')); // from the first call that ends
      const sends = after.filter((e) => e.kind === 'send').length;
      const starts = after.filter((e) => e.kind === 'start').length;
      expect(starts).toBeLessThanOrEqual(Math.ceil(sends / (startBatch + 1)));
      // … and still, every call that ends is followed by a send from the queue before any START.
      const waited = after.flatMap((e, i) => (e.kind === 'end' && after.slice(i + 1).find((n) => n.kind !== 'end')?.kind === 'start' ? [e.id] : []));
      expect(waited).toEqual([]);
    });

  it.each([
    { concurrency: 8, startBatch: 2, cap: 8, batchUnderCap: 2, name: 'the default cap (= concurrency)' },
    { concurrency: 16, startBatch: 4, cap: 16, batchUnderCap: 4, name: 'the default cap (= concurrency)' },
    { concurrency: 8, startBatch: 2, cap: 5, batchUnderCap: 1, name: 'a cap below the concurrency (start batch ⌊5/4⌋)' },
  ])('c=$concurrency, startBatch $startBatch, a provider guard with $name: ready attempts wait beyond the cap, calls sent stay within it, STARTs stay batched',
    async ({ concurrency, startBatch: configured, cap, batchUnderCap: startBatch }) => {
      const limits: GuardSettings = { ratePerSec: 0, maxInFlight: cap, breakerThreshold: 0, breakerCooldownMs: 10_000, retryAfterMaxMs: 30_000 };
      const h = harness({ concurrency, startBatch: configured, dueAt: Array.from({ length: 300 }, (_, i) => i * 2), guarded: limits });
      const run = h.batch(600).run();
      let mostReady = 0;
      for (let t = 1; t <= 600; t++) {
        await h.runUntil(t);
        mostReady = Math.max(mostReady, h.state.readyAttempts);
        expect(h.real!.state().sent).toBeLessThanOrEqual(cap);
        expect(h.real!.state().inFlight).toBeLessThanOrEqual(cap + ahead(startBatch));
      }
      expect(await run).toBe('deadline');
      expect(h.calls.max).toBe(cap); // every permitted call out, never more
      expect(mostReady).toBeGreaterThan(startBatch); // the queue forms under the cap, as without a guard
      const after = h.events.slice(h.events.findIndex((e) => e.kind === 'end'));
      const sends = after.filter((e) => e.kind === 'send').length;
      const starts = after.filter((e) => e.kind === 'start').length;
      expect(starts).toBeLessThanOrEqual(Math.ceil(sends / (startBatch + 1))); // not one START per freed slot
      expect(h.sent()).toHaveLength(Math.floor(600 / CALL_MS) * cap); // every permitted slot busy all along
    });

  it('a drain while calls are out under a provider guard: the ready attempts\' permits go back unsent, the calls still count as sent', async () => {
    const limits: GuardSettings = { ratePerSec: 0, maxInFlight: 2, breakerThreshold: 0, breakerCooldownMs: 10_000, retryAfterMaxMs: 30_000 };
    const h = harness({ concurrency: 2, startBatch: 2, dueAt: [0, 0, 0, 0, 0, 0], guarded: limits });
    const batch = h.batch(1_000);
    const run = batch.run();
    await h.runUntil(10); // i00, i01 sent; i02…i05 ready
    expect([h.real!.state().sent, h.real!.state().inFlight]).toEqual([2, 6]);
    h.ctl.stop = 'draining';
    batch.interrupt(); // as the executor's drain does
    await h.runUntil(20); // the batch closes: its ready attempts aborted, the two calls still out
    expect(h.aborted()).toEqual(['i02', 'i03', 'i04', 'i05']);
    expect([h.real!.state().sent, h.real!.state().inFlight]).toEqual([2, 2]);
    await h.runUntil(300);
    expect(await run).toBe('draining');
    expect([h.real!.state().sent, h.real!.state().inFlight]).toEqual([0, 0]);
  });

  it('a send the process\'s share refuses waits; the guard\'s call-back (another partition\'s call ended) wakes the batch to send it', () => {
    const h = harness({ concurrency: 2, startBatch: 1, dueAt: [] });
    let onFree: (() => void) | undefined;
    let open = false;
    const guard = { holdNow: () => null, release: () => {}, beginCall: (cb?: () => void) => (open || ((onFree = cb), false)) } as unknown as ProviderPermits;
    const sends: string[] = [];
    const send = async (_t: LeaseToken, a: StartedAttempt) => void sends.push(a.intentId);
    h.state.queueReady(TOKEN, { intentId: 'w1' } as StartedAttempt, 0);
    expect(h.state.sendReady(send, guard)).toBe(0);
    let woken = 0;
    h.state.watchCalls(() => { woken++; h.state.sendReady(send, guard); });
    open = true;
    onFree!();
    expect([woken, sends]).toEqual([1, ['w1']]);
  });

  it('a rate limit paces the calls: nothing is started ahead of a free slot (its tokens are taken at the START)', async () => {
    const limits: GuardSettings = { ratePerSec: 1_000, maxInFlight: 0, breakerThreshold: 0, breakerCooldownMs: 10_000, retryAfterMaxMs: 30_000 };
    const h = harness({ concurrency: 4, startBatch: 1, dueAt: Array.from({ length: 60 }, () => 0), guarded: limits });
    const run = h.batch(400).run();
    let mostReady = 0;
    for (let t = 1; t <= 400; t++) {
      await h.runUntil(t);
      mostReady = Math.max(mostReady, h.state.readyAttempts);
    }
    expect(await run).toBe('deadline');
    expect(mostReady).toBe(0);
    expect(h.sent().length).toBeGreaterThan(20);
  });

  it('a handover request read while the tick takes the bridge over (next_tick): no ready attempt is sent after it', async () => {
    const h = harness({ concurrency: 1, startBatch: 2, dueAt: [0, 0, 0] });
    const run = h.batch(10_000).run();
    await h.runUntil(10); // i00 in flight; i01, i02 ready
    expect([h.sent(), h.state.readyAttempts]).toEqual([['i00'], 2]);
    h.ctl.handover = true;
    h.ctl.stop = 'next_tick';
    await h.runUntil(200);
    await run;
    expect(h.sent()).toEqual(['i00']);
  });

  it('a drain requested once the batch ran into its deadline: a START that returns then sends nothing', async () => {
    const h = harness({ concurrency: 2, startBatch: 2, dueAt: [0, 0, 0, 0, 0, 0] });
    const run = h.batch(1).run(); // the first START (2 ms) returns after the deadline
    await flush();
    h.clock.advance(1);
    await flush(); // stop: 'deadline'; the START is still out
    h.ctl.stop = 'draining';
    await h.runUntil(10);
    expect(await run).toBe('deadline');
    expect(h.sent()).toEqual([]);
    expect(h.state.readyAttempts).toBe(6); // carried: the executor's drain aborts them
  });
});
