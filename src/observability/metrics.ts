// Metrics through the OpenTelemetry API. A MetricsRegistry owns one set of instruments on one MeterProvider
// and a pull reader (rendered as Prometheus text for GET /api/metrics); AppMetrics binds them to one instance
// (every point carries holder_id). The composition root creates the registry — one per app by default, or a
// shared one (several in-process instances, or the global provider that useAzureMonitor() installs) — and
// hands AppMetrics to whoever records; nothing in src/ core reads a global meter.
import type { Attributes, Counter, Histogram, Meter, MeterProvider, ObservableResult } from '@opentelemetry/api';
import { AggregationTemporality, InstrumentType, MeterProvider as SdkMeterProvider, MetricReader } from '@opentelemetry/sdk-metrics';
import { appVersion } from '../version.js';
import { renderPrometheus } from './prometheus.js';

/** A reader that exports nothing by itself: each scrape pulls (collect) what the SDK aggregated. Counters and
 *  histograms are cumulative (Prometheus semantics); observable gauges are delta, i.e. only what the callbacks
 *  observed in this collection — a series that is no longer observed (an instance closed, an epoch no longer
 *  led) disappears instead of repeating its last value forever. */
export class PullMetricReader extends MetricReader {
  constructor() {
    super({
      aggregationTemporalitySelector: (t) =>
        t === InstrumentType.OBSERVABLE_GAUGE ? AggregationTemporality.DELTA : AggregationTemporality.CUMULATIVE,
    });
  }
  protected override async onForceFlush(): Promise<void> {}
  protected override async onShutdown(): Promise<void> {}
}

/** What the gauges read from one instance at collection time. */
export interface GaugeSource {
  holderId: string;
  /** Labels besides holder_id on every point of this source (`partition` with more than one partition). */
  labels?: Attributes;
  // The executor's gauges (absent from the instance-wide source when each partition has its own source).
  /** Current leadership (epoch) or null when following; remaining ms before the local deadline. */
  leadership?: () => { epoch: number; remainingMs: number } | null;
  scheduleSize?: () => number;
  oldestDueLagMs?: () => number;
  /** Last pause flag this instance read from SQL (null = not read yet: only leaders read it). */
  paused?: () => boolean | null;
  /** Provider protection as this instance's executor sees it (absent in apps without an executor guard). */
  providerGuard?: () => GuardGauges;
}

/** The part of the provider guard's state the gauges read (ProviderGuard.state() gives more): declared here so
 *  the metrics import nothing of ours. */
export interface GuardGauges {
  breaker: 'closed' | 'half_open' | 'open';
  pausedForMs: number;
  /** Calls sent, not answered yet. */
  sent: number;
}

const MS_BUCKETS = [1, 2, 5, 10, 25, 50, 100, 250, 500, 1_000, 2_500, 5_000, 10_000, 30_000, 60_000];

function instruments(meter: Meter) {
  const counter = (name: string, description: string) => meter.createCounter(name, { description });
  const histogram = (name: string, description: string) =>
    meter.createHistogram(name, { description, unit: 'ms', advice: { explicitBucketBoundaries: MS_BUCKETS } });
  return {
    leaderAcquired: counter('leader_acquired_total', 'Leases acquired by this instance (each is a new epoch)'),
    leadershipLost: counter('leadership_lost_total', 'Leaderships lost, by reason (released, renew_refused, renew_error, local_deadline, fence_failed, sql_error)'),
    acquireAttempts: counter('acquire_attempts_total', 'Lease acquire statements sent, by result (acquired, held, error)'),
    attempts: counter('attempts_total', 'Attempts closed, by outcome (succeeded, retryable_error, permanent_error, aborted, abandoned)'),
    attemptsStarted: counter('attempts_started_total', 'Attempts started (fenced start committed)'),
    intentsSubmitted: counter('intents_submitted_total', 'POST /intents results, by outcome (created, replayed, conflict, invalid)'),
    completionsUnwritable: counter('completions_unwritable_total', 'Completions dropped because the database refuses them every time (completion_unwritable)'),
    blockedNotLeader: counter('execution_blocked_not_leader_total', 'Provider calls not sent because the gate found this instance no longer leading'),
    blockedStaleControl: counter('execution_blocked_stale_control_total', 'Starts and provider calls held back because no control read was answered within one refresh interval (control_read_late; a failed read at the send), by step (start, send)'),
    purged: counter('retention_purged_rows_total', 'Rows deleted by the retention purge, by table (intents, attempts)'),
    maintenanceFailures: counter('maintenance_failures_total', 'Leader maintenance runs that failed (then backed off), by task (retention)'),
    breakerTransitions: counter('provider_breaker_transitions_total', 'Provider circuit breaker state changes, by new state (open, half_open, closed)'),
    changeStepsFailed: counter('partition_change_failed_steps_total', 'Partition-count changer steps that failed (this instance\'s changer)'),
    changeStuck: counter('partition_change_stuck_steps_total', 'Failed changer steps at or past PARTITION_CHANGE_STUCK_STEPS in a row: the change is stuck (alert on any increase)'),
    handovers: counter('handovers_completed_total', 'Handover requests this instance completed as leader (drained, then released)'),
    acquireLatency: histogram('acquire_latency_ms', 'Lease acquire statement round trip'),
    renewLatency: histogram('renew_latency_ms', 'Lease renew statement round trip'),
    refreshLatency: histogram('refresh_latency_ms', 'Schedule read round trip, by kind (refresh page, rebuild page)'),
    attemptDuration: histogram('attempt_duration_ms', 'Provider call duration of closed attempts, by outcome'),
    tickDuration: histogram('tick_duration_ms', 'Executor tick duration, by role'),
  };
}

