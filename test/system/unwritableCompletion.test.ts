// Found by the review of issue 20: a provider's error body with a NUL byte made every COMPLETE it was batched in fail
// on PostgreSQL (22021), for ever; the row is kept while results are unwritten, so execution stopped for the cluster.
import { afterEach, describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { LEASE_NAME, submit } from '../support/instances.js';
import { buildExecutor, intentRow, type Built } from '../support/executorHarness.js';
import { createLogger } from '../../src/observability/logger.js';

describe.each(dialects)('a completion the database would always refuse: $name', (dialect) => {
  const s = { built: [] as Built[] } as { ctx: DialectContext; provider: RecordingProvider; built: Built[] };
  useDialectWithProvider(dialect, (ctx, provider) => void Object.assign(s, { ctx, provider, built: [] }));
  afterEach(async () => { // before the context closes: no settler left retrying against a dropped schema
    for (const b of s.built) await b.executor.drain(b.clock.nowMs() + 2_000);
  });
  const build = async (o: Parameters<typeof buildExecutor>[1]) => (s.built[s.built.length] = await buildExecutor(s.ctx, o));

  it('a provider error body with a NUL byte is written (as U+FFFD) and execution goes on', async () => {
    // The provider answers 500 with a NUL in its body for the "poison" intent: the error text carries it into COMPLETE.
    s.provider.answer = (c) => ((c.payload as { poison?: boolean }).poison ? { status: 500, body: 'bad\u0000body' } : { status: 200 });
    const a = await build({ providerUrl: s.provider.url, holderId: 'A', leaseMs: 2_000 });
    const b = await build({ providerUrl: s.provider.url, holderId: 'B', leaseMs: 2_000, stores: a.stores });
    const poison = (await submit(a.stores, { poison: true }, { maxAttempts: 100 })).intentId;
    await a.executor.tick(600);
    const good = (await submit(a.stores, { n: 2 })).intentId;
    // Both instances tick as their timers would, for ~4 leases: the good intent must be sent and written.
    const end = Date.now() + 8_000;
    while (Date.now() < end && (await intentRow(s.ctx, good)).status !== 'succeeded') {
      await Promise.all([a.executor.tick(300), b.executor.tick(300)]);
    }
    const row = await intentRow(s.ctx, good);
    const events = (await a.stores.lease.listEvents(LEASE_NAME)).map((e) => `${e.event} ${e.holderId}#${e.leaseEpoch}`);
    expect(row.status, `calls: ${JSON.stringify(s.provider.calls.map((c) => [c.payload, c.attemptNo, c.leaseEpoch]))}; lease: ${events.slice(0, 12).join(', ')}`)
      .toBe('succeeded');
    expect((await intentRow(s.ctx, poison)).lastError).toBe('HTTP 500: bad\uFFFDbody'); // before: never written (22021 on PostgreSQL)
  });

  it('a completion the database refuses every time (a constraint) is dropped alone: the others are written, the lease stays', async () => {
    const logs: Record<string, unknown>[] = [];
    const logger = createLogger('info', { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
    const a = await build({ providerUrl: s.provider.url, holderId: 'A', leaseMs: 2_000, logger });
    const poison = (await submit(a.stores, { poison: true })).intentId;
    const healthy: string[] = [];
    for (let i = 0; i < 7; i++) healthy.push((await submit(a.stores, { i })).intentId);
    // The poison intent's attempt may be started but never closed: any COMPLETE of it is refused (class 23).
    await s.ctx.sql(`ALTER TABLE submission_attempts ADD CONSTRAINT t_refuse_completion CHECK (intent_id <> '${poison}' OR outcome = 'started')`);
    const end = Date.now() + 6_000;
    const done = async () => (await Promise.all(healthy.map((id) => intentRow(s.ctx, id)))).every((r) => r.status === 'succeeded');
    while (Date.now() < end && !(await done())) await a.executor.tick(300);
    const statuses = await Promise.all(healthy.map(async (id) => (await intentRow(s.ctx, id)).status));
    const events = (await a.stores.lease.listEvents(LEASE_NAME)).map((e) => `${e.event} ${e.holderId}#${e.leaseEpoch}`);
    // Before: the refused row failed every batch it was in, for ever: healthy 2xx never recorded (in_flight).
    expect(statuses, `lease: ${events.slice(0, 12).join(', ')}`).toEqual(healthy.map(() => 'succeeded'));
    expect(events.filter((e) => !e.startsWith('renewed'))).toEqual(['acquired A#1']); // one epoch, never released
    const dropped = logs.filter((l) => l.event === 'completion_unwritable');
    expect(dropped).toEqual([expect.objectContaining({ level: 'error', intent_id: poison, attempt_no: 1 })]);
    expect(JSON.stringify(dropped)).not.toContain('poison'); // no payload in the log
    expect((await intentRow(s.ctx, poison)).status).toBe('in_flight'); // its attempt is left to orphan recovery
  });

  it('a completion refused for its error text is written once more with the text cleaned (printable ASCII)', async () => {
    s.provider.answer = (c) => ((c.payload as { poison?: boolean }).poison ? { status: 500, body: 'Grüße' } : { status: 200 });
    const a = await build({ providerUrl: s.provider.url, holderId: 'A', leaseMs: 2_000 });
    const poison = (await submit(a.stores, { poison: true }, { maxAttempts: 1 })).intentId;
    const good = (await submit(a.stores, { n: 1 })).intentId;
    await s.ctx.sql(`ALTER TABLE submission_attempts ADD CONSTRAINT t_refuse_text CHECK (error IS NULL OR error NOT LIKE '%ü%')`);
    const end = Date.now() + 6_000;
    while (Date.now() < end && (await intentRow(s.ctx, poison)).status !== 'failed') await a.executor.tick(300);
    expect((await intentRow(s.ctx, poison))).toMatchObject({ status: 'failed', lastError: expect.stringMatching(/^HTTP 500: Gr\?\?e/) });
    expect((await intentRow(s.ctx, good)).status).toBe('succeeded');
  });
});

