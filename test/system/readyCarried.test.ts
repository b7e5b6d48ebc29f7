// Ready attempts (started, call not sent) that a bridge carried to the next tick, when that tick does not continue
// their epoch. Whatever happens, an attempt that was never sent is closed 'aborted' (never charged), never left
// 'started' for orphan recovery to close as 'abandoned … it may have been sent':
//  - the tick's acquire fails (a lost renew reply: the row is still ours) after the settler of the bridge's end
//    has finished: the aborts are written all the same (under the still-valid fence), nothing stays unwritten;
//  - this process acquires a new epoch instead: they are aborted before CARRY, which writes them before orphan
//    recovery, and the new epoch charges nothing.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { submit } from '../support/instances.js';
import { buildExecutor, type Built } from '../support/executorHarness.js';
import { until } from '../support/replyFaults.js';

type AttemptRow = { intent_id: string; attempt_no: number; outcome: string | null; lease_epoch: number | string };
type Swappable = { tryAcquireOrRenew: () => Promise<unknown>; drop: (reason: string, e?: unknown) => void };

describe.each(dialects)('ready attempts carried by a bridge: $name', (dialect) => {
  const t = {} as { ctx: DialectContext; provider: RecordingProvider };
  useDialectWithProvider(dialect, (ctx, provider) => {
    t.ctx = ctx;
    t.provider = provider;
  });

  /** One call (150 ms) in flight, the rest of a START waiting ready; a bridge carries them past the tick. */
  async function carrying(): Promise<{ b: Built; ready: number }> {
    t.provider.answer = () => ({ status: 200, delayMs: 150 });
    const b = await buildExecutor(t.ctx, { providerUrl: t.provider.url, concurrency: 1 }); // startBatch 1
    for (let k = 0; k < 4; k++) await submit(b.stores, { k });
    await b.executor.tick(50, 60_000); // acquire + rebuild
    await b.executor.tick(400, 60_000); // runs out; a bridge carries on
    const state = (b.executor as unknown as { state: { readyAttempts: number } }).state;
    await until(() => state.readyAttempts > 0, 5_000, 'an attempt waiting ready');
    return { b, ready: state.readyAttempts };
  }

  const attempts = () => t.ctx.sql<AttemptRow>(
    'SELECT intent_id, attempt_no, outcome, lease_epoch FROM submission_attempts ORDER BY intent_id, attempt_no', []);

  it('the next acquire fails after the settler has finished: the ready attempts\' aborts are written', async () => {
    const { b, ready } = await carrying();
    const lease = b.lease as unknown as Swappable;
    lease.tryAcquireOrRenew = async () => {
      await b.executor.inFlight.settled(); // the bridge has handed over: the carried call ends …
      await until(() => b.executor.completions.size === 0, 5_000, 'the settler wrote its completion'); // … and is written
      await new Promise((r) => setImmediate(r)); // the settler's task has ended
      lease.drop('renew_error', new Error('simulated lost renew reply')); // the row is still ours in the database
      return null;
    };
    expect((await b.executor.tick(400, 60_000)).role).toBe('follower');
    await until(() => b.executor.completions.size === 0, 3_000, 'the aborts written').catch(() => {});
    expect(b.executor.completions.size).toBe(0);
    const rows = await attempts();
    expect(rows.filter((r) => r.outcome === 'aborted')).toHaveLength(ready);
    expect(rows.filter((r) => r.outcome === null || r.outcome === 'started'), JSON.stringify(rows)).toEqual([]);
  });

  it('this process acquires a new epoch: the carried ready attempts are aborted, not charged by orphan recovery', async () => {
    const { b, ready } = await carrying();
    const lease = b.lease as unknown as Swappable;
    const acquire = lease.tryAcquireOrRenew.bind(lease);
    lease.tryAcquireOrRenew = async () => { // a stall between the hand-over and the acquire: the row expires meanwhile
      await b.executor.inFlight.settled();
      lease.drop('local_deadline');
      await t.ctx.expireLeases();
      lease.tryAcquireOrRenew = acquire;
      return acquire();
    };
    const sum = await b.executor.tick(400, null);
    expect([sum.role, sum.leaseEpoch]).toEqual(['leader', 2]);
    const rows = await attempts();
    expect(rows.filter((r) => r.outcome === 'abandoned'), JSON.stringify(rows)).toEqual([]);
    expect(rows.filter((r) => Number(r.lease_epoch) === 1 && r.outcome === 'aborted')).toHaveLength(ready);
  });

  it('a drain while a bridge carries ready attempts: they are aborted, never sent, nothing left started', async () => {
    const { b, ready } = await carrying();
    const sentBefore = t.provider.calls.length;
    expect(await b.executor.drain()).toBe(true);
    const rows = await attempts();
    expect(rows.filter((r) => r.outcome === 'aborted')).toHaveLength(ready);
    expect(rows.filter((r) => r.outcome === null || r.outcome === 'started'), JSON.stringify(rows)).toEqual([]);
    expect(t.provider.calls.length).toBe(sentBefore); // the call in flight finished; nothing more went out
  });

  it('a tick with no next occurrence after a bridge: it sends the carried attempts and aborts none', async () => {
    const { b } = await carrying();
    for (let k = 4; k < 12; k++) await submit(b.stores, { k }); // a backlog longer than one tick
    for (let k = 0; k < 12 && (await t.ctx.countIntents('succeeded')) < 12; k++) await b.executor.tick(500, null);
    expect(await t.ctx.countIntents('succeeded')).toBe(12);
    const rows = await attempts();
    expect(rows.filter((r) => r.outcome !== 'succeeded'), JSON.stringify(rows)).toEqual([]);
    expect(t.provider.calls).toHaveLength(12);
  });
});
