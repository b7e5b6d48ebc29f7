// A drain's reaction time holds whatever a control read costs: a start rests on a read begun within one refresh
// interval of the start, not of the read's beginning. A read answered an interval or more after it began (a stall of
// the process or a late reply: its snapshot predates a drain recorded meanwhile) is not fresh, and the leader reads
// again before starting. Staged on the real executor and ExecutionOps: the refresh that loads the intent arms two
// late control reads — the refresh's own (stale flags for the start gate), then the gate's, whose snapshot is taken
// just before the drain request is recorded. Without the second look the gate started the intent on that snapshot,
// after the request (the campaign's `drain` rule: a start under the drained epoch past the reaction time).
// A START issued on fresh flags that reaches the database only after a drain or a pause was answered (it waited for a
// pool connection) is held by the START statement itself: nothing starts, and no attempt is used.
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { waitUntil } from '../support/apps.js';
import { LEASE_NAME, submit } from '../support/instances.js';
import { buildExecutor } from '../support/executorHarness.js';
import { delegateExecution } from '../support/wrappedApp.js';
import { ExecutionOps } from '../../src/executor/executorOps.js';
import { systemClock } from '../../src/lease/clock.js';
import { silentLogger } from '../../src/observability/logger.js';
import { clusterControlName } from '../../src/limits.js';
import type { OpsStore } from '../../src/store/opsPorts.js';

const INTERVAL_MS = 200;

describe.each(dialects)('drain gate: no start on a control read answered an interval after it began: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  useDialectWithProvider(dialect, (fresh, started) => {
    ctx = fresh;
    provider = started;
  });

  it('the drain recorded behind a late read\'s snapshot holds the start; the leader hands over', async () => {
    const stores = await ctx.openStores({ poolMax: 4 });
    let target = '';
    let lateReads = 0;
    let requestedAt: number | null = null;
    let refreshes = 0;
    let startsAsked = 0;
    const opsStore = {
      async getExecutionControl(leaseName: string, clusterName: string | null) {
        const c = await stores.ops.getExecutionControl(leaseName, clusterName); // the snapshot it answers
        if (lateReads === 0) return c;
        if (--lateReads === 0) { // the gate's read: the drain is recorded just after its snapshot
          await stores.ops.requestHandover(LEASE_NAME, randomUUID(), 'test', 'drain behind a late read');
          requestedAt = Date.now();
        }
        await new Promise((r) => setTimeout(r, INTERVAL_MS * 1.5)); // answered late: a stall or a slow reply
        return c;
      },
      fencedCompleteHandover: (t: Parameters<OpsStore['fencedCompleteHandover']>[0], id: string) => stores.ops.fencedCompleteHandover(t, id),
    } as unknown as OpsStore;
    const ops = new ExecutionOps(opsStore, LEASE_NAME, clusterControlName(LEASE_NAME), null, silentLogger, systemClock, INTERVAL_MS);
    const inst = await buildExecutor(ctx, {
      providerUrl: provider.url, stores, ops, refreshMs: INTERVAL_MS, leaseMs: 5_000,
      wrapStore: (s) => delegateExecution(s, {
        async refreshPage(cursor, limit, graceMs) {
          const page = await s.refreshPage(cursor, limit, graceMs);
          refreshes++;
          if (target !== '' && lateReads === 0 && requestedAt === null && page.rows.some((r) => r.intentId === target)) lateReads = 2;
          return page;
        },
        fencedStartAttempts(token, requests) {
          if (requests.some((r) => r.intentId === target)) startsAsked++;
          return s.fencedStartAttempts(token, requests);
        },
      }),
    });
    const tick = inst.executor.tick(4_000);
    await waitUntil('the leader refreshes', () => refreshes > 0, 10_000);
    target = randomUUID(); // known before its row commits: the refresh that loads it arms the late reads
    await submit(inst.stores, { n: 1 }, { intentId: target }); // due now; the next interval refresh loads it
    const sum = await tick;

    expect(requestedAt).not.toBeNull();
    expect(startsAsked).toBe(0); // the leader's own gate held it (the START statement's hold would hide a late start)
    expect(sum.stopReason).toBe('handover');
    expect(provider.calls.filter((c) => c.intentId === target)).toEqual([]);
    expect((await ctx.attemptRows()).filter((a) => a.intentId === target)).toEqual([]); // never started
    const [request] = await stores.ops.listHandovers(LEASE_NAME, 1);
    expect(request!.status).toBe('completed');
    await stores.close();
  });
});

