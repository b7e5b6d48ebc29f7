// Review findings (executor / lease / provider interplay) as failing tests. Each test names the bug it shows.
// Instances are built by hand (not startInstances) so a test can wrap the clock, the execution store or the
// provider — the ports the executor receives — to stage a pause or a fault at an exact point.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { LEASE_NAME, submit } from '../support/instances.js';
import { staleWrites } from '../support/fenceChecker.js';
import { buildExecutor as build } from '../support/executorHarness.js';

describe.each(dialects)('review: executor findings: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  useDialectWithProvider(dialect, (fresh, started) => {
    ctx = fresh;
    provider = started;
  });

  const intentRow = async (id: string) =>
    (await ctx.sql<{ status: string; attempt_count: number; last_error: string | null }>(
      'SELECT status, attempt_count, last_error FROM submission_intents WHERE intent_id = $1', [id]))[0]!;

  // FINDING: retryPolicy.aborted() + executor end-of-loop flush. An attempt that was started but never sent
  // (gate failed: local deadline passed during the START round trip) is written as `aborted` and, when it
  // was the last allowed attempt, the intent is marked `failed` — although the provider never saw it.
  // The stop reason is 'deadline' (not 'lease_lost') because deadline() drops leadership first, so the
  // completion is flushed (the DB lease is still valid thanks to the safety margin, so the fence passes).
  it('an attempt aborted before the provider call must not fail the intent (max_attempts = 1)', async () => {
    const inst = await build(ctx, {
      providerUrl: provider.url,
      wrapStore: (s, clock) => ({
        rebuildStart: (g) => s.rebuildStart(g),
        loadScheduled: (a, l) => s.loadScheduled(a, l),
        refreshPage: (c, l, g) => s.refreshPage(c, l, g),
        fencedRecoverOrphans: (t) => s.fencedRecoverOrphans(t),
        fencedCompleteAttempts: (t, c) => s.fencedCompleteAttempts(t, c),
        async fencedStartAttempts(t, r) {
          const out = await s.fencedStartAttempts(t, r);
          clock.offset += 10_000; // the process stalls right after START commits (GC pause, CPU starvation)
          return out;
        },
      }),
    });
    const intent = await submit(inst.stores, { once: true }, { maxAttempts: 1 });
    const sum = await inst.executor.tick(1_000);
    expect(sum.role).toBe('leader');
    expect(provider.calls).toHaveLength(0); // never sent
    const row = await intentRow(intent.intentId);
    expect(staleWrites(await ctx.auditLog(), await inst.stores.lease.listEvents(LEASE_NAME))).toEqual([]);
    // BUG: row.status is 'failed' ("aborted before the provider call ...; attempts exhausted").
    expect(row.status, `last_error=${row.last_error}`).not.toBe('failed');
  });

  // FINDING: executor.ts:213/223-225 — once no slot is free (concurrency saturated) with due intents left,
  // untilDue <= 0 so waitMs = 1: the loop spun with 1 ms sleeps until the tick budget ended, instead of sleeping
  // until a refresh or a completion.
  it('concurrency saturated with a backlog: the loop must not spin every millisecond until the budget ends', async () => {
    const inst = await build(ctx, { providerUrl: provider.url, concurrency: 2 });
    provider.answer = () => ({ status: 200, delayMs: 3_000 }); // both slots stay taken for the whole tick
    for (let k = 0; k < 10; k++) await submit(inst.stores, { k });
    const first = await inst.executor.tick(50); // acquire + rebuild
    let iterations = 0;
    const orig = inst.lease.renewDue.bind(inst.lease);
    inst.lease.renewDue = () => { iterations++; return orig(); }; // called once per loop iteration
    const t0 = Date.now();
    const sum = await inst.executor.tick(1_500);
    // Two calls take the two slots; a tick with no next occurrence starts nothing beyond the free slots (none waits
    // ready, to be aborted unsent at its end), and only the two calls are sent.
    expect(first.started + sum.started).toBe(2);
    expect(provider.calls.length).toBe(2);
    // With a 100 ms refresh interval a sane loop wakes ~15 times in 1.5 s (+ a few for completions).
    // BUG: several hundred iterations (one per ~1-2 ms) once the slots were taken.
    expect(iterations, `${iterations} loop iterations in ${Date.now() - t0} ms`).toBeLessThan(100);
  });

  // FINDING: executor.ts:199/203 vs 233-236. The loop's own awaits (refresher.refresh(), the reconcile rebuild)
  // are not covered by the "await starting / inFlight / flushing" epilogue: when a refresh query fails (the
  // spec's SQL-error path), loop() throws straight out, runTick catches, drops leadership and the tick resolves
  // while provider calls, a background fenced START and a background fenced COMPLETE are still running. The
  // file header promises "the tick awaits everything it began, also when it stops on an error"; the Functions
  // timer relies on it (the invocation returns with work still running, and `running` is cleared so a new tick
  // may start beside the leftovers). Their completions are silently dropped (orphans until the next epoch).
  it('a refresh SQL error mid-batch: the tick must not resolve before its in-flight provider calls end', async () => {
    provider.answer = () => ({ status: 200, delayMs: 800 });
    let outstanding = 0;
    let failRefresh = false;
    const inst = await build(ctx, {
      providerUrl: provider.url,
      wrapProvider: (p) => ({
        async submit(req, bounds) {
          outstanding++;
          try {
            return await p.submit(req, bounds);
          } finally {
            outstanding--;
          }
        },
      }),
      wrapStore: (s) => ({
        rebuildStart: (g) => s.rebuildStart(g),
        loadScheduled: (a, l) => s.loadScheduled(a, l),
        async refreshPage(c, l, g) {
          if (failRefresh) throw new Error('simulated: connection reset during refresh');
          return s.refreshPage(c, l, g);
        },
        fencedRecoverOrphans: (t) => s.fencedRecoverOrphans(t),
        fencedCompleteAttempts: (t, c) => s.fencedCompleteAttempts(t, c),
        fencedStartAttempts: (t, r) => s.fencedStartAttempts(t, r),
      }),
    });
    await submit(inst.stores, { slow: true });
    const tick = inst.executor.tick(2_000);
    await provider.waitFor((c) => c.length === 1);
    failRefresh = true; // the next refresh (≤ 100 ms) fails while the provider call is in flight
    const sum = await tick;
    expect(sum.stopReason).toBe('sql_error');
    // BUG: outstanding is 1 — the tick returned with the provider call still running.
    expect(outstanding, 'provider calls still in flight when tick() resolved').toBe(0);
    await new Promise((r) => setTimeout(r, 1_000));
  });
});
