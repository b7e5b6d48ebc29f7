// HTTP provider: POST {intentId, attemptNo, payload} with Idempotency-Key (the intent id, the same across
// attempts, so a deduplicating provider sees one effect), X-Lease-Name (the cluster), X-Lease-Epoch, X-Lease-Partition and
// X-Layout-Generation (so a provider that keeps the highest generation and the highest epoch per partition can reject a stale leader, also
// across changes of the partition count: docs/provider-fencing.md). Guarantees: one request per call (never retried in place: POSTs
// are not idempotent to undici, so none is pipelined or replayed), a hard per-call timeout that destroys the
// connection of a call still running, and keep-alive connections, one undici Pool per origin (the
// executor's concurrency bounds the calls in flight; `connections` bounds the sockets per origin).
// Credentials in the URL (`https://user:pass@host/…`) are sent as Basic authorization, as node:http did.
// undici's dispatch API is used directly (no streams, no AbortSignal); see docs/benchmarks.md (issue 15).
import { Pool, type Dispatcher } from 'undici';
import { injectTraceHeaders } from '../observability/tracing.js';
import { PROVIDER_POOL_CONNECTIONS } from '../limits.js';
import { type Provider, type ProviderRequest, type ProviderResult, type SubmitBounds } from './provider.js';
import { parseRetryAfter } from './retryPolicy.js';

const MAX_ERROR_BODY = 512;
/** Distinct target URLs remembered parsed (contracts may name their own URL). */
const MAX_TARGETS = 1_000;

interface Target {
  origin: string;
  path: string;
  /** `Basic …` from the URL's user info, or null. */
  authorization: string | null;
  pool: Pool;
}

export interface HttpProviderOptions {
  /** Sockets per origin at most (default PROVIDER_POOL_CONNECTIONS). */
  connections?: number;
  /** The cluster (the base LEASE_NAME), sent as X-Lease-Name: epochs and generations are per cluster, so a provider
   *  serving several clusters keeps a fence per cluster. Absent: no header. */
  leaseName?: string;
}

export class HttpProvider implements Provider {
  private readonly pools = new Map<string, Pool>();
  private readonly targets = new Map<string, Target>();
  private readonly connections: number;
  private readonly leaseName: string | undefined;

  constructor(private readonly defaultUrl: string | null, opts: HttpProviderOptions = {}) {
    this.connections = opts.connections ?? PROVIDER_POOL_CONNECTIONS;
    this.leaseName = opts.leaseName;
  }

  submit(req: ProviderRequest, bounds: SubmitBounds): Promise<ProviderResult> {
    const target = req.url ?? this.defaultUrl;
    if (!target) return Promise.resolve({ kind: 'retryable', httpStatus: null, error: 'no provider URL configured (PROVIDER_URL)', retryAfterMs: null });
    let url: Target;
    try {
      url = this.target(target);
    } catch (e) {
      return Promise.resolve({ kind: 'retryable', httpStatus: null, error: `internal error: ${(e as Error).message}`, retryAfterMs: null });
    }
    const body = JSON.stringify({ intentId: req.intentId, attemptNo: req.attemptNo, payload: req.payload });
    const headers: Record<string, string> = {
      'content-type': 'application/json',
      'content-length': String(Buffer.byteLength(body)),
      'idempotency-key': req.intentId,
      'x-lease-epoch': String(req.leaseEpoch),
      'x-lease-partition': String(req.partition ?? 0),
      'x-attempt-no': String(req.attemptNo),
    };
    if (req.layoutGeneration !== undefined) headers['x-layout-generation'] = String(req.layoutGeneration);
    if (this.leaseName !== undefined) headers['x-lease-name'] = this.leaseName;
    if (url.authorization) headers.authorization = url.authorization;
    injectTraceHeaders(headers); // W3C traceparent of the attempt span, when one is active
    return new Promise<ProviderResult>((resolve) => {
      const call = new Call(resolve, bounds.timeoutMs, bounds.sendWithinMs ?? bounds.timeoutMs);
      try {
        url.pool.dispatch({ origin: url.origin, path: url.path, method: 'POST', headers, body, idempotent: false }, call);
      } catch (e) {
        call.fail(e as Error);
      }
    });
  }

  /** The parsed target and its origin's pool; parsed once per distinct URL (bounded: cleared when full). */
  private target(href: string): Target {
    let t = this.targets.get(href);
    if (!t) {
      const u = new URL(href);
      if (this.targets.size >= MAX_TARGETS) this.targets.clear();
      const auth = u.username || u.password ? `${decodeURIComponent(u.username)}:${decodeURIComponent(u.password)}` : null;
      t = { origin: u.origin, path: u.pathname + u.search, authorization: auth && `Basic ${Buffer.from(auth).toString('base64')}`,
        pool: this.pool(u.origin) };
      this.targets.set(href, t);
    }
    return t;
  }

  private pool(origin: string): Pool {
    let p = this.pools.get(origin);
    if (!p) {
      // Our own timer bounds each call (Call); undici's headers/body timeouts are off.
      p = new Pool(origin, { connections: this.connections, pipelining: 1, headersTimeout: 0, bodyTimeout: 0 });
      this.pools.set(origin, p);
    }
    return p;
  }

