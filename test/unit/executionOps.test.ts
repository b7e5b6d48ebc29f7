// The control flags' freshness rule (src/executor/executorOps.ts) on a fake clock: freshControl reads only when the
// last read began one refresh interval ago or more (or never), shares a read in flight that is fresh enough, of
// reads that overlap only the newest begun is applied (an older reply arriving last never undoes a pause), and a
// read answered an interval or more after it began is not fresh (what follows the answer would rest on it). A late
// read is logged (control_read_late: warn when news, then once a minute with the repeats, debug in between), and the
// starts and sends held for want of fresh flags are counted (metric, and the next tick summary).
import { describe, expect, it } from 'vitest';
import { FakeClock } from '../../src/lease/clock.js';
import { createLogger, silentLogger, type Logger } from '../../src/observability/logger.js';
import { MetricsRegistry, type AppMetrics } from '../../src/observability/metrics.js';
import { ExecutionOps } from '../../src/executor/executorOps.js';
import { emptySummary } from '../../src/executor/tickSummary.js';
import type { ExecutionControl, OpsStore } from '../../src/store/opsPorts.js';

const INTERVAL_MS = 200;

function control(paused: boolean): ExecutionControl {
  const flag = { paused: false, changedAt: null, changedBy: null, reason: null };
  return { ...flag, leaseName: 'p0', dbNow: new Date(0), pendingHandoverId: null, providerBreaker: null,
    cluster: { ...flag, paused } };
}

/** Each read waits until the test answers it (in any order); `failures` rejects them instead. */
function setup(log: Logger = silentLogger, metrics?: AppMetrics) {
  const clock = new FakeClock();
  const reads: ((c: ExecutionControl) => void)[] = [];
  const failures: ((e: Error) => void)[] = [];
  const store = { getExecutionControl: () => new Promise<ExecutionControl>((r, f) => { reads.push(r); failures.push(f); }) } as unknown as OpsStore;
  const ops = new ExecutionOps(store, 'p0', 'cluster', null, log, clock, INTERVAL_MS, metrics);
  return { clock, reads, failures, ops };
}

const flush = () => new Promise((r) => setImmediate(r));

describe('ExecutionOps control freshness', () => {
  it.each([
    { name: 'never read: reads', advanceMs: null, reads: 1 },
    { name: 'read 199 ms ago: no read', advanceMs: INTERVAL_MS - 1, reads: 0 },
    { name: 'read 200 ms ago: reads again', advanceMs: INTERVAL_MS, reads: 1 },
    { name: 'read 5 s ago (a stall): reads again', advanceMs: 5_000, reads: 1 },
  ])('$name', async ({ advanceMs, reads: expected }) => {
    const { clock, reads, ops } = setup();
    if (advanceMs !== null) {
      const first = ops.refreshControl();
      reads.shift()!(control(false));
      await first;
      clock.advance(advanceMs);
    }
    const fresh = ops.freshControl();
    await flush();
    expect(reads).toHaveLength(expected);
    reads.forEach((r) => r(control(true)));
    await fresh;
    expect(ops.mayStart()).toBe(expected === 0); // a read that happened saw the pause
  });

  it('a read in flight that began within the interval is shared, not repeated', async () => {
    const { reads, ops } = setup();
    const cadence = ops.refreshControl();
    const gate = ops.freshControl();
    await flush();
    expect(reads).toHaveLength(1);
    reads[0]!(control(true));
    await Promise.all([cadence, gate]);
    expect(ops.mayStart()).toBe(false);
  });

  it('overlapping reads: the older reply, arriving last, does not undo the newer one', async () => {
    const { clock, reads, ops } = setup();
    const older = ops.refreshControl(); // began before the pause
    clock.advance(INTERVAL_MS);
    const newer = ops.freshControl(); // stale: a second read, after the pause
    await flush();
    expect(reads).toHaveLength(2);
    reads[1]!(control(true));
    await newer;
    reads[0]!(control(false));
    await older;
    expect(ops.mayStart()).toBe(false);
    expect(ops.pausedBy).toBe('cluster');
  });

  it('a failed read is not fresh: the flags in force stay as old as the last read applied, and the next gate reads again', async () => {
    const { clock, reads, failures, ops } = setup();
    const first = ops.refreshControl();
    reads[0]!(control(false));
    await first;
    clock.advance(5_000); // a stall
    const failing = ops.freshControl();
    await flush();
    failures[1]!(new Error('connection reset'));
    await expect(failing).rejects.toThrow('connection reset');
    const again = ops.freshControl();
    await flush();
    expect(reads).toHaveLength(3); // read again, not answered from the 5 s old flags
    reads[2]!(control(true));
    await again;
    expect(ops.mayStart()).toBe(false);
  });

  it('fresh flags answer at once even while a newer read is in flight (no gate waits on the cadence)', async () => {
    const { clock, reads, ops } = setup();
    const first = ops.refreshControl();
    reads[0]!(control(false));
    await first;
    clock.advance(INTERVAL_MS / 2);
    const cadence = ops.refreshControl(); // in flight, unanswered
    let answered = false;
    const gate = ops.freshControl().then(() => (answered = true));
    await flush();
    expect(answered).toBe(true);
    expect(reads).toHaveLength(2);
    reads[1]!(control(false));
    await Promise.all([cadence, gate]);
  });

  it.each([
    { name: 'the read it shared', shared: true },
    { name: 'its own read', shared: false },
  ])('$name answered one interval after it began (a stall or a late reply) is not fresh: read again', async ({ shared }) => {
    const { clock, reads, ops } = setup();
    const cadence = shared ? ops.refreshControl() : null;
    const gate = ops.freshControl();
    await flush();
    clock.advance(INTERVAL_MS); // the snapshot it answers was taken before this: a drain recorded meanwhile is not in it
    reads[0]!(control(false));
    await cadence;
    await flush();
    expect(reads).toHaveLength(2); // read again before a start or a send rests on the flags
    reads[1]!(control(true));
    expect(await gate).toBe(true);
    expect(ops.mayStart()).toBe(false);
  });

  it('two late reads in a row: not fresh, so nothing starts or is sent on them', async () => {
    const { clock, reads, ops } = setup();
    const gate = ops.freshControl();
    for (let i = 0; i < 2; i++) {
      await flush();
      clock.advance(INTERVAL_MS);
      reads[i]!(control(false));
    }
    expect(await gate).toBe(false);
    expect(reads).toHaveLength(2);
  });
});

