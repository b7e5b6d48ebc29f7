// The two places a start and a send rest on fresh control flags (ExecutorOps.freshControl: a control read answered
// within one refresh interval of its beginning), judged with stub ops on a fake clock:
//  - the batch (src/executor/batch.ts) issues no START while freshControl is false, counts each held START, and
//    waits like an idle iteration until the next refresh step instead of reading again at once (no 1 ms spin); a
//    START with fresh flags is issued at once;
//  - the provider call's gate (src/executor/providerCall.ts) does not call the provider when freshControl is false
//    or throws: the attempt is recorded `aborted` with the reason, one guard permit goes back, the hold is counted.
import { describe, expect, it, vi } from 'vitest';
import { FakeClock } from '../../src/lease/clock.js';
import type { LeaseManager } from '../../src/lease/leaseManager.js';
import { silentLogger } from '../../src/observability/logger.js';
import { Batch, type BatchDeps } from '../../src/executor/batch.js';
import { ExecutionState } from '../../src/executor/executionState.js';
import { NO_OPS, type ExecutorOps } from '../../src/executor/executorOps.js';
import { LeaderFaults } from '../../src/executor/leaderFaults.js';
import { callProvider, type ProviderCallDeps } from '../../src/executor/providerCall.js';
import { StallWatch } from '../../src/executor/stallWatch.js';
import { emptySummary, type ExecutorSettings } from '../../src/executor/tickSummary.js';
import type { ProviderPermits } from '../../src/provider/partitionPermits.js';
import type { Provider } from '../../src/provider/provider.js';
import { Schedule } from '../../src/schedule/schedule.js';
import type { ScheduleRefresher } from '../../src/schedule/refresher.js';
import type { AttemptCompletion, ExecutionStore, StartedAttempt } from '../../src/store/intentPorts.js';
import type { LeaseToken } from '../../src/store/ports.js';

const INTERVAL_MS = 100;
const TOKEN: LeaseToken = { leaseName: 'p0', holderId: 'h', leaseEpoch: 3 };
const DB_NOW_MS = 1_000;
const flush = () => new Promise((r) => setImmediate(r));

/** Ops whose freshControl answers `fresh` (or throws), recording the holds counted. */
function stubOps(fresh: () => Promise<boolean>) {
  const held: string[] = [];
  const freshControl = vi.fn(fresh);
  const ops: ExecutorOps = { ...NO_OPS, freshControl, staleControlHeld: (step) => void held.push(step) };
  return { ops, freshControl, held };
}

/** A leading batch with one intent due at once (database time), on a fake clock; the START statement is a spy. */
function batchWith(ops: ExecutorOps) {
  const clock = new FakeClock();
  const lease = {
    holderId: 'h', ensureEpoch: () => true, remainingMs: () => 60_000, renewDue: () => false, renewDueInMs: () => Infinity,
    holdReleaseWhile: () => {}, drop: () => {},
  } as unknown as LeaseManager;
  const schedule = new Schedule();
  schedule.apply({ intentId: 'i1', status: 'scheduled', nextAttemptAt: new Date(0), attemptCount: 0, maxAttempts: 5, version: 'v1' });
  const refresher = {
    schedule, dbNowMs: () => DB_NOW_MS, reconciling: false, lastReadAt: null,
    refresh: async () => ({ rows: 0, pages: 1, applied: 0 }), refreshTail: async () => ({ rows: 0, pages: 1, applied: 0 }),
  } as unknown as ScheduleRefresher;
  const fencedStartAttempts = vi.fn(async () => ({ kind: 'ok' as const, value: [] })); // skipped: nothing to call
  const store = { fencedStartAttempts } as unknown as ExecutionStore;
  const settings: ExecutorSettings = {
    tickBudgetMs: 1_000, concurrency: 4, providerTimeoutMs: 1_000, reconcileIntervalMs: 3_600_000,
    refresh: { intervalMs: INTERVAL_MS, pageSize: 100, commitGraceMs: 500 }, startBatch: 1, completionBatch: 2, minLeaderWorkMs: 100,
  };
  const state = new ExecutionState(lease, store, refresher, settings, silentLogger, ops);
  state.loaded(clock.nowMs()); // the next interval refresh is one interval away
  const deps: BatchDeps = {
    lease, store, settings, clock, ops, refresher, guard: null, state,
    calls: {} as ProviderCallDeps, faults: new LeaderFaults(lease, silentLogger),
  };
  const sum = emptySummary('h');
  const batch = new Batch(deps, { token: TOKEN, budgetEnd: 1_000, sum, stopRequested: () => null, renewsUntilMs: Infinity, startsAhead: false });
  return { clock, batch, fencedStartAttempts, sum };
}

/** Run the batch to its budget's end, 1 ms of fake time at a time. */
async function runToEnd(clock: FakeClock, run: Promise<string>): Promise<string> {
  while (clock.nowMs() <= 1_000) {
    await flush();
    clock.advance(1);
  }
  return run;
}

