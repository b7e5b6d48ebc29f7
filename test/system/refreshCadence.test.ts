// Issue 22 item 1: a leader keeps its refresh cadence and keeps executing from tick to tick, whatever ends a tick.
// With DUE_NOTICES=off (SQL Server's situation), an intent submitted through a follower is started by the first
// refresh that began after its commit (the interval's bound, in the leader's own record) though no further tick
// runs: after an invocation that ends (a late or skipped next occurrence), and when EXECUTOR_MAX_ATTEMPTS_PER_TICK
// (now ignored) would have ended the tick, and when a reconcile is still reading pages at the end of a tick.
// Before, nothing refreshed between ticks: these intents waited for the next occurrence (here: forever). A handover
// requested between ticks is read by the leader at its next refresh; it releases, and execution resumes at the
// next tick elsewhere.
import { afterEach, describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { TEST_LEASE, request, startApps, submitVia, testConfig } from '../support/apps.js';
import { releaseLeaseHandler } from '../../src/http/ops.js';
import type { App } from '../../src/app.js';
import { submit } from '../support/instances.js';
import { buildExecutor } from '../support/executorHarness.js';
import { until, withReplyFaults } from '../support/replyFaults.js';
import { LEAD_CAP_SHARE } from '../../src/schedule/cadence.js';
import { dbTextToDate, describePickup, MAX_READS_BEFORE_START, readsBetween, recordRefreshReads } from '../support/pickup.js';
import { createLogger } from '../../src/observability/logger.js';

/** testConfig's refresh interval. */
const REFRESH_MS = 100;

describe.each(dialects)('refresh cadence between ticks: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  let apps: App[] = [];
  /** The apps' warnings and errors and the bridge's end (why a leader stopped executing between ticks). */
  let stops: Record<string, unknown>[] = [];
  const logger = createLogger('info', { write: (line: string) => {
    const { level, event, stop_reason, sql_error, reason } = JSON.parse(line) as Record<string, unknown>;
    if ((level as number) >= 40 || event === 'bridge_ended') stops.push({ event, stop_reason, sql_error, reason });
  } });
  useDialectWithProvider(dialect, (fresh, started) => {
    ctx = fresh;
    provider = started;
  });
  afterEach(async () => { // (before the fixture's: hooks run as a stack)
    for (const a of apps) await a.close();
    apps = [];
    stops = [];
  });

  /** A leader (first app, after one timer tick: acquired and rebuilt) and a follower to submit through. No tick follows
   *  the first, so the leader leads until its lease's local deadline, and what is committed after it is never sent
   *  (the step-down when ticks stop coming is the design). That deadline is a liveness bound, not what these tests
   *  judge: a 60-s lease (55 s of leading) outlasts every step and wait of a test, however loaded the machine. With
   *  the 10-s lease before (7.5 s), a burst committed past it was sent in part and the 20-s wait for the rest could
   *  only run out (a way to the 10 of 20 once seen on postgres under load; a step-down on an SQL error is the other,
   *  and whileLeading's message tells them apart). */
  async function cluster(env: Record<string, string> = {}) {
    apps = await startApps(ctx, 2, testConfig(provider.url, { DUE_NOTICES: 'off', LEASE_DURATION_MS: '60000', ...env }), logger);
    const [leader, follower] = apps as [App, App];
    const first = await leader.executor.tick(300, 400); // as the timer calls it: the next occurrence 400 ms away
    expect(first).toMatchObject({ role: 'leader', stopReason: 'deadline' });
    return { leader, follower, epoch: first.leaseEpoch! };
  }

  /** `wait`, failing with whether the leader still leads and why it stopped executing (if it did). */
  async function whileLeading(leader: App, wait: Promise<void>): Promise<void> {
    await wait.catch((e: Error) => {
      throw new Error(`${e.message}; the leader leads: ${leader.lease.requireLeader() !== null}; stops: ${JSON.stringify(stops)}`);
    });
  }

  const sent = (ids: string[]) => (calls: { intentId: string }[]) => ids.every((id) => calls.some((c) => c.intentId === id));
  /** Sent, and started by the first refresh read after its commit (test/support/pickup.ts): the interval's bound in
   *  the leader's own terms. The wait is only a liveness guard. */
  async function expectPickedUp(reads: Date[], id: string, committedBy: Date) {
    await provider.waitFor(sent([id]), 20_000);
    const startedAt = (await ctx.attemptRows()).find((a) => a.intentId === id)!.startedAt;
    const between = readsBetween(reads, committedBy, startedAt);
    expect(between.length, describePickup(id, committedBy, startedAt, between)).toBeLessThanOrEqual(MAX_READS_BEFORE_START);
  }

  it('late or skipped occurrence: with no tick running, a follower-submitted intent is sent within a refresh interval', async () => {
    const { leader, follower } = await cluster();
    const reads = recordRefreshReads(leader.executor.refresher);
    for (let i = 0; i < 3; i++) {
      await new Promise((r) => setTimeout(r, 300)); // the next occurrence has not come (late, or skipped)
      const id = await submitVia(follower, { late: i });
      await expectPickedUp(reads, id, dbTextToDate(await ctx.dbNowText()));
    }
    expect(leader.lease.requireLeader()).not.toBeNull();
    // The work done between ticks is in the next tick's summary (once the last 2xx is written: an arrival at the
    // provider is not yet a completion, and a loaded machine may be between the two).
    await until(() => leader.executor.inFlight.size === 0 && leader.executor.completions.size === 0, 10_000, 'the bridge\'s completions written');
    const next = await leader.executor.tick(100, 200);
    expect(next).toMatchObject({ role: 'leader', started: 3, succeeded: 3 });
    expect(next.refreshes).toBeGreaterThan(0);
    // The leader measured its own pickup overhead (reads, STARTs) and begins each refresh that much early, capped.
    expect(next.refreshLeadMs).toBeGreaterThan(0);
    expect(next.refreshLeadMs).toBeLessThanOrEqual(LEAD_CAP_SHARE * REFRESH_MS);
  });

  it('EXECUTOR_MAX_ATTEMPTS_PER_TICK (ignored now) does not leave the leader idle: a burst past it is sent at once', async () => {
    const { leader, follower, epoch } = await cluster({ EXECUTOR_MAX_ATTEMPTS_PER_TICK: '8' });
    const ids: string[] = [];
    for (let i = 0; i < 20; i++) ids.push(await submitVia(follower, { burst: i }));
    // No tick runs after the first: all 20 sent, by the first tick's leader still leading, means it went on past 8
    // between ticks (the wait is only a liveness guard).
    await whileLeading(leader, provider.waitFor(sent(ids), 20_000));
    expect(new Set(provider.calls.map((c) => c.intentId)).size).toBe(provider.calls.length); // each sent once
    expect(provider.calls.map((c) => c.leaseEpoch)).toEqual(provider.calls.map(() => epoch));
    expect(leader.lease.requireLeader()?.leaseEpoch).toBe(epoch);
  });

  it('the next tick takes over from the bridge: nothing is sent twice, calls in flight are carried', async () => {
    const { leader, follower } = await cluster();
    provider.answer = () => ({ status: 200, delayMs: 400 });
    const ids: string[] = [];
    for (let i = 0; i < 4; i++) ids.push(await submitVia(follower, { carried: i }));
    await provider.waitFor((calls) => calls.length >= 2, 20_000); // started by the bridge
    const next = await leader.executor.tick(800, 900); // takes over while calls are in flight
    expect(next.role).toBe('leader');
    await provider.waitFor(sent(ids), 5_000);
    await leader.executor.drain();
    const attempts = await ctx.attemptRows();
    expect(attempts.map((a) => a.outcome).sort()).toEqual(['succeeded', 'succeeded', 'succeeded', 'succeeded']);
    expect(provider.calls).toHaveLength(4);
  });

  it('a reconcile still reading pages when the tick ends: the leader goes on with it, and executes meanwhile', async () => {
    const PAGE_MS = 400;
    const slow = { on: false };
    const b = await buildExecutor(ctx, { providerUrl: provider.url, reconcileMs: 200, leaseMs: 10_000, wrapStore: (st) => ({
      ...withReplyFaults(st, {}),
      async loadScheduled(a, l) {
        if (slow.on) await new Promise((r) => setTimeout(r, PAGE_MS));
        return st.loadScheduled(a, l);
      },
    }) });
    const future = new Date(Date.now() + 3_600_000);
    for (let i = 0; i < 2_100; i += 100) { // a full load of 3 pages of 1 000; a reconcile of 11 pages (RECONCILE_PAGE_MAX)
      await Promise.all(Array.from({ length: Math.min(100, 2_100 - i) }, (_, k) => submit(b.stores, { k: i + k }, { notBefore: future })));
    }
    expect(await b.executor.tick(300, 400)).toMatchObject({ role: 'leader', rebuilt: true });
    // A loaded machine may need more than one tick for the full load (CI once did): the reconcile begins after it.
    for (let i = 0; i < 20 && b.executor.refresher.rebuilding; i++) await b.executor.tick(300, 400);
    expect(b.executor.refresher.rebuilding).toBe(false);
    slow.on = true;
    expect(await b.executor.tick(500, 600)).toMatchObject({ role: 'leader', stopReason: 'deadline' });
    // A starved runner may end that tick before its reconcile began: ticks go on until one ends with it unfinished.
    for (let i = 0; i < 10 && !b.executor.refresher.reconciling; i++) await b.executor.tick(500, 600);
    expect(b.executor.refresher.reconciling).toBe(true); // the tick ended with the reconcile unfinished
    const reads = recordRefreshReads(b.executor.refresher);
    const id = (await submit(b.stores, { due: true })).intentId;
    await expectPickedUp(reads, id, dbTextToDate(await ctx.dbNowText())); // a refresh waits for one page at most
    await b.executor.drain();
  });

  it('a handover requested while the leader is between ticks: it releases, and the next tick elsewhere executes within a tick + 1 s', async () => {
    const { leader, follower } = await cluster();
    const epoch = leader.lease.requireLeader()!.leaseEpoch;
    const res = await releaseLeaseHandler(follower)(request('POST', '/api/ops/lease/release'));
    expect(res.status).toBe(202);
    // The bridge reads the request at its next refresh (100 ms), finishes what runs and releases the row.
    const t0 = Date.now();
    while (leader.lease.requireLeader() && Date.now() - t0 < 5_000) await new Promise((r) => setTimeout(r, 20));
    expect(leader.lease.requireLeader()).toBeNull();
    const id = await submitVia(leader, { afterHandover: true });
    await new Promise((r) => setTimeout(r, 300)); // the follower's next occurrence
    expect(await follower.executor.tick(300, 400)).toMatchObject({ role: 'leader', leaseEpoch: epoch + 1 });
    await provider.waitFor(sent([id]), 20_000); // a liveness guard: who sent it is the check
    expect(provider.calls.find((c) => c.intentId === id)!.leaseEpoch).toBe(epoch + 1);
    const events = await follower.stores.lease.listEvents(TEST_LEASE);
    expect(events.find((e) => e.event === 'released' && e.leaseEpoch === epoch)).toBeTruthy(); // released, not expired
  });
});
