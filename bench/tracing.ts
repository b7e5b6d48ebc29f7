// Cost of the tracing hooks when tracing is off (no tracer provider: the OpenTelemetry API's no-op tracer),
// per call, against the same work without them; and, for scale, with an in-memory tracer provider.
// Run: node dist/bench/tracing.js (part of `npm run bench`). Prints a table and a `ratios:` line.
import { trace } from '@opentelemetry/api';
import { activeTraceparent, injectTraceHeaders, withAttemptSpan, withSubmitSpan } from '../src/observability/tracing.js';

const N = 50_000;
const headers = { get: (_: string) => null };
const work = async () => 1;

async function nsPerOp(fn: () => Promise<unknown>, n = N): Promise<number> {
  for (let i = 0; i < 5_000; i++) await fn(); // warm-up
  const best: number[] = [];
  for (let round = 0; round < 3; round++) {
    const t = process.hrtime.bigint();
    for (let i = 0; i < n; i++) await fn();
    best.push(Number(process.hrtime.bigint() - t) / n);
  }
  return Math.min(...best);
}

const hooks = async () => {
  await withSubmitSpan(headers, async () => {
    activeTraceparent();
    return work();
  });
  await withAttemptSpan({ intentId: 'x', attemptNo: 1, leaseEpoch: 1 }, null, async () => {
    injectTraceHeaders({});
    return work();
  }, () => ({ kind: 'success', httpStatus: 200 }));
};
const bare = async () => {
  await work();
  await work();
};

const base = await nsPerOp(bare);
const off = await nsPerOp(hooks);
const { NodeTracerProvider } = await import('@opentelemetry/sdk-trace-node');
const { InMemorySpanExporter, SimpleSpanProcessor } = await import('@opentelemetry/sdk-trace-base');
const exporter = new InMemorySpanExporter();
const provider = new NodeTracerProvider({ spanProcessors: [new SimpleSpanProcessor(exporter)] });
provider.register();
let spans = 0;
const on = await nsPerOp(async () => {
  await hooks();
  if (++spans % 1_000 === 0) exporter.reset();
}, N / 10);
await provider.shutdown();
trace.disable();

console.log('\n## Tracing hooks (one submit span + one attempt span + traceparent read/inject), per intent');
console.log('| | ns per intent | added vs. no hooks |');
console.log('|---|---:|---:|');
console.log(`| no hooks | ${base.toFixed(0)} | — |`);
console.log(`| tracing off (no-op tracer) | ${off.toFixed(0)} | ${(off - base).toFixed(0)} ns |`);
console.log(`| tracing on (in-memory exporter) | ${on.toFixed(0)} | ${(on - base).toFixed(0)} ns |`);
console.log(`ratios: off adds ${((off - base) / 1000).toFixed(2)} µs per intent; on adds ${((on - base) / 1000).toFixed(2)} µs`);
