// /api/metrics across the life of a leader, read as Prometheus text from two in-process apps on each dialect:
// acquire (and a follower's refused acquire), submits, attempts (success and retry), drain, renew failure; and the
// cluster gauges read from SQL, the same on the follower as on the leader.
import { describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { releaseLeaseHandler, executionControlHandler } from '../../src/http/ops.js';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import { startRecordingProvider, type RecordingProvider } from '../support/recordingProvider.js';
import { TEST_LEASE, metric, request, scrape, startApps, submitVia, testConfig, waitUntil } from '../support/apps.js';

describe.each(dialects)('metrics: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  let apps: App[] = [];
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    // The first attempt of a payload {fail: true} answers 503 (retryable); everything else 200.
    provider = await startRecordingProvider((c) => ({ status: (c.payload as { fail?: boolean }).fail && c.attemptNo === 1 ? 503 : 200 }));
    apps = await startApps(ctx, 2, testConfig(provider.url));
  }, async () => {
    for (const a of apps) await a.close();
    apps = [];
    await provider?.close();
  });

  it('change as expected across acquire, attempts, drain and a renew failure', async () => {
    const [a, b] = apps as [App, App];
    const A = { holder_id: a.lease.holderId };
    const B = { holder_id: b.lease.holderId };

    // Before anything: zero series exist, nobody leads.
    let ta = await scrape(a);
    expect(metric(ta, 'leader_acquired_total', A)).toBe(0);
    expect(metric(ta, 'is_leader', A)).toBe(0);
    expect(metric(ta, 'execution_blocked_not_leader_total', A)).toBe(0);
    expect(metric(ta, 'leadership_lost_total', { ...A, reason: 'renew_refused' })).toBe(0); // known labels start at 0
    expect(metric(ta, 'attempts_total', { ...A, outcome: 'abandoned' })).toBe(0);
    expect([metric(ta, 'cluster_has_leader'), metric(ta, 'cluster_lease_epoch'), metric(ta, 'cluster_due_backlog')]).toEqual([0, 0, 0]);
    expect(ta).toMatch(/^# TYPE leader_acquired_total counter$/m);
    expect(ta).not.toMatch(new RegExp(b.lease.holderId)); // per app: A's registry knows only A

    // Acquire.
    await a.executor.tick(200);
    ta = await scrape(a);
    const epoch = a.lease.status().leaseEpoch!;
    expect(metric(ta, 'leader_acquired_total', A)).toBe(1);
    expect(metric(ta, 'acquire_attempts_total', { ...A, result: 'acquired' })).toBe(1);
    expect(metric(ta, 'acquire_latency_ms_count', { ...A, result: 'acquired' })).toBe(1);
    expect(metric(ta, 'is_leader', A)).toBe(1);
    expect(metric(ta, 'leader_epoch', A)).toBe(epoch);
    expect(metric(ta, 'lease_remaining_ms', A)).toBeGreaterThan(0);
    expect(metric(ta, 'execution_paused', A)).toBe(0); // the leader read the flag
    expect(metric(ta, 'tick_duration_ms_count', { ...A, role: 'leader' })).toBe(1);
    expect(ta).toMatch(/^# TYPE tick_duration_ms histogram$/m);
    expect(ta).toMatch(new RegExp(`^tick_duration_ms_bucket\\{holder_id="${a.lease.holderId}",role="leader",le="\\+Inf"\\} 1$`, 'm'));

    // A follower's acquire is refused.
    await b.executor.tick(200);
    let tb = await scrape(b);
    expect(metric(tb, 'acquire_attempts_total', { ...B, result: 'held' })).toBeGreaterThanOrEqual(1);
    expect(metric(tb, 'is_leader', B)).toBe(0);
    expect(metric(tb, 'leader_epoch', B)).toBeUndefined();
    expect(metric(tb, 'tick_duration_ms_count', { ...B, role: 'follower' })).toBe(1);

    // Submits on the follower; attempts on the leader (one retry).
    const ids = [await submitVia(b, { n: 1 }), await submitVia(b, { n: 2 }), await submitVia(b, { n: 3, fail: true })];
    tb = await scrape(b);
    expect(metric(tb, 'intents_submitted_total', { ...B, outcome: 'created' })).toBe(3);
    expect(metric(tb, 'intents_submitted_total', { ...B, outcome: 'conflict' })).toBe(0); // known labels start at 0
    // Cluster gauges from SQL on the follower (on Flex an HTTP instance): the leader and the backlog it has to run.
    expect(metric(tb, 'cluster_overview_up')).toBe(1);
    expect(metric(tb, 'cluster_intents', { status: 'scheduled' })).toBe(3);
    expect(metric(tb, 'cluster_intents', { status: 'succeeded' })).toBe(0);
    expect(metric(tb, 'cluster_due_backlog')).toBe(3);
    expect(metric(tb, 'cluster_oldest_due_age_seconds')).toBeGreaterThanOrEqual(0);
    expect(metric(tb, 'cluster_has_leader')).toBe(1);
    expect(metric(tb, 'cluster_leader_info', { holder_id: a.lease.holderId, lease_epoch: String(epoch) })).toBe(1);
    expect(metric(tb, 'cluster_lease_epoch')).toBe(epoch);
    expect(metric(tb, 'cluster_lease_expires_in_seconds')).toBeGreaterThan(0);
    expect(metric(tb, 'cluster_seconds_since_last_attempt')).toBeUndefined(); // no attempt yet
    await waitUntil('all succeeded', async () => {
      await a.executor.tick(300);
      return (await ctx.statusCounts()).succeeded === 3;
    });
    ta = await scrape(a);
    expect(metric(ta, 'attempts_started_total', A)).toBe(4);
    expect(metric(ta, 'attempts_total', { ...A, outcome: 'succeeded' })).toBe(3);
    expect(metric(ta, 'attempts_total', { ...A, outcome: 'retryable_error' })).toBe(1);
    expect(metric(ta, 'attempt_duration_ms_count', A)).toBe(4);
    expect(metric(ta, 'refresh_latency_ms_count', { ...A, kind: 'refresh' })).toBeGreaterThan(0);
    expect(metric(ta, 'schedule_size', A)).toBe(0);
    expect(metric(ta, 'schedule_oldest_due_lag_ms', A)).toBe(0);
    expect(provider.calls.map((c) => c.intentId).sort()).toEqual([...ids, ids[2]!].sort());
    tb = await scrape(b);
    expect([metric(tb, 'cluster_intents', { status: 'succeeded' }), metric(tb, 'cluster_due_backlog')]).toEqual([3, 0]);
    expect(metric(tb, 'cluster_seconds_since_last_attempt')).toBeGreaterThanOrEqual(0);

    // Pause is visible as a gauge on the leader after its next read.
    await executionControlHandler(b, 'pause')(request('POST', '/api/ops/execution/pause'));
    await a.executor.tick(150);
    expect(metric(await scrape(a), 'execution_paused', A)).toBe(1);
    await executionControlHandler(b, 'resume')(request('POST', '/api/ops/execution/resume'));

    // Drain, requested through the follower (recorded in SQL): the leader's next tick drains and releases (no
    // stand-down); B takes over at its next tick.
    expect((await releaseLeaseHandler(b)(request('POST', '/api/ops/lease/release'))).status).toBe(202);
    expect(metric(await scrape(a), 'handovers_completed_total', A)).toBe(0);
    const drained = await a.executor.tick(300);
    expect(drained.stopReason).toBe('handover');
    ta = await scrape(a);
    expect(metric(ta, 'handovers_completed_total', A)).toBe(1);
    expect(metric(ta, 'leadership_lost_total', { ...A, reason: 'released' })).toBe(1);
    expect(metric(ta, 'is_leader', A)).toBe(0);
    expect(metric(ta, 'lease_remaining_ms', A)).toBe(0);
    expect(metric(ta, 'leader_epoch', A)).toBeUndefined(); // gauges report what is observed now, not a stale epoch
    expect(metric(ta, 'cluster_has_leader')).toBe(0); // released in place: the row is expired, nobody leads
    await b.executor.tick(150);
    tb = await scrape(b);
    expect(metric(tb, 'leader_acquired_total', B)).toBe(1);
    expect(metric(tb, 'leader_epoch', B)).toBe(epoch + 1);
    expect(metric(tb, 'cluster_leader_info', { holder_id: b.lease.holderId, lease_epoch: String(epoch + 1) })).toBe(1);

    // Renew failure: the lease is taken behind B's back; its renew is refused and leadership dropped.
    await ctx.stealLease(TEST_LEASE, 'thief');
    expect(await b.lease.renew()).toBe(false);
    tb = await scrape(b);
    expect(metric(tb, 'renew_latency_ms_count', { ...B, result: 'refused' })).toBe(1);
    expect(metric(tb, 'leadership_lost_total', { ...B, reason: 'renew_refused' })).toBe(1);
    expect(metric(tb, 'is_leader', B)).toBe(0);
  });
});
