// LeaderFaults, the one place where the executor's leader work turns an SQL error or a refused fence into a
// step-down, against a real LeaseManager on an in-memory LeaseStore (FakeClock; logs captured as JSON lines).
import { describe, it, expect } from 'vitest';
import { FakeClock } from '../../src/lease/clock.js';
import { LeaseManager } from '../../src/lease/leaseManager.js';
import { createLogger } from '../../src/observability/logger.js';
import { LeaderFaults } from '../../src/executor/leaderFaults.js';
import { emptySummary } from '../../src/executor/tickSummary.js';
import { StoreError } from '../../src/store/ports.js';
import { MemoryLeaseStore } from '../support/memoryLeaseStore.js';

type LogLine = Record<string, unknown> & { level: string; event?: string };

function harness() {
  const clock = new FakeClock();
  const store = new MemoryLeaseStore({ now: () => Date.UTC(2030, 0, 1) + clock.nowMs() });
  const lines: LogLine[] = [];
  const log = createLogger('trace', {
    write(chunk: string) {
      for (const l of chunk.split('\n')) if (l.trim()) lines.push(JSON.parse(l) as LogLine);
    },
  });
  const lease = new LeaseManager(store, {
    name: 'submission-manager-executor', holderId: 'A', durationMs: 60_000, renewIntervalMs: 20_000, acquireIntervalMs: 30_000,
    safetyMarginMs: 5_000, acquireJitterMs: 0,
  }, clock, log, () => 0.5);
  const lost = () => lines.filter((l) => l.event === 'leader_lost').map((l) => `${l.reason as string}#${l.lease_epoch as number}`);
  return { lease, faults: new LeaderFaults(lease, log), lines, lost };
}

describe('LeaderFaults', () => {
  it('a refused fence on a tick\'s or bridge\'s work: its summary says lease lost, and the process steps down', async () => {
    const h = harness();
    const token = (await h.lease.tryAcquireOrRenew())!;
    const sum = emptySummary('A');
    expect(h.faults.fenceRefusedLeading(token, sum)).toBe('lease_lost');
    expect(sum.leaseLost).toBe(true);
    expect(h.lease.requireLeader()).toBeNull();
    expect(h.lost()).toEqual(['fence_failed#1']);
  });

  it('the settler\'s refusal under the epoch that still leads steps down', async () => {
    const h = harness();
    const token = (await h.lease.tryAcquireOrRenew())!;
    h.faults.fenceRefusedSettling(token);
    expect(h.lease.requireLeader()).toBeNull();
    expect(h.lost()).toEqual(['fence_failed#1']);
  });

  it('the settler\'s refusal under an older epoch leaves the newer epoch this process leads alone', async () => {
    const h = harness();
    const old = (await h.lease.tryAcquireOrRenew())!;
    expect(await h.lease.release()).toBe(true);
    const current = (await h.lease.tryAcquireOrRenew())!;
    expect(current.leaseEpoch).toBe(old.leaseEpoch + 1);
    h.faults.fenceRefusedSettling(old);
    expect(h.lease.requireLeader()).toEqual(current);
    expect(h.lost()).toEqual(['released#1']);
  });

  it('the settler\'s SQL error under the epoch that still leads: warned with what is pending, and a step-down', async () => {
    const h = harness();
    const token = (await h.lease.tryAcquireOrRenew())!;
    h.faults.settlerSqlError(token, new StoreError('transient', 'connection reset', 'ECONNRESET'), 3);
    expect(h.lease.requireLeader()).toBeNull();
    expect(h.lost()).toEqual(['sql_error#1']);
    const line = h.lines.find((l) => l.event === 'carried_flush_failed');
    expect(line).toMatchObject({ level: 'warn', holder_id: 'A', lease_epoch: 1, pending: 3 });
    expect(line!.sql_error).toBeTruthy();
  });

  it('the settler\'s SQL error under an older epoch is warned and leaves the newer epoch this process leads alone', async () => {
    const h = harness();
    const old = (await h.lease.tryAcquireOrRenew())!;
    expect(await h.lease.release()).toBe(true);
    const current = (await h.lease.tryAcquireOrRenew())!;
    h.faults.settlerSqlError(old, new StoreError('transient', 'connection reset', 'ECONNRESET'), 1);
    expect(h.lease.requireLeader()).toEqual(current);
    expect(h.lost()).toEqual(['released#1']);
    expect(h.lines.filter((l) => l.event === 'carried_flush_failed')).toMatchObject([{ level: 'warn', lease_epoch: 1, pending: 1 }]);
  });

  it('an SQL error on the leader path is logged with its token and drops leadership', async () => {
    const h = harness();
    const token = (await h.lease.tryAcquireOrRenew())!;
    h.faults.sqlError(token, new StoreError('transient', 'connection reset', 'ECONNRESET'));
    expect(h.lease.requireLeader()).toBeNull();
    expect(h.lost()).toEqual(['sql_error#1']);
    const line = h.lines.find((l) => l.event === 'executor_sql_error');
    expect(line).toMatchObject({ level: 'error', holder_id: 'A', lease_epoch: 1 });
    expect(line!.sql_error).toBeTruthy();
  });
});
