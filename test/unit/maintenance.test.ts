// The maintenance rule (src/executor/maintenance.ts) on a fake clock: a failing task never throws, never reports a
// lost lease, is logged and counted, and is backed off exponentially up to the cap; a slow task is cut at the slice's
// end (not awaited) and nothing runs again until it settles; a fence refusal is reported; paused = nothing runs.
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/lease/clock.js';
import { createLogger, silentLogger } from '../../src/observability/logger.js';
import { MetricsRegistry } from '../../src/observability/metrics.js';
import { Maintenance, type MaintenanceTask } from '../../src/executor/maintenance.js';
import { emptySummary } from '../../src/executor/tickSummary.js';

const TOKEN = { leaseName: 'l', holderId: 'h', leaseEpoch: 7 };
const SETTINGS = { sliceMs: 1_000, backoffBaseMs: 100, backoffMaxMs: 500 };

function setup(task: MaintenanceTask) {
  const clock = new FakeClock();
  const logs: Record<string, unknown>[] = [];
  const log = createLogger('info', { write: (s: string) => void logs.push(JSON.parse(s) as Record<string, unknown>) });
  const registry = MetricsRegistry.standalone();
  const m = new Maintenance([task], SETTINGS, clock, log, registry.forInstance('h'));
  const failuresMetric = async () => Number(/maintenance_failures_total\{[^}]*task="retention"[^}]*\} (\d+)/.exec(await registry.renderPrometheus())?.[1]);
  return { clock, logs, m, failuresMetric };
}

const flush = () => new Promise((r) => setImmediate(r));

describe('Maintenance', () => {
  it('a task failing on every call: logged with the SQL error, counted, backed off 100, 200, 400, 500 (cap) ms; never throws, never leaseLost', async () => {
    let calls = 0;
    const { clock, logs, m, failuresMetric } = setup({
      name: 'retention', due: () => true,
      run: async () => {
        calls++;
        throw Object.assign(new Error('permission denied for table submission_intents'), { code: '42501' });
      },
    });
    const waits: number[] = [];
    for (let i = 0; i < 5; i++) {
      let waited = 0;
      while (m.sliceMs(10_000, false) === 0) {
        clock.advance(10);
        waited += 10;
      }
      waits.push(waited);
      await expect(m.run(TOKEN, emptySummary('h'), clock.nowMs() + 1_000)).resolves.toBe('ok');
    }
    expect(waits).toEqual([0, 100, 200, 400, 500]);
    expect(calls).toBe(5);
    expect(await failuresMetric()).toBe(5);
    const failed = logs.filter((l) => l.event === 'retention_failed');
    expect(failed).toHaveLength(5);
    expect(failed[0]).toMatchObject({ level: 'error', lease_epoch: 7, failures: 1, retry_in_ms: 100,
      sql_error: { message: 'permission denied for table submission_intents', code: '42501' } });
    expect(m.status()).toEqual([{ task: 'retention', runs: 5, lastRunAgoMs: 0, failures: 5, lastError: 'permission denied for table submission_intents', retryInMs: 500 }]);
  });

  it('a success after failures resets the back-off', async () => {
    let fail = true;
    const { clock, m } = setup({ name: 'retention', due: () => true, run: async () => {
      if (fail) throw new Error('boom');
      return 'ok';
    } });
    await m.run(TOKEN, emptySummary('h'), 1_000);
    expect(m.sliceMs(10_000, false)).toBe(0);
    clock.advance(100);
    fail = false;
    await m.run(TOKEN, emptySummary('h'), clock.nowMs() + 1_000);
    expect(m.status()[0]).toMatchObject({ failures: 0, lastError: null, retryInMs: 0 });
    expect(m.sliceMs(10_000, false)).toBe(1_000);
  });

  it('recorded state: each failure; the first success of each epoch and the one ending a run of failures clear it (an earlier leader\'s too)', async () => {
    let fail = false;
    const clock = new FakeClock();
    const recorded: [string, number, string | null][] = [];
    const m = new Maintenance([{ name: 'retention', due: () => true, run: async () => {
      if (fail) throw new Error('boom');
      return 'ok';
    } }], { ...SETTINGS, backoffBaseMs: 1, backoffMaxMs: 1 }, clock, silentLogger, undefined, (...a) => void recorded.push(a));
    const runAs = async (epoch: number) => {
      clock.advance(10);
      await m.run({ ...TOKEN, leaseEpoch: epoch }, emptySummary('h'), clock.nowMs() + 1_000);
    };
    await runAs(7); // first success of epoch 7: clears whatever an earlier leader recorded
    await runAs(7); // nothing new
    fail = true;
    await runAs(7);
    fail = false;
    await runAs(7); // ends our run of failures
    await runAs(7);
    await runAs(8); // a new epoch (another leader may have failed meanwhile): cleared again, once
    await runAs(8);
    expect(recorded).toEqual([['retention', 0, null], ['retention', 1, 'boom'], ['retention', 0, null], ['retention', 0, null]]);
  });

  it('a slow task is cut at the slice end (not awaited); nothing runs again until it settles', async () => {
    let finish: () => void = () => {};
    let calls = 0;
    const { clock, m } = setup({ name: 'retention', due: () => true, run: () => {
      calls++;
      return new Promise((r) => (finish = () => r('ok')));
    } });
    const out = m.run(TOKEN, emptySummary('h'), 300);
    await flush();
    clock.advance(300);
    await expect(out).resolves.toBe('ok'); // returned at the slice end while the statement still runs
    expect(m.sliceMs(10_000, false)).toBe(0); // still settling: no slice, no second run
    await expect(m.run(TOKEN, emptySummary('h'), clock.nowMs() + 300)).resolves.toBe('ok');
    expect(calls).toBe(1);
    finish();
    await m.settled();
    expect(m.sliceMs(10_000, false)).toBe(1_000);
  });

  it('a fence refusal is reported as leaseLost (the only way maintenance ends leadership), not as a failure', async () => {
    const { m, logs } = setup({ name: 'retention', due: () => true, run: async () => 'leaseLost' });
    await expect(m.run(TOKEN, emptySummary('h'), 1_000)).resolves.toBe('leaseLost');
    expect(logs.filter((l) => l.event === 'retention_failed')).toEqual([]);
  });

  it('slice: 0 when paused or nothing is due; else the setting, at most a quarter of the tick', () => {
    let due = false;
    const { m } = setup({ name: 'retention', due: () => due, run: async () => 'ok' });
    expect(m.sliceMs(10_000, false)).toBe(0);
    due = true;
    expect(m.sliceMs(10_000, true)).toBe(0);
    expect(m.sliceMs(10_000, false)).toBe(1_000);
    expect(m.sliceMs(600, false)).toBe(150);
  });
});
