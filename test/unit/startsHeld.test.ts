// A START the database held (a pause or a drain the leader had not read yet) puts its intents back as they were: their
// due times, so their order (intents of one partition key are first started in the order they were submitted), the
// guard's permits back, nothing counted as started or skipped, and the hold reported once.
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/lease/clock.js';
import { ScheduleRefresher } from '../../src/schedule/refresher.js';
import { startDue } from '../../src/executor/starts.js';
import { emptySummary } from '../../src/executor/tickSummary.js';
import type { ExecutionStore, ScheduleRow, StartOutcome } from '../../src/store/intentPorts.js';

const T0 = Date.UTC(2026, 0, 1);
const id = (n: number) => `00000000-0000-7000-8000-${String(n).padStart(12, '0')}`;
const row = (n: number, dueMs: number): ScheduleRow =>
  ({ intentId: id(n), status: 'scheduled', nextAttemptAt: new Date(T0 + dueMs), attemptCount: 0, maxAttempts: 3, version: `v${n}` });
const token = { leaseName: 'L', holderId: 'h', leaseEpoch: 1 };

describe('startDue: a START the database held', () => {
  it('puts its intents back at their due times: A (due first) still comes before B, submitted after it', async () => {
    let answer: StartOutcome = { kind: 'held', by: 'paused' };
    const store = {
      rebuildStart: async () => ({ dbNow: new Date(T0 + 5_000), cursor: { modifiedAt: 'x', intentId: '' } }),
      loadScheduled: async (after: string | null) => (after === null ? [row(1, 0), row(2, 1_000)] : []),
      fencedStartAttempts: async () => answer,
    } as unknown as ExecutionStore;
    const refresher = new ScheduleRefresher(store, { pageSize: 10, commitGraceMs: 1_000 }, new FakeClock());
    await refresher.rebuild();
    const released: number[] = [];
    const grantTimes: (number | undefined)[] = [];
    const guard = { release: (n: number, at?: number) => { released.push(n); grantTimes.push(at); } } as unknown as Parameters<typeof startDue>[0]['guard'];
    const held: [string, number][] = [];
    const sum = emptySummary('h');
    const outlets = { call: () => { throw new Error('nothing starts'); }, refused: () => { throw new Error('not refused'); },
      held: (by: string, n: number) => void held.push([by, n]) };

    await startDue({ store, refresher, guard, state: { record: () => {} } }, token, 1, sum, outlets, 42); // takes A only
    expect(held).toEqual([['paused', 1]]);
    expect(released).toEqual([1]);
    expect(grantTimes).toEqual([42]); // given back with the time it was taken (a stale permit is not the half-open probe)
    expect([sum.started, sum.skipped]).toEqual([0, 0]);
    // Both due now; A first, as before the held START (not behind B, requeued after it).
    expect(refresher.schedule.takeDue(refresher.dbNowMs(), 2).map((e) => e.intentId)).toEqual([id(1), id(2)]);

    answer = { kind: 'ok', value: [] };
    for (const n of [1, 2]) refresher.schedule.release(id(n), row(n, n === 1 ? 0 : 1_000));
    await startDue({ store, refresher, guard, state: { record: () => {} } }, token, 2, sum, outlets, 43);
    expect(sum.skipped).toBe(2); // a START that found nothing to start (no hold) skips them, as before
  });
});