describe('ExecutionOps: late control reads are visible', () => {
  /** A read answered `readMs` after it began (the cadence's). */
  async function readTaking(c: ReturnType<typeof setup>, readMs: number): Promise<void> {
    const read = c.ops.refreshControl();
    c.clock.advance(readMs);
    c.reads.shift()!(control(false));
    await read;
  }

  it('control_read_late: warn when news, debug for repeats within a minute, then warn again with the repeats', async () => {
    const logs: Record<string, unknown>[] = [];
    const c = setup(createLogger('debug', { write: (l: string) => void logs.push(JSON.parse(l) as Record<string, unknown>) }));
    const late = () => logs.filter((l) => l.event === 'control_read_late').map((l) => ({ level: l.level, read_ms: l.read_ms, repeats: l.repeats }));
    await readTaking(c, INTERVAL_MS - 1); // on time: nothing
    expect(late()).toEqual([]);
    await readTaking(c, INTERVAL_MS + 20);
    expect(logs.find((l) => l.event === 'control_read_late')).toMatchObject({ level: 'warn', lease_name: 'p0', read_ms: INTERVAL_MS + 20,
      refresh_interval_ms: INTERVAL_MS });
    await readTaking(c, INTERVAL_MS);
    await readTaking(c, INTERVAL_MS);
    c.clock.advance(60_000);
    await readTaking(c, 2 * INTERVAL_MS);
    expect(late()).toEqual([
      { level: 'warn', read_ms: INTERVAL_MS + 20, repeats: undefined },
      { level: 'debug', read_ms: INTERVAL_MS, repeats: undefined },
      { level: 'debug', read_ms: INTERVAL_MS, repeats: undefined },
      { level: 'warn', read_ms: 2 * INTERVAL_MS, repeats: 2 },
    ]);
  });

  it('held starts and sends: counted by step, and in the next tick summary once', async () => {
    const registry = MetricsRegistry.standalone();
    const { ops } = setup(silentLogger, registry.forInstance('h1'));
    ops.staleControlHeld('start');
    ops.staleControlHeld('start');
    ops.staleControlHeld('send');
    const sum = emptySummary('h1');
    ops.tickFinished(sum);
    expect(sum.staleControlHolds).toBe(3);
    const next = emptySummary('h1');
    ops.tickFinished(next);
    expect(next.staleControlHolds).toBe(0); // counted since the last summary
    const text = await registry.renderPrometheus();
    expect(text).toMatch(/^execution_blocked_stale_control_total\{holder_id="h1",step="start"\} 2$/m);
    expect(text).toMatch(/^execution_blocked_stale_control_total\{holder_id="h1",step="send"\} 1$/m);
    await registry.shutdown();
  });
});
