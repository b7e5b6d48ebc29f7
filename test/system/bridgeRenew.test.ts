// The bridge between ticks renews when due until the timer's next occurrence; the next tick renews beside the
// hand-over. A tick used to wait for the bridge to hand over before renewing, so a bridge write whose reply was held
// (a lost reply waits for the client deadline) held back the renew: the local deadline passed, the lease expired,
// and the next leader sent a 2xx again (campaign on 544d11c, every-instance layout: 18 re-sends after a 2xx).
// A bridge that never renewed left a renew gap of a whole tick period instead of LEASE_RENEW_INTERVAL_MS, so a
// stalled write (a lost reply) ran into the local deadline sooner than the renew interval promises.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { LEASE_NAME, submit } from '../support/instances.js';
import { buildExecutor, stalePairs, type Built } from '../support/executorHarness.js';
import { until } from '../support/replyFaults.js';

const LEASE_MS = 2_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(dialects)('the next tick renews while the bridge is held up: $name', (dialect) => {
  const t = {} as { ctx: DialectContext; provider: RecordingProvider };
  useDialectWithProvider(dialect, (ctx, provider) => {
    t.ctx = ctx;
    t.provider = provider;
  });

  it('a bridge completion whose reply is held for most of a lease costs no renew, no lease and no re-send', async () => {
    let a: Built | null = null;
    const held = { armed: false, count: 0 };
    try {
      a = await buildExecutor(t.ctx, {
        providerUrl: t.provider.url, leaseMs: LEASE_MS, holderId: 'A',
        // Once armed, the bridge's first completion write commits, then its reply is held 1.5 s: more than the
        // renew interval (667 ms), about the local deadline's distance (1.6 s), less than the client deadline.
        wrapStore: (s) => new Proxy(s, {
          get(target, prop, receiver) {
            if (prop !== 'fencedCompleteAttempts') return Reflect.get(target, prop, receiver);
            return async (...args: Parameters<typeof s.fencedCompleteAttempts>) => {
              const out = await target.fencedCompleteAttempts(...args);
              if (!held.armed || held.count > 0) return out;
              held.count++;
              await sleep(1_500); // a slow reply (a lock wait), inside the client deadline: no SQL error, no step-down
              return out;
            };
          },
        }),
      });
      expect((await a.executor.tick(300, 400)).role).toBe('leader'); // leaves a bridge running
      held.armed = true;
      const id = (await submit(a.stores, { p: 1 })).intentId;
      await until(() => held.count === 1, 10_000, 'the bridge\'s completion write held');
      // Timer ticks every 400 ms, as the next occurrences would come, for longer than a lease.
      const sums = [];
      for (let i = 0; i < 7; i++) {
        sums.push(await a.executor.tick(300, 400));
        await sleep(100);
      }
      const events = (await a.stores.lease.listEvents(LEASE_NAME)).map((e) => `${e.event} ${e.holderId}#${e.leaseEpoch}`);
      // Before: the tick waited for the hand-over (1.6 s) before renewing; the local deadline passed meanwhile.
      expect(sums.map((s) => `${s.role}#${s.leaseEpoch ?? '-'}`), events.join(', ')).toEqual(Array(7).fill('leader#1'));
      expect(sums.some((s) => s.leaseLost)).toBe(false);
      expect(t.provider.calls.filter((c) => c.intentId === id).map((c) => `${c.attemptNo}@${c.leaseEpoch}`)).toEqual(['1@1']);
      expect(await stalePairs(t.ctx, a)).toEqual([]);
    } finally {
      await a?.executor.drain(a.clock.nowMs() + 3_000);
      await a?.lease.release();
      await a?.stores.close();
    }
  }, 45_000);

  it('the bridge renews every renew interval until the next occurrence, then stops renewing and steps down at its deadline', async () => {
    // Judged on the executor's own clock (the harness's, recorded), not by how punctually a loaded machine's timers
    // fire: the bridge never plans an idle wait past a renew that is due, renews no more once its horizon passed, and
    // steps down at the local deadline of its last renew, which precedes the row's expiry.
    const RENEW_MS = Math.floor(LEASE_MS / 3); // the harness's renew interval
    const NEXT_TICK_MS = 2_000;
    const sends: number[] = []; // successful acquires and renews, when sent (the lease counts from the send)
    const stores = await t.ctx.openStores({ poolMax: 4 });
    const lease = stores.lease;
    let a: Built | null = null;
    const now = () => a!.clock.nowMs();
    try {
      a = await buildExecutor(t.ctx, {
        providerUrl: t.provider.url, leaseMs: LEASE_MS, holderId: 'A',
        refreshMs: 10_000, // nothing else wakes an idle bridge: only a renew that is due
        stores: { ...stores, lease: new Proxy(lease, {
          get(target, prop, receiver) {
            if (prop !== 'renew' && prop !== 'tryAcquire') return Reflect.get(target, prop, receiver);
            return async (...args: unknown[]) => {
              const sentAt = now();
              const out = await (Reflect.get(target, prop, receiver) as (...x: unknown[]) => Promise<unknown>).apply(target, args);
              if (out) sends.push(sentAt);
              return out;
            };
          },
        }) },
      });
      // The executor's idle waits (an abort signal marks the lease's own deadline timer and the hand-over poll: not
      // waits for work), and the tick's first reading: it counts the next occurrence from when it was called.
      const sleeps: { at: number; ms: number; woke: number }[] = [];
      const clock = a.clock;
      const [sleep0, now0] = [clock.sleep.bind(clock), clock.nowMs.bind(clock)];
      clock.sleep = (ms, signal) => {
        if (signal) return sleep0(ms, signal);
        const w = { at: now0(), ms, woke: Number.POSITIVE_INFINITY };
        sleeps.push(w);
        return sleep0(ms).finally(() => (w.woke = now0()));
      };
      let calledAt: number | null = null;
      clock.nowMs = () => {
        const t = now0();
        calledAt ??= t;
        return t;
      };
      const ticking = a.executor.tick(200, NEXT_TICK_MS);
      clock.nowMs = now0;
      expect(await ticking).toMatchObject({ role: 'leader', stopReason: 'deadline' });
      const tickEnded = now();
      const horizon = calledAt! + NEXT_TICK_MS;
      let deadline: number | null = null;
      await until(() => {
        deadline = a!.lease.deadlineMs() ?? deadline;
        return a!.lease.requireLeader() === null;
      }, NEXT_TICK_MS + LEASE_MS + 3_000, 'the bridge steps down');
      const steppedDown = now();
      const bridgeRenews = sends.filter((r) => r > tickEnded);
      const at = (ms: number) => Math.round(ms - calledAt!);
      const shown = `renews at ${bridgeRenews.map(at).join(', ')} ms; the tick ended at ${at(tickEnded)} ms, the horizon ${at(horizon)} ms`;
      // Renewed when due up to the next occurrence: every idle wait begun before the horizon ends by the renew due
      // then (the last send + the renew interval; +1: a wait is at least 1 ms, also one begun just after the renew
      // came due, its check a moment before).
      const waits = sleeps.filter((w) => w.at >= tickEnded && w.at < horizon);
      expect(waits.length).toBeGreaterThan(0);
      for (const w of waits) {
        const due = Math.max(...sends.filter((x) => x <= w.at)) + RENEW_MS;
        expect(w.at + w.ms, `a wait at ${Math.round(w.at - calledAt!)} ms of ${Math.round(w.ms)} ms, the renew due at ${Math.round(due - calledAt!)} ms`)
          .toBeLessThanOrEqual(Math.max(due, w.at) + 1);
      }
      // … and renewed whenever it came due before the horizon: an idle wait planned to the renew due (within 5 ms: the
      // lease counts from its own send time, a moment before the store call recorded here) that woke before the
      // horizon (50 ms: the loop's step from the wake to its check) is followed by a renew. Which waits those are
      // depends on how long a loaded machine's tick ran and how late its timers fired; the rule holds for each.
      const dueWakes = waits.filter((w) => w.at + w.ms >= Math.max(...sends.filter((x) => x <= w.at)) + RENEW_MS - 5 && w.woke + 50 < horizon);
      for (const w of dueWakes) expect(sends.some((x) => x >= w.woke), `a wait woke at ${at(w.woke)} ms with a renew due; ${shown}`).toBe(true);
      console.log(`[bridgeRenew ${t.ctx.name}] ${shown}; ${dueWakes.length} wake(s) with a renew due before the horizon`);
      // … and not after it: no renew follows an idle wait begun past the horizon.
      for (const r of bridgeRenews) {
        const before = sleeps.filter((w) => w.at < r).at(-1);
        expect(before && before.at < horizon, `a renew at ${Math.round(r - calledAt!)} ms after a wait begun at ${before && Math.round(before.at - calledAt!)} ms`).toBe(true);
      }
      // A leader whose ticks stop steps down at the local deadline of its last renew (sent + lease − margin), so
      // before the row (extended from the statement's database time, later than the send) expires; not sooner.
      expect(deadline).not.toBeNull();
      expect(deadline!).toBeLessThan(Math.max(...sends) + LEASE_MS);
      expect(steppedDown).toBeGreaterThanOrEqual(deadline!);
      expect(steppedDown).toBeGreaterThan(horizon);
    } finally {
      await a?.executor.drain(a.clock.nowMs() + 3_000);
      await a?.lease.release();
      await stores.close();
    }
  }, 45_000);
});