type Instruments = ReturnType<typeof instruments>;

/** The label values each labelled counter can take (kept in step with the code that records them). */
const KNOWN_LABELS = (i: Instruments): [Counter, string, readonly string[]][] => [
  [i.leadershipLost, 'reason', ['released', 'renew_refused', 'renew_error', 'local_deadline', 'fence_failed', 'sql_error']],
  [i.acquireAttempts, 'result', ['acquired', 'held', 'error']],
  [i.blockedStaleControl, 'step', ['start', 'send']],
  [i.attempts, 'outcome', ['succeeded', 'retryable_error', 'permanent_error', 'aborted', 'abandoned']],
  [i.intentsSubmitted, 'outcome', ['created', 'replayed', 'conflict', 'invalid']],
  [i.purged, 'table', ['intents', 'attempts']],
  [i.maintenanceFailures, 'task', ['retention']],
  [i.breakerTransitions, 'state', ['open', 'half_open', 'closed']],
];

export class MetricsRegistry {
  private readonly ins: Instruments;
  private readonly sources = new Set<GaugeSource>();

  /** `provider` must have `reader` registered (standalone() does both). */
  constructor(provider: MeterProvider, readonly reader: PullMetricReader, private readonly owned?: { shutdown(): Promise<unknown> }) {
    const meter = provider.getMeter('submission-manager', appVersion());
    this.ins = instruments(meter);
    const gauge = (name: string, description: string, read: (s: GaugeSource) => number | null) =>
      meter.createObservableGauge(name, { description }).addCallback((r: ObservableResult) => {
        for (const s of this.sources) {
          const v = read(s);
          if (v !== null) r.observe(v, { holder_id: s.holderId, ...s.labels });
        }
      });
    gauge('is_leader', '1 while this instance leads (before its local deadline), else 0', (s) => (s.leadership ? (s.leadership() ? 1 : 0) : null));
    gauge('leader_epoch', 'Epoch this instance leads with (absent while following)', (s) => s.leadership?.()?.epoch ?? null);
    gauge('lease_remaining_ms', 'Milliseconds before the local lease deadline (0 while following)', (s) => (s.leadership ? s.leadership()?.remainingMs ?? 0 : null));
    gauge('schedule_size', 'Intents in the leader schedule (0 on followers)', (s) => s.scheduleSize?.() ?? null);
    gauge('schedule_oldest_due_lag_ms', 'How far the oldest due intent is behind database time (0 = nothing overdue)', (s) => s.oldestDueLagMs?.() ?? null);
    const BREAKER = { closed: 0, half_open: 1, open: 2 } as const;
    gauge('provider_breaker_state', 'Provider circuit breaker: 0 closed, 1 half-open (one probe), 2 open (sending nothing)',
      (s) => (s.providerGuard ? BREAKER[s.providerGuard().breaker] : null));
    gauge('provider_paused_ms', 'Milliseconds left of a provider-wide Retry-After pause (0 when none)', (s) => s.providerGuard?.().pausedForMs ?? null);
    gauge('provider_calls_in_flight', 'Provider calls in flight (sent, not answered yet) on this instance', (s) => s.providerGuard?.().sent ?? null);
    gauge('execution_paused', '1 when a pause (the cluster\'s or the partition\'s own) held at the last read (leaders read it)', (s) => {
      const p = s.paused?.() ?? null;
      return p === null ? null : p ? 1 : 0;
    });
  }

  /** A registry with its own MeterProvider and pull reader (the default: one per app). */
  static standalone(): MetricsRegistry {
    const reader = new PullMetricReader();
    const provider = new SdkMeterProvider({ readers: [reader] });
    return new MetricsRegistry(provider, reader, provider);
  }

