// Tracing: an OpenTelemetry span per submit (`intent.submit`) and per attempt (`intent.attempt`, linked to its
// submit through the W3C traceparent stored in the intent's contract), and a `traceparent` header on every
// provider call made inside an attempt span. Spans go to whatever tracer provider is global: Azure Monitor's
// (useAzureMonitor installs one when APPLICATIONINSIGHTS_CONNECTION_STRING is set), or ours from
// installTracing() (TRACING=console|otlp). With neither, the API's no-op tracer: nothing is recorded, no
// traceparent is stored, and the cost is a few non-recording calls (bench/tracing.ts measures it).
import {
  ROOT_CONTEXT, SpanKind, SpanStatusCode, context, propagation, trace, type Link, type Span,
} from '@opentelemetry/api';

const TRACER = 'submission-manager';
// One tracer per global provider (getTracer allocates a new proxy on every call); re-fetched when the global
// provider object changes (trace.disable() + a new registration, as tests do).
let cached: { provider: unknown; tracer: ReturnType<typeof trace.getTracer> } | null = null;
const tracer = () => {
  const provider = trace.getTracerProvider();
  if (cached?.provider !== provider) cached = { provider, tracer: provider.getTracer(TRACER) };
  return cached.tracer;
};

export type TracingMode = 'off' | 'console' | 'otlp';

/** Header-like getter (ApiRequest.headers, node IncomingHttpHeaders via a wrapper). */
export interface HeaderSource { get(name: string): string | null }

const getter = {
  keys: () => ['traceparent', 'tracestate'],
  get: (h: HeaderSource, key: string) => h.get(key) ?? undefined,
};

/** The W3C traceparent of the active span when it is recording (sampled); null otherwise (tracing off). */
export function activeTraceparent(): string | null {
  const span = trace.getActiveSpan();
  if (!span?.isRecording()) return null;
  const carrier: Record<string, string> = {};
  propagation.inject(context.active(), carrier);
  return carrier.traceparent ?? null;
}

/** Run `fn` in an `intent.submit` span, a child of the caller's traceparent header when it sends one. */
export function withSubmitSpan<T>(headers: HeaderSource, fn: (span: Span) => Promise<T>): Promise<T> {
  const parent = headers.get('traceparent') ? propagation.extract(ROOT_CONTEXT, headers, getter) : context.active();
  return tracer().startActiveSpan('intent.submit', { kind: SpanKind.SERVER }, parent, async (span) => {
    try {
      return await fn(span);
    } catch (e) {
      span.recordException(e as Error);
      span.setStatus({ code: SpanStatusCode.ERROR });
      throw e;
    } finally {
      span.end();
    }
  });
}

/** A link to the submit span from its stored traceparent (none when the submit was not traced or it is malformed). */
export function submitLink(traceparent: string | null | undefined): Link[] {
  if (!traceparent) return [];
  const ctx = trace.getSpanContext(propagation.extract(ROOT_CONTEXT, { traceparent }));
  return ctx && trace.isSpanContextValid(ctx) ? [{ context: ctx, attributes: { 'link.kind': 'submit' } }] : [];
}

export interface AttemptInfo { intentId: string; attemptNo: number; leaseEpoch: number }

/** Run one provider call in an `intent.attempt` span (a new trace, linked to the submit); `fn` sees it active,
 *  so the provider adapter's `injectTraceHeaders` sends its traceparent. `outcome` names the result. */
export function withAttemptSpan<T>(a: AttemptInfo, submitTraceparent: string | null | undefined,
  fn: () => Promise<T>, outcome: (r: T) => { kind: string; httpStatus: number | null }): Promise<T> {
  return tracer().startActiveSpan('intent.attempt', {
    kind: SpanKind.CLIENT, root: true, links: submitLink(submitTraceparent),
    attributes: { 'intent.id': a.intentId, 'intent.attempt_no': a.attemptNo, 'lease.epoch': a.leaseEpoch },
  }, ROOT_CONTEXT, async (span) => {
    try {
      const r = await fn();
      const o = outcome(r);
      span.setAttribute('attempt.outcome', o.kind);
      if (o.httpStatus !== null) span.setAttribute('http.response.status_code', o.httpStatus);
      if (o.kind !== 'success') span.setStatus({ code: SpanStatusCode.ERROR, message: o.kind });
      return r;
    } finally {
      span.end();
    }
  });
}

/** Add traceparent (and tracestate) of the active span to outgoing provider headers; no-op without one. */
export function injectTraceHeaders(headers: Record<string, string>): void {
  propagation.inject(context.active(), headers);
}

let installed: Promise<void> | null = null;

/** Install our tracer provider for TRACING=console|otlp (once per process; not with Azure Monitor, whose
 *  distro installs its own). `otlpUrl` null → the exporter's default (OTEL_EXPORTER_OTLP_* or localhost:4318). */
export function installTracing(mode: TracingMode, otlpUrl: string | null): Promise<void> {
  if (mode === 'off') return Promise.resolve();
  installed ??= (async () => {
    const { NodeTracerProvider } = await import('@opentelemetry/sdk-trace-node');
    const base = await import('@opentelemetry/sdk-trace-base');
    const exporter = mode === 'console'
      ? new base.ConsoleSpanExporter()
      : new (await import('@opentelemetry/exporter-trace-otlp-http')).OTLPTraceExporter(otlpUrl ? { url: otlpUrl } : {});
    const processor = mode === 'console' ? new base.SimpleSpanProcessor(exporter) : new base.BatchSpanProcessor(exporter);
    new NodeTracerProvider({ spanProcessors: [processor] }).register();
  })();
  return installed;
}
