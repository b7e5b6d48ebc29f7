// Metrics plumbing without a database: the Prometheus renderer over real SDK collections, per-instance labels
// on a shared registry, gauge (un)registration, and the Azure Monitor path (useAzureMonitor with our reader).
import { describe, expect, it } from 'vitest';
import { MeterProvider } from '@opentelemetry/sdk-metrics';
import { MetricsRegistry, PullMetricReader } from '../../src/observability/metrics.js';
import { renderPrometheus } from '../../src/observability/prometheus.js';

async function collect(record: (p: MeterProvider) => void): Promise<string> {
  const reader = new PullMetricReader();
  const provider = new MeterProvider({ readers: [reader] });
  record(provider);
  const { resourceMetrics } = await reader.collect();
  await provider.shutdown();
  return renderPrometheus(resourceMetrics);
}

describe('Prometheus renderer', () => {
  it('counters get _total once, up-down counters and gauges are gauges, label values are escaped, output is sorted', async () => {
    const text = await collect((p) => {
      const m = p.getMeter('t');
      m.createCounter('jobs', { description: 'Jobs\ndone' }).add(2, { b: 'x"y', a: 'back\\slash\nnl' });
      m.createCounter('runs_total').add(1);
      m.createUpDownCounter('queue.depth').add(-3, { q: 'main' });
      m.createObservableGauge('temp').addCallback((r) => r.observe(21.5, { room: 'k' }));
    });
    expect(text).toBe([
      '# HELP jobs_total Jobs\\ndone', '# TYPE jobs_total counter', 'jobs_total{a="back\\\\slash\\nnl",b="x\\"y"} 2',
      '# HELP queue_depth queue.depth', '# TYPE queue_depth gauge', 'queue_depth{q="main"} -3',
      '# HELP runs_total runs_total', '# TYPE runs_total counter', 'runs_total 1',
      '# HELP temp temp', '# TYPE temp gauge', 'temp{room="k"} 21.5', ''].join('\n'));
  });

  it('histograms: cumulative buckets in boundary order, +Inf, _sum and _count per label set', async () => {
    const text = await collect((p) => {
      const h = p.getMeter('t').createHistogram('lat_ms', { advice: { explicitBucketBoundaries: [10, 100] } });
      for (const v of [5, 50, 500, 7]) h.record(v, { k: 'b' });
      h.record(1, { k: 'a' });
    });
    expect(text.split('\n').filter((l) => l.startsWith('lat_ms'))).toEqual([
      'lat_ms_bucket{k="a",le="10"} 1', 'lat_ms_bucket{k="a",le="100"} 1', 'lat_ms_bucket{k="a",le="+Inf"} 1', 'lat_ms_sum{k="a"} 1', 'lat_ms_count{k="a"} 1',
      'lat_ms_bucket{k="b",le="10"} 2', 'lat_ms_bucket{k="b",le="100"} 3', 'lat_ms_bucket{k="b",le="+Inf"} 4', 'lat_ms_sum{k="b"} 562', 'lat_ms_count{k="b"} 4',
    ]);
  });
});

describe('MetricsRegistry', () => {
  it('a shared registry labels each instance; gauges stop reporting once unregistered', async () => {
    const reg = MetricsRegistry.standalone();
    const a = reg.forInstance('a');
    const b = reg.forInstance('b');
    const offA = a.gauges({ leadership: () => ({ epoch: 7, remainingMs: 900 }), scheduleSize: () => 3, oldestDueLagMs: () => 12, paused: () => false });
    b.gauges({ leadership: () => null, scheduleSize: () => 0, oldestDueLagMs: () => 0, paused: () => null });
    a.attemptClosed('succeeded', 40);
    b.intentSubmitted('created');
    let text = await reg.renderPrometheus();
    expect(text).toMatch(/^is_leader\{holder_id="a"\} 1$/m);
    expect(text).toMatch(/^is_leader\{holder_id="b"\} 0$/m);
    expect(text).toMatch(/^leader_epoch\{holder_id="a"\} 7$/m);
    expect(text).not.toMatch(/^leader_epoch\{holder_id="b"\}/m);
    expect(text).not.toMatch(/^execution_paused\{holder_id="b"\}/m); // never read: no sample rather than a wrong 0
    expect(text).toMatch(/^attempts_total\{holder_id="a",outcome="succeeded"\} 1$/m);
    expect(text).toMatch(/^intents_submitted_total\{holder_id="b",outcome="created"\} 1$/m);
    offA();
    text = await reg.renderPrometheus();
    expect(text).not.toMatch(/^is_leader\{holder_id="a"\}/m);
    await reg.shutdown();
  });

  it('ignores values a histogram cannot take instead of throwing', async () => {
    const reg = MetricsRegistry.standalone();
    const m = reg.forInstance('x');
    expect(() => m.tick('leader', Number.NaN)).not.toThrow();
    expect(() => m.scheduleRead('refresh', -1)).not.toThrow();
    expect(await reg.renderPrometheus()).not.toMatch(/tick_duration_ms_count/);
    await reg.shutdown();
  });

  it('Azure: useAzureMonitor() with our pull reader serves the same instruments (no export here: unreachable endpoint)', async () => {
    const { azureMonitorRegistry } = await import('../../src/observability/azureMonitor.js');
    const reg = await azureMonitorRegistry('InstrumentationKey=00000000-0000-0000-0000-000000000000;IngestionEndpoint=http://127.0.0.1:9/');
    expect(await azureMonitorRegistry('ignored: once per process')).toBe(reg);
    const m = reg.forInstance('az');
    m.acquireAttempt('held', 2);
    expect(await reg.renderPrometheus()).toMatch(/^acquire_attempts_total\{holder_id="az",result="held"\} 1$/m);
    // No flush or shutdown here: both export to the (unreachable) endpoint, seconds of retries. The worker exits.
  });
});
