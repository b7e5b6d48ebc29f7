// The demo provider the local host mounts when PROVIDER_URL is unset, so a new user sees intents succeed,
// retry and fail with zero configuration. A node:http server on an ephemeral loopback port:
// - answers after DEMO_PROVIDER_LATENCY_MS;
// - payload `"fail": "permanent"` → 422 (permanent: the intent fails at once);
//   payload `"fail": "retryable"` → always 503 (the intent retries until its max attempts, then fails);
// - otherwise 503 + Retry-After: 1 with probability DEMO_PROVIDER_FAILURE_RATE, else 200;
// - deduplicates by Idempotency-Key: a repeated call for an intent that already succeeded answers 200
//   with `"duplicate": true` and is not counted twice;
// - with DEMO_PROVIDER_FENCE=on, keeps the highest X-Layout-Generation seen and the highest X-Lease-Epoch seen per
//   X-Lease-Partition and refuses a request below either with 409 problem+json (stale-layout, stale-epoch) before
//   acting on it (providerFence.ts, docs/provider-fencing.md); either way it counts the stale requests it refused and
//   those it accepted. The executor classifies 409 as permanent, and that is honest: a provider sees a higher epoch
//   or generation only once a newer lease was granted for the partition (or a switch took every lease), so the
//   sender's fence is gone and its completion write is refused; the next leader recovers the attempt and sends it.
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import { HttpProvider } from '../provider/httpProvider.js';
import type { Provider, ProviderRequest, ProviderResult, SubmitBounds } from '../provider/provider.js';
import { fenceHeaders, ProviderFence } from './providerFence.js';

export const DEMO_PROVIDER_PATH = '/demo-provider/submit';

export interface DemoCall {
  intentId: string;
  attemptNo: number;
  leaseEpoch: number;
  partition: number;
  /** X-Layout-Generation (absent: the request carried none). */
  layoutGeneration?: number;
  status: number;
  note: string;
}

export interface DemoProviderOptions {
  latencyMs: number;
  failureRate: number;
  /** Refuse a generation lower than the highest seen, or an epoch lower than the highest seen for its partition
   *  (409 stale-layout / stale-epoch); default false. */
  fence?: boolean;
  onCall?: (call: DemoCall) => void;
  random?: () => number;
}

/** Requests whose generation was lower than the highest already seen, or whose epoch was lower than the highest already
 *  seen for their partition. */
export interface StaleCounts {
  refused: number;
  accepted: number;
}

export interface DemoProvider {
  url: string;
  stale(): StaleCounts;
  close(): Promise<void>;
}

const MAX_BODY = 1024 * 1024;
const MAX_REMEMBERED = 100_000;

export async function startDemoProvider(opts: DemoProviderOptions): Promise<DemoProvider> {
  const random = opts.random ?? Math.random;
  const succeeded = new Set<string>();
  const fence = new ProviderFence();
  const stale: StaleCounts = { refused: 0, accepted: 0 };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_BODY) chunks.push(c);
    });
    req.on('end', () => {
      const reply = (status: number, body: Record<string, unknown>, headers: Record<string, string> = {}) => {
        res.writeHead(status, { 'content-type': 'application/json', ...headers });
        res.end(JSON.stringify(body));
      };
      if (req.method !== 'POST' || req.url !== DEMO_PROVIDER_PATH) return reply(404, { error: 'not found' });
      if (size > MAX_BODY) return reply(413, { error: 'body too large' });
      let body: { intentId?: unknown; attemptNo?: unknown; payload?: { fail?: unknown } };
      try {
        body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as typeof body;
      } catch {
        return reply(400, { error: 'malformed JSON' });
      }
      const intentId = String(req.headers['idempotency-key'] ?? body.intentId ?? '');
      const headers = fenceHeaders(req.headers);
      const call = { intentId, attemptNo: Number(body.attemptNo ?? 0), leaseEpoch: headers.epoch, partition: headers.partition,
        ...(headers.generation === undefined ? {} : { layoutGeneration: headers.generation }) };
      // Decided at arrival, before any effect: the check and the raise are one step (one thread).
      const verdict = fence.admit(headers);
      if (verdict.stale) {
        if (opts.fence) {
          stale.refused++;
          const layout = verdict.kind === 'generation';
          res.writeHead(409, { 'content-type': 'application/problem+json' });
          res.end(JSON.stringify({ type: `urn:submission-manager:problem:${layout ? 'stale-layout' : 'stale-epoch'}`,
            title: layout ? 'Stale layout generation' : 'Stale lease epoch', status: 409, detail: verdict.detail,
            partition: call.partition, leaseEpoch: call.leaseEpoch, ...(layout ? { layoutGeneration: headers.generation, highestGeneration: verdict.seen }
              : { highestEpoch: verdict.seen }) }));
          opts.onCall?.({ ...call, status: 409, note: `refused: ${verdict.detail}` });
          return;
        }
        stale.accepted++;
      }
      setTimeout(() => {
        const fail = body.payload?.fail;
        let status = 200;
        let note = 'accepted';
        if (succeeded.has(intentId)) {
          note = 'duplicate (already accepted)';
          reply(200, { accepted: true, duplicate: true, intentId });
        } else if (fail === 'permanent') {
          status = 422;
          note = 'rejected permanently (payload says fail: permanent)';
          reply(422, { error: 'rejected: the payload asked for a permanent failure' });
        } else if (fail === 'retryable' || random() < opts.failureRate) {
          status = 503;
          note = 'unavailable, retry after 1 s';
          reply(503, { error: 'demo provider: temporarily unavailable' }, { 'retry-after': '1' });
        } else {
          if (succeeded.size >= MAX_REMEMBERED) succeeded.clear();
          succeeded.add(intentId);
          reply(200, { accepted: true, intentId, attemptNo: call.attemptNo });
        }
        opts.onCall?.({ ...call, status, note });
      }, opts.latencyMs);
    });
  });
  server.keepAliveTimeout = 30_000;
  await new Promise<void>((resolve, reject) => {
    server.once('error', reject);
    server.listen(0, '127.0.0.1', () => resolve());
  });
  const port = (server.address() as AddressInfo).port;
  return {
    url: `http://127.0.0.1:${port}${DEMO_PROVIDER_PATH}`,
    stale: () => ({ ...stale }),
    close: () => new Promise<void>((r) => {
      server.close(() => r());
      server.closeAllConnections();
    }),
  };
}

/** Intents store their provider URL at submit. The demo provider's port changes on every start, so an
 *  intent submitted to a previous run's demo provider (same path on loopback) is sent to the current one. */
export class DemoRoutingProvider implements Provider {
  private readonly inner: HttpProvider;

  constructor(private readonly currentUrl: string) {
    this.inner = new HttpProvider(currentUrl);
  }

  submit(req: ProviderRequest, bounds: SubmitBounds): Promise<ProviderResult> {
    return this.inner.submit({ ...req, url: this.route(req.url) }, bounds);
  }

  route(url: string | null): string {
    if (url === null) return this.currentUrl;
    try {
      const u = new URL(url);
      return u.hostname === '127.0.0.1' && u.pathname === DEMO_PROVIDER_PATH ? this.currentUrl : url;
    } catch {
      return url;
    }
  }

  close(): void {
    this.inner.close();
  }
}
