// Redrive against live executors on each dialect: intents keep failing while redrives (by filter, bounded,
// and by explicit ids, twice at once) race the leaders' ticks; then the provider recovers and everything
// succeeds. The attempt log stays contiguous and append-only, each redrive is recorded, and the fault
// campaign's invariant checker finds nothing over the whole history.
import { describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { redriveHandler } from '../../src/http/redrive.js';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import { startRecordingProvider, type RecordingProvider } from '../support/recordingProvider.js';
import { TEST_LEASE, jsonBody, request, sleep, startApps, testConfig, tickLoops, waitUntil } from '../support/apps.js';
import { check } from '../chaos/checker.js';

describe.each(dialects)('redrive with live executors: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  let apps: App[] = [];
  let broken = true;
  const answered = new Map<string, number>();
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    broken = true;
    answered.clear();
    provider = await startRecordingProvider((c) => {
      const status = broken ? 503 : 200;
      answered.set(`${c.intentId}#${c.attemptNo}`, status);
      return { status, delayMs: 10 };
    });
  }, async () => {
    for (const a of apps) await a.close();
    apps = [];
    await provider?.close();
  });

  async function redrive(app: App, body: unknown) {
    const b = jsonBody(body);
    const r = await redriveHandler(app)(request('POST', '/api/ops/intents/redrive', b.body, { ...b.headers, 'x-ms-client-principal-name': 'ops@example.com' }));
    expect(r.status).toBe(200);
    return JSON.parse(r.body!) as { redriven: number; more: boolean; intents: { intentId: string; attemptsBefore: number }[]; notRedriven: string[] };
  }

  it('redrives race the executor; after recovery every intent succeeds once; attempt log contiguous; invariants hold', async () => {
    apps = await startApps(ctx, 2, testConfig(provider.url));
    const loops = tickLoops(apps, 400, 30);
    const ids: string[] = [];
    const accepted: { key: string; n: number; mode: string; intentId: string; status: number; at: number }[] = [];
    let redriven = 0;
    try {
      for (let i = 0; i < 24; i++) {
        const b = jsonBody({ payload: { i }, maxAttempts: 2 });
        const r = await apps[i % 2]!.handlers.postIntent(request('POST', '/api/intents', b.body, { ...b.headers, 'idempotency-key': `rd-${i}` }));
        const id = (JSON.parse(r.body!) as { intentId: string }).intentId;
        ids.push(id);
        accepted.push({ key: `rd-${i}`, n: i, mode: 'ok', intentId: id, status: r.status, at: Date.now() });
      }
      // While the provider is down: redrive whatever has failed so far, bounded, again and again, racing the ticks,
      // for 2.5 s and on until one redrive moved something (a loaded machine fails its first intents later; 30 s is
      // only a liveness guard).
      const until = Date.now() + 2_500;
      const guard = Date.now() + 30_000;
      while (Date.now() < until || (redriven === 0 && Date.now() < guard)) {
        redriven += (await redrive(apps[redriven % 2]!, { filter: { errorContains: 'http 503' }, limit: 5 })).redriven;
        await sleep(40);
      }
      expect(redriven).toBeGreaterThan(0);
      await waitUntil('every intent failed', async () => ((await ctx.statusCounts()).failed ?? 0) === 24, 30_000);
      broken = false;
      // Two redrives of the same ids at once, on two instances: each intent is moved by exactly one of them.
      const [x, y] = await Promise.all([redrive(apps[0]!, { ids, limit: 1_000 }), redrive(apps[1]!, { ids, limit: 1_000 })]);
      expect(x.redriven + y.redriven).toBe(24);
      expect(new Set([...x.intents, ...y.intents].map((t) => t.intentId)).size).toBe(24);
      await waitUntil('every intent succeeded', async () => ((await ctx.statusCounts()).succeeded ?? 0) === 24, 30_000);
      expect((await redrive(apps[0]!, { ids, limit: 1_000 })).notRedriven.sort()).toEqual([...ids].sort()); // nothing failed any more
    } finally {
      await loops.stop();
    }

    const intents = await ctx.intentRows();
    const attempts = await ctx.attemptRows();
    for (const i of intents) {
      const rows = attempts.filter((a) => a.intentId === i.intentId);
      expect(rows.map((a) => a.attemptNo)).toEqual(Array.from({ length: i.attemptCount }, (_, k) => k + 1));
      expect(rows.filter((a) => a.outcome === 'succeeded').map((a) => a.attemptNo)).toEqual([i.attemptCount]);
      expect(i.attemptCount).toBeLessThanOrEqual(i.maxAttempts);
    }
    // One record per call; the intents it moved add up.
    const records = await apps[0]!.stores.redrive.listRedrives(1_000);
    expect(records.every((r) => r.requestedBy.startsWith('ops@example.com@'))).toBe(true);
    expect(records.reduce((n, r) => n + r.redriven, 0)).toBe(redriven + 24);

    const events = await apps[0]!.stores.lease.listEvents(TEST_LEASE);
    const holderOf = new Map(events.filter((e) => e.event === 'acquired').map((e) => [e.leaseEpoch, e.holderId]));
    const { violations, stats } = check({
      leaseMs: 3_000, resumeBound: 10, faults: [], leaderless: [], replays: [], cancels: [], accepted,
      events: events.map((e) => ({ seq: e.seq, epoch: e.leaseEpoch, holderId: e.holderId, event: e.event })),
      audit: (await ctx.auditLog()).map((a) => ({ seq: a.seq, epoch: a.leaseEpoch, holderId: holderOf.get(a.leaseEpoch) ?? '?', action: a.action, atMs: 0 })),
      intents: intents.map((i) => ({ intentId: i.intentId, key: i.idempotencyKey, status: i.status, attemptCount: i.attemptCount })),
      attempts: attempts.map((a) => ({ intentId: a.intentId, attemptNo: a.attemptNo, epoch: a.leaseEpoch, holderId: a.holderId, outcome: a.outcome, httpStatus: a.httpStatus, error: a.error })),
      provider: provider.calls.map((c) => ({ key: c.intentId, attemptNo: c.attemptNo, epoch: c.leaseEpoch, arrivedAt: c.arrivedAt,
        status: answered.get(`${c.intentId}#${c.attemptNo}`)!, delayMs: 10, staleEpoch: false })),
    });
    expect(violations).toEqual([]);
    expect(stats.byStatus).toEqual({ succeeded: 24 });
    expect(stats.duplicateDeliveries).toBe(0);
    expect(provider.calls.length).toBe(attempts.length);
  });
});