describe('batch: a START rests on fresh control flags', () => {
  it('freshControl false: no START is issued, each held START is counted, and the loop idles until the next refresh step', async () => {
    const { ops, freshControl, held } = stubOps(async () => false);
    const { clock, batch, fencedStartAttempts } = batchWith(ops);
    expect(await runToEnd(clock, batch.run())).toBe('deadline');
    expect(fencedStartAttempts).not.toHaveBeenCalled();
    expect(freshControl.mock.calls.length).toBeGreaterThan(0);
    expect(held).toEqual(freshControl.mock.calls.map(() => 'start'));
    // One second of 100 ms refresh steps: the control read is asked about once per step (at most two iterations
    // each: the step's and a wake), not once per millisecond.
    expect(freshControl.mock.calls.length).toBeLessThanOrEqual(2 * (1_000 / INTERVAL_MS) + 2);
  });

  it('freshControl true: the START is issued at once (no idle wait first)', async () => {
    const { ops, held } = stubOps(async () => true);
    const { clock, batch, fencedStartAttempts } = batchWith(ops);
    const run = batch.run();
    await flush();
    expect(clock.nowMs()).toBe(0);
    expect(fencedStartAttempts).toHaveBeenCalledTimes(1);
    expect(held).toEqual([]);
    expect(await runToEnd(clock, run)).toBe('deadline');
  });
});

/** A provider call's deps with stub ops; the provider and the guard are spies. */
function callWith(ops: ExecutorOps) {
  const clock = new FakeClock();
  const submit = vi.fn(async () => ({ kind: 'success' as const, httpStatus: 200 }));
  const guard = { release: vi.fn(), onResult: vi.fn(), onInconclusive: vi.fn(), holdNow: vi.fn(() => null) };
  const recorded: AttemptCompletion[] = [];
  const deps: ProviderCallDeps = {
    provider: { submit } as unknown as Provider, settings: { providerTimeoutMs: 1_000 }, clock, random: () => 0.5,
    lease: { remainingMs: () => 60_000 }, guard: guard as unknown as ProviderPermits, stalls: new StallWatch(clock), ops,
    state: { record: (c) => void recorded.push(c) },
  };
  return { deps, submit, guard, recorded };
}

const ATTEMPT: StartedAttempt = {
  intentId: 'i1', attemptNo: 1, maxAttempts: 5, abortedBefore: 0, version: 'v1',
  contract: { provider: { url: null }, payload: { n: 1 }, retry: { maxAttempts: 5, baseDelayMs: 100, maxDelayMs: 1_000 } },
};

describe('provider call: a send rests on fresh control flags', () => {
  it.each([
    { name: 'freshControl false', fresh: async () => false, reason: 'no control read answered within one refresh interval' },
    { name: 'freshControl throws', fresh: async (): Promise<boolean> => { throw new Error('connection reset'); }, reason: 'control read failed' },
  ])('$name: aborted, one permit back, the provider not called', async ({ fresh, reason }) => {
    const { ops, held } = stubOps(fresh);
    const { deps, submit, guard, recorded } = callWith(ops);
    await callProvider(deps, TOKEN, ATTEMPT, () => true, () => null, 7);
    expect(submit).not.toHaveBeenCalled();
    expect(guard.release).toHaveBeenCalledTimes(1);
    expect(guard.release).toHaveBeenCalledWith(1, 7, true); // given back with its grant time, as begun
    expect(recorded).toHaveLength(1);
    expect(recorded[0]).toMatchObject({ intentId: 'i1', attemptNo: 1, outcome: 'aborted', attemptEpoch: TOKEN.leaseEpoch,
      error: `aborted before the provider call: ${reason}` });
    expect(held).toEqual(['send']);
  });

  it('freshControl true: the provider is called, no permit goes back unused', async () => {
    const { ops, held } = stubOps(async () => true);
    const { deps, submit, guard, recorded } = callWith(ops);
    await callProvider(deps, TOKEN, ATTEMPT, () => true, () => null, 7);
    expect(submit).toHaveBeenCalledTimes(1);
    expect(guard.release).not.toHaveBeenCalled();
    expect(guard.holdNow).toHaveBeenCalledWith(7); // a hold begun since the permit's grant is asked for after the read
    expect(recorded.map((c) => c.outcome)).toEqual(['succeeded']);
    expect(held).toEqual([]);
  });
});

describe('provider call: a timeout the lease cut short says nothing about the provider', () => {
  it.each([
    { name: 'the lease left 150 ms of a 1 000 ms timeout', leaseLeftMs: 150, breaker: false },
    { name: 'the whole timeout', leaseLeftMs: 60_000, breaker: true },
  ])('$name: counted for the breaker: $breaker', async ({ leaseLeftMs, breaker }) => {
    const { ops } = stubOps(async () => true);
    const { deps, guard, recorded } = callWith(ops);
    const clock = deps.clock as FakeClock;
    deps.lease = { remainingMs: () => leaseLeftMs };
    deps.stalls = { watch: () => () => {}, stalledMs: () => 0 } as unknown as StallWatch; // no stall of ours: the fake clock jumps
    deps.provider = { submit: async (_r: unknown, o: { timeoutMs: number }) => {
      clock.advance(o.timeoutMs - 3); // its timer started from the loop's cached time, a few ms before the call's own
      return { kind: 'retryable' as const, httpStatus: null, error: `timeout after ${o.timeoutMs} ms`, retryAfterMs: null };
    } } as unknown as Provider;
    await callProvider(deps, TOKEN, ATTEMPT, () => true, () => null, 7);
    expect(recorded.map((c) => c.outcome)).toEqual(['retryable_error']); // the attempt was sent: it counts
    expect([guard.onResult.mock.calls.length, guard.onInconclusive.mock.calls.length]).toEqual(breaker ? [1, 0] : [0, 1]);
  });
});