  /** Instruments bound to one instance, and to `labels` besides holder_id (e.g. `{ partition: '2' }`). */
  forInstance(holderId: string, labels: Attributes = {}): AppMetrics {
    return new AppMetrics(this.ins, holderId, labels, (s) => {
      this.sources.add(s);
      return () => this.sources.delete(s);
    });
  }

  /** Collect now and render as Prometheus text. */
  async renderPrometheus(): Promise<string> {
    const { resourceMetrics } = await this.reader.collect();
    return renderPrometheus(resourceMetrics);
  }

  async shutdown(): Promise<void> {
    await this.owned?.shutdown();
  }
}

/** The recording side one instance uses (never throws: a metric must not change an outcome). */
export class AppMetrics {
  private readonly base: Attributes;
  private readonly submitAttrs = new Map<string, Attributes>();

  constructor(private readonly i: Instruments, readonly holderId: string, private readonly labels: Attributes,
    private readonly register: (s: GaugeSource) => () => void) {
    this.base = { holder_id: holderId, ...labels };
    // Every counter series for its known label values exists from the start at 0 (rates and absence alerts need
    // a zero, not a missing series).
    for (const c of [i.leaderAcquired, i.blockedNotLeader, i.attemptsStarted, i.handovers, i.completionsUnwritable, i.changeStepsFailed, i.changeStuck]) c.add(0, this.base);
    for (const [c, key, values] of KNOWN_LABELS(i)) for (const v of values) c.add(0, { ...this.base, [key]: v });
  }

  private add(c: Counter, n: number, attrs: Attributes = {}): void {
    if (n > 0) c.add(n, { ...this.base, ...attrs });
  }

  private record(h: Histogram, ms: number, attrs: Attributes = {}): void {
    if (Number.isFinite(ms) && ms >= 0) h.record(ms, { ...this.base, ...attrs });
  }

  gauges(source: Omit<GaugeSource, 'holderId'>): () => void {
    return this.register({ ...source, holderId: this.holderId, labels: this.labels });
  }

  acquireAttempt(result: 'acquired' | 'held' | 'error', ms: number): void {
    this.add(this.i.acquireAttempts, 1, { result });
    this.record(this.i.acquireLatency, ms, { result });
  }
  renewed(result: 'renewed' | 'refused' | 'error', ms: number): void {
    this.record(this.i.renewLatency, ms, { result });
  }
  leaderAcquired(): void {
    this.add(this.i.leaderAcquired, 1);
  }
  leadershipLost(reason: string): void {
    this.add(this.i.leadershipLost, 1, { reason });
  }
  attemptsStarted(n: number): void {
    this.add(this.i.attemptsStarted, n);
  }
  attemptClosed(outcome: string, durationMs: number | null): void {
    this.add(this.i.attempts, 1, { outcome });
    if (durationMs !== null && outcome !== 'aborted') this.record(this.i.attemptDuration, durationMs, { outcome });
  }
  attemptsAbandoned(n: number): void {
    this.add(this.i.attempts, n, { outcome: 'abandoned' });
  }
  blockedNotLeader(): void {
    this.add(this.i.blockedNotLeader, 1);
  }
  blockedStaleControl(step: 'start' | 'send'): void {
    this.add(this.i.blockedStaleControl, 1, { step });
  }
  /** Called on every POST /intents: one attribute set per outcome (a handful), built once. */
  intentSubmitted(outcome: string): void {
    let attrs = this.submitAttrs.get(outcome);
    if (attrs === undefined) this.submitAttrs.set(outcome, (attrs = { ...this.base, outcome }));
    this.i.intentsSubmitted.add(1, attrs);
  }
  scheduleRead(kind: 'refresh' | 'rebuild', ms: number): void {
    this.record(this.i.refreshLatency, ms, { kind });
  }
  tick(role: string, ms: number): void {
    this.record(this.i.tickDuration, ms, { role });
  }
  breakerChanged(state: string): void {
    this.add(this.i.breakerTransitions, 1, { state });
  }
  completionUnwritable(): void {
    this.add(this.i.completionsUnwritable, 1);
  }
  /** A partition changer's step failed; `stuck`: PARTITION_CHANGE_STUCK_STEPS in a row or more. */
  partitionChangeStepFailed(stuck: boolean): void {
    this.add(this.i.changeStepsFailed, 1);
    if (stuck) this.add(this.i.changeStuck, 1);
  }
  handoverCompleted(): void {
    this.add(this.i.handovers, 1);
  }
  maintenanceFailed(task: string): void {
    this.add(this.i.maintenanceFailures, 1, { task });
  }
  purged(intents: number, attempts: number): void {
    this.add(this.i.purged, intents, { table: 'intents' });
    this.add(this.i.purged, attempts, { table: 'attempts' });
  }
}
