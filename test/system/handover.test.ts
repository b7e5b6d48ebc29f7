// The executor's handover hook (ExecutorOps.handoverRequest / handoverCompleted): starts nothing more, lets the
// in-flight call finish, writes its completion under the fence, reports, releases the row, ends with
// stopReason 'handover' — and does not stand down: the same instance may acquire again at its next tick.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { LEASE_NAME, submit } from '../support/instances.js';
import { buildExecutor } from '../support/executorHarness.js';
import { NO_OPS, type ExecutorOps } from '../../src/executor/executorOps.js';
import type { LeaseToken } from '../../src/store/ports.js';

describe.each(dialects)('executor handover hook: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  useDialectWithProvider(dialect, (fresh, started) => {
    ctx = fresh;
    provider = started;
  });

  it('in-flight call finishes, its completion commits, handoverCompleted, row released, no stand-down', async () => {
    let request: { requestId: string } | null = null;
    const completed: { token: LeaseToken; requestId: string; statusAtCall: string }[] = [];
    let first = '';
    const ops: ExecutorOps = {
      ...NO_OPS,
      handoverRequest: () => request,
      async handoverCompleted(token, requestId) {
        const row = await ctx.sql<{ status: string }>('SELECT status FROM submission_intents WHERE intent_id = $1', [first]);
        completed.push({ token, requestId, statusAtCall: row[0]!.status });
        request = null; // the SQL side clears the request once it is answered
      },
    };
    const inst = await buildExecutor(ctx, { providerUrl: provider.url, ops, concurrency: 1 });
    provider.answer = () => ({ status: 200, delayMs: 400 });
    first = (await submit(inst.stores, { n: 1 })).intentId;
    const second = (await submit(inst.stores, { n: 2 })).intentId;
    const tick = inst.executor.tick(3_000);
    await provider.waitFor((c) => c.length === 1);
    request = { requestId: 'req-1' };
    const sum = await tick;

    expect(sum.stopReason).toBe('handover');
    expect(provider.calls.map((c) => c.intentId)).toEqual([first]); // nothing started after the request
    expect(completed).toEqual([{ token: { leaseName: LEASE_NAME, holderId: inst.lease.holderId, leaseEpoch: 1 }, requestId: 'req-1', statusAtCall: 'succeeded' }]);
    expect(inst.lease.requireLeader()).toBeNull();
    const row = (await inst.stores.lease.get(LEASE_NAME))!;
    expect(row.expiresAt.getTime()).toBeLessThanOrEqual(row.dbNow.getTime()); // released: expired in place
    expect((await inst.stores.lease.listEvents(LEASE_NAME)).map((e) => e.event)).toEqual(['acquired', 'released']);

    // No stand-down: the next tick (this instance) acquires a new epoch and runs the second intent.
    provider.answer = () => ({ status: 200 });
    const next = await inst.executor.tick(1_500);
    expect(next).toMatchObject({ role: 'leader', leaseEpoch: 2 });
    expect(provider.calls.map((c) => c.intentId)).toContain(second);
    await inst.lease.release();
    await inst.stores.close();
  });
});
