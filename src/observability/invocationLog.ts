// Routes pino records to the Azure Functions InvocationContext of the invocation that emitted them (so
// logs correlate with invocations in Application Insights), and to stdout outside any invocation.
import { AsyncLocalStorage } from 'node:async_hooks';
import type { DestinationStream } from 'pino';

/** The subset of InvocationContext we log through. */
export interface InvocationLogSink {
  trace(...args: unknown[]): void;
  debug(...args: unknown[]): void;
  info(...args: unknown[]): void;
  warn(...args: unknown[]): void;
  error(...args: unknown[]): void;
}

const sinks = new AsyncLocalStorage<InvocationLogSink>();

/** Run `fn` with pino records routed to `sink` (an InvocationContext). */
export function withInvocationLog<T>(sink: InvocationLogSink, fn: () => T): T {
  return sinks.run(sink, fn);
}

const LEVEL = /"level":"(\w+)"/;

export function routingDestination(fallback: { write(s: string): unknown } = process.stdout): DestinationStream {
  return {
    write(line: string) {
      const sink = sinks.getStore();
      if (!sink) return void fallback.write(line);
      const text = line.endsWith('\n') ? line.slice(0, -1) : line;
      switch (LEVEL.exec(text)?.[1]) {
        case 'trace': return sink.trace(text);
        case 'debug': return sink.debug(text);
        case 'warn': return sink.warn(text);
        case 'error':
        case 'fatal': return sink.error(text);
        default: return sink.info(text);
      }
    },
  };
}