type Hold = 'drain' | 'pause';
/** Long enough that a leader which did not read its flags at once after a held START would send it again many times. */
const HOLD_INTERVAL_MS = 1_000;

describe.each(dialects)('start hold: a START that reaches the database after the answer starts nothing: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  useDialectWithProvider(dialect, (fresh, started) => {
    ctx = fresh;
    provider = started;
  });

  it.each<Hold>(['drain', 'pause'])('%s answered while the START waited', async (hold) => {
    const stores = await ctx.openStores({ poolMax: 4 });
    const ops = new ExecutionOps(stores.ops, LEASE_NAME, clusterControlName(LEASE_NAME), null, silentLogger, systemClock, HOLD_INTERVAL_MS);
    let target = '';
    let answered = false;
    let refreshes = 0;
    let startsAsked = 0;
    const inst = await buildExecutor(ctx, {
      providerUrl: provider.url, stores, ops, refreshMs: HOLD_INTERVAL_MS, leaseMs: 5_000,
      wrapStore: (s) => delegateExecution(s, {
        async refreshPage(cursor, limit, graceMs) {
          refreshes++;
          return s.refreshPage(cursor, limit, graceMs);
        },
        async fencedStartAttempts(token, requests) {
          if (requests.some((r) => r.intentId === target)) startsAsked++;
          if (!answered && requests.some((r) => r.intentId === target)) {
            // Issued on fresh flags; the operator's request is answered before the START reaches the database.
            if (hold === 'drain') await stores.ops.requestHandover(LEASE_NAME, randomUUID(), 'test', 'drain while a START waits');
            else await stores.ops.setPaused(clusterControlName(LEASE_NAME), true, 'test', 'pause while a START waits');
            answered = true;
          }
          return s.fencedStartAttempts(token, requests);
        },
      }),
    });
    const attempts = async () => (await ctx.attemptRows()).filter((a) => a.intentId === target);
    let tick = inst.executor.tick(4_000);
    await waitUntil('the leader refreshes', () => refreshes > 0, 10_000);
    target = randomUUID();
    await submit(inst.stores, { n: 1 }, { intentId: target });
    await waitUntil('the START met the answer', () => answered, 10_000);
    if (hold === 'drain') {
      const sum = await tick;
      expect(sum.stopReason).toBe('handover');
      expect(await attempts()).toEqual([]); // never started under the drained epoch
      expect(provider.calls.filter((c) => c.intentId === target)).toEqual([]);
      const [request] = await stores.ops.listHandovers(LEASE_NAME, 1);
      expect(request!.status).toBe('completed');
      expect(startsAsked).toBe(1); // held once: the leader read its flags at once and drained (no START again)
    } else {
      await waitUntil('the leader read the pause', () => ops.paused === true, 10_000);
      expect(await attempts()).toEqual([]); // held: no attempt row, none aborted
      expect(startsAsked).toBe(1); // the flags read at once after the held START: nothing sent again while paused
      await stores.ops.setPaused(clusterControlName(LEASE_NAME), false, 'test', null);
      // Started once resumed (a later tick if this one ran out first, the machine being slow).
      for (let more = 0; more < 3 && !(await attempts()).some((a) => a.outcome === 'succeeded'); more++) {
        await tick;
        tick = inst.executor.tick(4_000);
      }
      await tick;
      // Its first attempt: the held START used none (no aborted attempt before it); one START since the resume.
      expect((await attempts()).map((a) => [a.attemptNo, a.outcome])).toEqual([[1, 'succeeded']]);
      expect(startsAsked).toBe(2);
    }
    await stores.close();
  });
});
