// A leader's batch (src/executor/batch.ts) on a fake clock, its database and provider logging what they do, for the
// ready-attempt tests: one partition alone, or several partitions of one process sharing a clock and a guard.
import { vi } from 'vitest';
import { FakeClock } from '../../src/lease/clock.js';
import type { LeaseManager } from '../../src/lease/leaseManager.js';
import { silentLogger } from '../../src/observability/logger.js';
import { Batch, type BatchDeps } from '../../src/executor/batch.js';
import { ExecutionState } from '../../src/executor/executionState.js';
import { NO_OPS, type ExecutorOps } from '../../src/executor/executorOps.js';
import { LeaderFaults } from '../../src/executor/leaderFaults.js';
import { StallWatch } from '../../src/executor/stallWatch.js';
import { emptySummary, type ExecutorSettings } from '../../src/executor/tickSummary.js';
import { ProviderGuard } from '../../src/provider/guard.js';
import { partitionPermits, type ProviderPermits } from '../../src/provider/partitionPermits.js';
import type { Provider, ProviderRequest, ProviderResult } from '../../src/provider/provider.js';
import type { GuardSettings } from '../../src/limits.js';
import { Schedule } from '../../src/schedule/schedule.js';
import type { ScheduleRefresher } from '../../src/schedule/refresher.js';
import type { AttemptCompletion, ExecutionStore, StartRequest, StartedAttempt } from '../../src/store/intentPorts.js';
import type { LeaseToken } from '../../src/store/ports.js';

export const TOKEN: LeaseToken = { leaseName: 'p0', holderId: 'h', leaseEpoch: 3 };
export const CALL_MS = 50;
export const START_MS = 2;
/** How far beyond the free slots a START may start (ExecutionState.startRoom). */
export const ahead = (startBatch: number) => 2 * startBatch;
export const flush = () => new Promise((r) => setImmediate(r));
/** Intent i's id (ids sort as their numbers: the schedule breaks ties of due time by id). */
export const id = (i: number) => `i${String(i).padStart(2, '0')}`;

export type Event = { kind: 'start'; n: number } | { kind: 'send'; id: string } | { kind: 'end'; id: string };

export interface Setup {
  concurrency: number;
  startBatch: number;
  /** Intents i0…i(n-1), due at these database times (ms; the database clock is the fake clock). */
  dueAt: number[];
  /** No provider protection (default: a guard that counts permits). */
  noGuard?: boolean;
  /** A real ProviderGuard with these settings (through partitionPermits, no cap of its own). */
  guarded?: GuardSettings;
  /** The answer to intent `id`'s call (default: success). */
  answer?: (id: string) => ProviderResult;
  /** Several partitions of one process: their shared clock, this partition's permits of a shared guard, its lease
   *  token and intent ids (prefix), and calls in flight counted across them. */
  clock?: FakeClock;
  permits?: ProviderPermits;
  token?: LeaseToken;
  prefix?: string;
  calls?: { now: number; max: number };
}

