// Tracing with an in-memory exporter (our tracer provider registered for this file): the submit span (child
// of the caller's traceparent) is stored in the intent's contract; an attempt span made from that contract is
// linked to it and its traceparent reaches the provider over real HTTP. Without a provider (tracing off),
// nothing is stored and no header is sent.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { trace } from '@opentelemetry/api';
import { NodeTracerProvider } from '@opentelemetry/sdk-trace-node';
import { InMemorySpanExporter, SimpleSpanProcessor } from '@opentelemetry/sdk-trace-base';
import { createApp, type App } from '../../src/app.js';
import { silentLogger } from '../../src/observability/logger.js';
import { withAttemptSpan } from '../../src/observability/tracing.js';
import { HttpProvider } from '../../src/provider/httpProvider.js';
import { jsonBody, request, testConfig } from '../support/apps.js';
import { startRecordingProvider, type RecordingProvider } from '../support/recordingProvider.js';

const exporter = new InMemorySpanExporter();
let provider: NodeTracerProvider;
let rec: RecordingProvider;
let app: App;
const CALLER_TRACE = '4bf92f3577b34da6a3ce929d0e0e4736';
const CALLER_SPAN = '00f067aa0ba902b7';

async function submitTraced(headers: Record<string, string>) {
  const b = jsonBody({ payload: { order: 1 } });
  const r = await app.handlers.postIntent(request('POST', '/api/intents', b.body, { ...b.headers, ...headers }));
  expect(r.status).toBe(201);
  return (JSON.parse(r.body!) as { intentId: string }).intentId;
}

async function attempt(intentId: string, http: HttpProvider) {
  const row = (await app.stores.intents.get(intentId))!;
  return withAttemptSpan({ intentId, attemptNo: 1, leaseEpoch: 7 }, row.contract.trace?.traceparent,
    () => http.submit({ intentId, attemptNo: 1, leaseEpoch: 7, payload: row.contract.payload, url: rec.url }, { timeoutMs: 2_000 }), (r) => r);
}

describe('tracing on (in-memory exporter)', () => {
  beforeAll(async () => {
    provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
    provider.register();
    rec = await startRecordingProvider(() => ({ status: 200 }));
    app = await createApp({ config: testConfig(rec.url), logger: silentLogger });
  });
  afterAll(async () => {
    await app?.close();
    await rec?.close();
    await provider?.shutdown();
    trace.disable();
  });

  it('submit span: a child of the caller\'s traceparent; its context is stored in the intent', async () => {
    exporter.reset();
    const id = await submitTraced({ traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` });
    const [span] = exporter.getFinishedSpans().filter((s) => s.name === 'intent.submit');
    expect(span).toBeDefined();
    expect(span!.spanContext().traceId).toBe(CALLER_TRACE);
    expect(span!.parentSpanContext?.spanId).toBe(CALLER_SPAN);
    expect(span!.attributes).toMatchObject({ 'intent.id': id, 'submit.outcome': 'created' });
    const stored = (await app.stores.intents.get(id))!.contract.trace;
    expect(stored).toEqual({ traceparent: `00-${CALLER_TRACE}-${span!.spanContext().spanId}-01` });
  });

  it('attempt span: a new trace linked to the submit span; the provider receives its traceparent', async () => {
    exporter.reset();
    const id = await submitTraced({});
    const submit = exporter.getFinishedSpans().find((s) => s.name === 'intent.submit')!;
    const http = new HttpProvider(null);
    try {
      expect((await attempt(id, http)).kind).toBe('success');
    } finally {
      http.close();
    }
    const att = exporter.getFinishedSpans().find((s) => s.name === 'intent.attempt')!;
    expect(att.links.map((l) => [l.context.traceId, l.context.spanId])).toEqual([[submit.spanContext().traceId, submit.spanContext().spanId]]);
    expect(att.spanContext().traceId).not.toBe(submit.spanContext().traceId);
    expect(att.attributes).toMatchObject({ 'intent.id': id, 'intent.attempt_no': 1, 'lease.epoch': 7, 'attempt.outcome': 'success', 'http.response.status_code': 200 });
    const call = rec.calls.find((c) => c.intentId === id)!;
    expect(call.traceparent).toBe(`00-${att.spanContext().traceId}-${att.spanContext().spanId}-01`);
  });

  it('end to end: the leader\'s attempt span is linked to the submit span, and the provider sees its traceparent', async () => {
    exporter.reset();
    const id = await submitTraced({ traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` });
    for (let i = 0; i < 20 && !rec.calls.some((c) => c.intentId === id); i++) await app.executor.tick(400);
    const submit = exporter.getFinishedSpans().find((s) => s.name === 'intent.submit')!;
    const att = exporter.getFinishedSpans().find((s) => s.name === 'intent.attempt' && s.attributes['intent.id'] === id)!;
    expect(att).toBeDefined();
    expect(att.links[0]!.context).toMatchObject({ traceId: CALLER_TRACE, spanId: submit.spanContext().spanId });
    expect(att.attributes).toMatchObject({ 'intent.attempt_no': 1, 'attempt.outcome': 'success' });
    expect(rec.calls.find((c) => c.intentId === id)!.traceparent).toBe(`00-${att.spanContext().traceId}-${att.spanContext().spanId}-01`);
  });

  it('an attempt of an untraced submit still gets a span (no link) and sends a traceparent', async () => {
    exporter.reset();
    const id = await submitTraced({});
    const row = (await app.stores.intents.get(id))!;
    const http = new HttpProvider(null);
    try {
      await withAttemptSpan({ intentId: id, attemptNo: 1, leaseEpoch: 7 }, 'garbage',
        () => http.submit({ intentId: id, attemptNo: 1, leaseEpoch: 7, payload: row.contract.payload, url: rec.url }, { timeoutMs: 2_000 }), (r) => r);
    } finally {
      http.close();
    }
    expect(exporter.getFinishedSpans().find((s) => s.name === 'intent.attempt')!.links).toEqual([]);
    expect(rec.calls.find((c) => c.intentId === id)!.traceparent).toMatch(/^00-[0-9a-f]{32}-[0-9a-f]{16}-01$/);
  });
});

describe('tracing off (no tracer provider)', () => {
  beforeAll(async () => {
    rec = await startRecordingProvider(() => ({ status: 200 }));
    app = await createApp({ config: testConfig(rec.url), logger: silentLogger });
  });
  afterAll(async () => {
    await app?.close();
    await rec?.close();
  });

  it('stores no trace context and sends no traceparent', async () => {
    const id = await submitTraced({ traceparent: `00-${CALLER_TRACE}-${CALLER_SPAN}-01` });
    expect((await app.stores.intents.get(id))!.contract.trace).toBeUndefined();
    const http = new HttpProvider(null);
    try {
      await attempt(id, http);
    } finally {
      http.close();
    }
    expect(rec.calls.find((c) => c.intentId === id)!.traceparent).toBeNull();
  });
});
