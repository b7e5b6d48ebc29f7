// HTTP provider: POST {intentId, attemptNo, payload} with Idempotency-Key (the intent id, the same across
// attempts, so a deduplicating provider sees one effect) and X-Lease-Epoch (so a provider that keeps the
// highest epoch can reject a stale leader). Keep-alive connections; a hard per-call timeout.
import { injectTraceHeaders } from '../observability/tracing.js';
import http from 'node:http';
import https from 'node:https';
import type { Provider, ProviderRequest, ProviderResult } from './provider.js';
import { parseRetryAfter } from './retryPolicy.js';

const MAX_ERROR_BODY = 512;

export class HttpProvider implements Provider {
  private readonly httpAgent = new http.Agent({ keepAlive: true, maxSockets: 256 });
  private readonly httpsAgent = new https.Agent({ keepAlive: true, maxSockets: 256 });

  constructor(private readonly defaultUrl: string | null) {}

  async submit(req: ProviderRequest, timeoutMs: number): Promise<ProviderResult> {
    const target = req.url ?? this.defaultUrl;
    if (!target) return { kind: 'retryable', httpStatus: null, error: 'no provider URL configured (PROVIDER_URL)', retryAfterMs: null };
    const url = new URL(target);
    const body = JSON.stringify({ intentId: req.intentId, attemptNo: req.attemptNo, payload: req.payload });
    const mod = url.protocol === 'https:' ? https : http;
    return new Promise<ProviderResult>((resolve) => {
      let settled = false;
      const finish = (r: ProviderResult) => {
        if (!settled) {
          settled = true;
          clearTimeout(timer);
          resolve(r);
        }
      };
      const headers: Record<string, string | number> = {
        'content-type': 'application/json',
        'content-length': Buffer.byteLength(body),
        'idempotency-key': req.intentId,
        'x-lease-epoch': String(req.leaseEpoch),
        'x-attempt-no': String(req.attemptNo),
      };
      injectTraceHeaders(headers as Record<string, string>); // W3C traceparent of the attempt span, when one is active
      const request = mod.request(url, {
        method: 'POST',
        agent: url.protocol === 'https:' ? this.httpsAgent : this.httpAgent,
        headers,
      }, (res) => {
        const chunks: Buffer[] = [];
        let size = 0;
        res.on('data', (c: Buffer) => {
          if (size < MAX_ERROR_BODY) chunks.push(c);
          size += c.length;
        });
        res.on('end', () => finish(classify(res.statusCode ?? 0, res.headers['retry-after'],
          Buffer.concat(chunks).toString('utf8').slice(0, MAX_ERROR_BODY))));
        res.on('error', (e) => finish({ kind: 'retryable', httpStatus: null, error: `response error: ${e.message}`, retryAfterMs: null }));
      });
      const timer = setTimeout(() => {
        finish({ kind: 'retryable', httpStatus: null, error: `timeout after ${timeoutMs} ms`, retryAfterMs: null });
        request.destroy();
      }, Math.max(1, timeoutMs));
      request.on('error', (e) => finish({ kind: 'retryable', httpStatus: null, error: `connection error: ${e.message}`, retryAfterMs: null }));
      request.end(body);
    });
  }

  close(): void {
    this.httpAgent.destroy();
    this.httpsAgent.destroy();
  }
}

/** 2xx success; 408/429/5xx retryable (Retry-After honoured); other statuses permanent. */
export function classify(status: number, retryAfter: string | string[] | undefined, bodyText: string): ProviderResult {
  if (status >= 200 && status < 300) return { kind: 'success', httpStatus: status };
  const error = `HTTP ${status}${bodyText ? `: ${bodyText.replace(/\s+/g, ' ').trim()}` : ''}`.slice(0, MAX_ERROR_BODY);
  if (status === 408 || status === 429 || status >= 500) {
    const ra = Array.isArray(retryAfter) ? retryAfter[0] : retryAfter;
    return { kind: 'retryable', httpStatus: status, error, retryAfterMs: parseRetryAfter(ra) };
  }
  return { kind: 'permanent', httpStatus: status, error };
}