/** A leader's batch deps on a fake clock: the START and the provider log what they do; the guard counts permits. */
export function harness({ concurrency, startBatch, dueAt, noGuard = false, guarded, answer, ...o }: Setup) {
  const clock = o.clock ?? new FakeClock();
  const token = o.token ?? TOKEN;
  const across = o.calls ?? { now: 0, max: 0 };
  const ctl = { leading: true, paused: false, handover: false, stop: null as string | null, onFreshRead: null as (() => void) | null };
  const events: Event[] = [];
  const lease = {
    holderId: 'h', ensureEpoch: () => ctl.leading, remainingMs: () => 60_000, renewDue: () => false, renewDueInMs: () => Infinity,
    holdReleaseWhile: () => {}, drop: () => {}, release: async () => {},
  } as unknown as LeaseManager;
  const schedule = new Schedule();
  dueAt.forEach((t, i) => schedule.apply({ intentId: `${o.prefix ?? ''}${id(i)}`, status: 'scheduled', nextAttemptAt: new Date(t), attemptCount: 0,
    maxAttempts: 5, version: 'v1' }));
  const refresher = {
    schedule, dbNowMs: () => clock.nowMs(), reconciling: false, lastReadAt: null,
    refresh: async () => ({ rows: 0, pages: 1, applied: 0 }), refreshTail: async () => ({ rows: 0, pages: 1, applied: 0 }),
  } as unknown as ScheduleRefresher;
  const attempt = (intentId: string): StartedAttempt => ({ intentId, attemptNo: 1, maxAttempts: 5, abortedBefore: 0, version: 'v1',
    contract: { provider: { url: null }, payload: {}, retry: { maxAttempts: 5, baseDelayMs: 100, maxDelayMs: 1_000 } } });
  const fencedStartAttempts = vi.fn(async (_t: LeaseToken, requests: StartRequest[]) => {
    events.push({ kind: 'start', n: requests.length });
    await clock.sleep(START_MS);
    return { kind: 'ok' as const, value: requests.map((r) => attempt(r.intentId)) };
  });
  const store = {
    fencedStartAttempts,
    fencedCompleteAttempts: vi.fn(async (_t: LeaseToken, cs: AttemptCompletion[]) =>
      ({ kind: 'ok' as const, value: cs.map((c) => ({ intentId: c.intentId, applied: true, row: null })) })),
  } as unknown as ExecutionStore;
  let inFlight = 0;
  const calls = { max: 0 };
  const provider = {
    submit: vi.fn(async (req: ProviderRequest) => {
      events.push({ kind: 'send', id: req.intentId });
      calls.max = Math.max(calls.max, ++inFlight);
      across.max = Math.max(across.max, ++across.now);
      await clock.sleep(CALL_MS);
      inFlight--;
      across.now--;
      events.push({ kind: 'end', id: req.intentId });
      return answer?.(req.intentId) ?? { kind: 'success' as const, httpStatus: 200 };
    }),
  } as unknown as Provider & { submit: ReturnType<typeof vi.fn> };
  const permits = { out: 0 };
  const real = guarded ? new ProviderGuard(guarded, clock) : null;
  const guard = o.permits ?? (real ? partitionPermits(real, () => 0) : noGuard ? null : {
    acquire: (n: number) => ((permits.out += n), { granted: n, heldBy: null, retryAtMs: null }),
    release: (n: number) => void (permits.out -= n), onResult: () => void permits.out--, onInconclusive: () => void permits.out--,
    shareChanged: () => {}, holdNow: () => null, beginCall: () => true, callLimit: () => 0, paced: () => false,
  } as unknown as ProviderPermits);
  const ops: ExecutorOps = { ...NO_OPS, mayStart: () => !ctl.paused, freshControl: async () => (ctl.onFreshRead?.(), true),
    handoverRequest: () => (ctl.handover ? { requestId: 'r1' } as ReturnType<ExecutorOps['handoverRequest']> : null) };
  const settings: ExecutorSettings = {
    tickBudgetMs: 1_000, concurrency, providerTimeoutMs: 1_000, reconcileIntervalMs: 3_600_000,
    refresh: { intervalMs: 100, pageSize: 100, commitGraceMs: 500 }, startBatch, completionBatch: 1, minLeaderWorkMs: 100,
  };
  const state = new ExecutionState(lease, store, refresher, settings, silentLogger, ops);
  state.loaded(clock.nowMs());
  const recorded: AttemptCompletion[] = [];
  const record = state.record.bind(state);
  state.record = (c) => { recorded.push(c); record(c); };
  const deps: BatchDeps = {
    lease, store, settings, clock, ops, refresher, guard, state, faults: new LeaderFaults(lease, silentLogger),
    calls: { provider, settings, clock, random: () => 0.5, lease, guard, stalls: new StallWatch(clock), ops, state },
  };
  const batch = (budgetEnd: number, startsAhead = true, renewsUntilMs = Infinity) => new Batch(deps, { token, budgetEnd,
    sum: emptySummary('h'), stopRequested: () => ctl.stop, renewsUntilMs, startsAhead });
  /** Advance the fake clock 1 ms at a time until `untilMs` (each step lets everything due run first). */
  const runUntil = async (untilMs: number) => {
    while (clock.nowMs() < untilMs) {
      await flush();
      clock.advance(1);
    }
    await flush();
  };
  const sent = () => events.filter((e) => e.kind === 'send').map((e) => (e as { id: string }).id);
  const aborted = () => recorded.filter((c) => c.outcome === 'aborted').map((c) => c.intentId);
  return { clock, ctl, events, fencedStartAttempts, provider, permits, calls, state, recorded, batch, runUntil, sent, aborted, real };
}