  close(): void {
    for (const p of this.pools.values()) void p.destroy().catch(() => {});
    this.pools.clear();
    this.targets.clear();
  }
}

/** One call's undici handler: settles exactly once (result, error or timeout); a timeout aborts the request,
 *  which destroys its connection if it is running (and drops it if it is still queued). */
class Call implements Dispatcher.DispatchHandler {
  private settled = false;
  /** The timer has fired: the request is no longer written; the call times out unless an answer read meanwhile won. */
  private timerFired = false;
  private controller: Dispatcher.DispatchController | null = null;
  private readonly timer: NodeJS.Timeout;
  private status = 0;
  private retryAfter: string | string[] | undefined;
  private chunks: Buffer[] = [];
  private size = 0;
  private readonly sendBy: number;

  constructor(private readonly resolve: (r: ProviderResult) => void, private readonly timeoutMs: number, sendWithinMs: number) {
    this.timer = setTimeout(() => this.timeout(), Math.max(1, timeoutMs));
    this.sendBy = performance.now() + sendWithinMs;
  }

  private finish(r: ProviderResult): void {
    if (this.settled) return;
    this.settled = true;
    clearTimeout(this.timer);
    this.resolve(r);
  }

  /** The timer fired. Timers run apart from the I/O phase of the event loop: after a stall (a long GC, a starved or
   *  stopped process) the timer can fire while an answer that arrived before the deadline waits unread on the socket.
   *  The decision waits for that I/O (setImmediate runs after the next poll phase): an answer read by then wins;
   *  a call still unanswered times out. */
  private timeout(): void {
    this.timerFired = true;
    setImmediate(() => this.timedOut());
  }

  private timedOut(): void {
    if (this.settled) return;
    this.finish({ kind: 'retryable', httpStatus: null, error: `timeout after ${this.timeoutMs} ms`, retryAfterMs: null });
    this.controller?.abort(new Error('provider call timed out'));
  }

  fail(e: Error): void {
    const prefix = this.status ? 'response error' : 'connection error';
    this.finish({ kind: 'retryable', httpStatus: null, error: `${prefix}: ${describe(e)}`, retryAfterMs: null });
  }

  /** Called by undici just before it writes the request; an abort here means nothing is written. After a stall
   *  (SIGSTOP, a long GC) the connect completes in the I/O phase before the timeout timer runs, so the send-by
   *  bound is checked here, not left to the timer. */
  onRequestStart(controller: Dispatcher.DispatchController): void {
    this.controller = controller;
    if (this.timerFired) return this.timedOut(); // not written once its timer has fired
    const late = performance.now() - this.sendBy;
    if (late >= 0) {
      this.finish({ kind: 'notSent', httpStatus: null, error: `not sent: ${Math.round(late)} ms past its send-by bound` });
      controller.abort(new Error('provider call not sent: past its send-by bound'));
    }
  }

  onResponseStart(_c: Dispatcher.DispatchController, statusCode: number, headers: Record<string, string | string[] | undefined>): void {
    if (statusCode < 200) return; // 1xx informational: the final answer follows
    this.status = statusCode;
    this.retryAfter = headers['retry-after'];
  }

  onResponseData(_c: Dispatcher.DispatchController, chunk: Buffer): void {
    if (this.size < MAX_ERROR_BODY) this.chunks.push(chunk); // the rest is read and dropped (keep-alive)
    this.size += chunk.length;
  }

  onResponseEnd(): void {
    const text = this.size === 0 || (this.status >= 200 && this.status < 300) ? ''
      : Buffer.concat(this.chunks).toString('utf8').slice(0, MAX_ERROR_BODY);
    this.chunks = [];
    this.finish(classify(this.status, this.retryAfter, text));
  }

  onResponseError(_c: Dispatcher.DispatchController, e: Error): void {
    this.fail(e);
  }
}

/** The error's message with its system code (undici wraps e.g. ECONNREFUSED in `cause`). */
function describe(e: Error): string {
  const cause = (e as { cause?: { code?: string; message?: string } }).cause;
  const code = (e as { code?: string }).code;
  const inner = cause?.message && !e.message.includes(cause.message) ? ` (${cause.message})` : '';
  return `${e.message || code || 'error'}${inner}`;
}

/** 2xx success; 408/429/5xx retryable (Retry-After honoured); other statuses permanent. */
export function classify(status: number, retryAfter: string | string[] | undefined, bodyText: string): ProviderResult {
  if (status >= 200 && status < 300) return { kind: 'success', httpStatus: status };
  // NUL becomes U+FFFD: PostgreSQL text cannot hold it, and a completion the database always refuses would never be
  // written (the lease row is kept while it is unwritten, and it fails every batch it is in).
  const body = bodyText.replace(/\u0000/g, '\uFFFD').replace(/\s+/g, ' ').trim();
  const error = `HTTP ${status}${body ? `: ${body}` : ''}`.slice(0, MAX_ERROR_BODY);
  if (status === 408 || status === 429 || status >= 500) {
    const ra = Array.isArray(retryAfter) ? retryAfter[0] : retryAfter;
    return { kind: 'retryable', httpStatus: status, error, retryAfterMs: parseRetryAfter(ra) };
  }
  return { kind: 'permanent', httpStatus: status, error };
}
