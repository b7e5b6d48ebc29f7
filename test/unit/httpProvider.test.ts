// HttpProvider against a real node:http server on 127.0.0.1:0 (no mocks): the request it sends, the
// classification of what comes back, the hard timeout, connection failures and keep-alive reuse.
import http from 'node:http';
import type { AddressInfo, Socket } from 'node:net';
import { afterAll, afterEach, beforeAll, describe, expect, it } from 'vitest';
import { HttpProvider } from '../../src/provider/httpProvider.js';
import type { ProviderRequest } from '../../src/provider/provider.js';

interface Seen {
  method: string | undefined;
  url: string | undefined;
  headers: http.IncomingHttpHeaders;
  body: string;
  socketId: number;
}

type Handler = (req: http.IncomingMessage, res: http.ServerResponse, body: string) => void;

/** A real HTTP server whose behaviour each test sets; records requests and socket lifecycles. */
class TestServer {
  readonly seen: Seen[] = [];
  readonly sockets: Socket[] = [];
  readonly closed = new Set<number>();
  connections = 0;
  handler: Handler = (_req, res) => res.end('ok');
  private readonly server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const body = Buffer.concat(chunks).toString('utf8');
      this.seen.push({ method: req.method, url: req.url, headers: req.headers, body, socketId: this.sockets.indexOf(req.socket) });
      this.handler(req, res, body);
    });
  });

  constructor() {
    this.server.on('connection', (s: Socket) => {
      this.connections++;
      const id = this.sockets.push(s) - 1;
      s.on('close', () => this.closed.add(id));
    });
  }

  async listen(): Promise<string> {
    await new Promise<void>((resolve) => this.server.listen(0, '127.0.0.1', resolve));
    return `http://127.0.0.1:${(this.server.address() as AddressInfo).port}/submit`;
  }

  reset(): void {
    this.seen.length = 0;
    this.handler = (_req, res) => res.end('ok');
  }

  async close(): Promise<void> {
    this.server.closeAllConnections();
    await new Promise<void>((resolve) => this.server.close(() => resolve()));
  }
}

const req = (url: string | null, over: Partial<ProviderRequest> = {}): ProviderRequest => ({
  intentId: '0190f3c2-7d6a-7000-8000-00000000abcd',
  attemptNo: 1,
  leaseEpoch: 7,
  payload: { amount: 12.5, currency: 'EUR', nested: { list: [1, 'two', null], unicode: 'é✓' } },
  url,
  ...over,
});

async function waitFor(cond: () => boolean, ms: number): Promise<boolean> {
  const end = Date.now() + ms;
  while (Date.now() < end) {
    if (cond()) return true;
    await new Promise((r) => setTimeout(r, 5));
  }
  return cond();
}

/** Whether `call` ended before a timer of `ms` armed right after it (its own timer was armed when it began): the
 *  order of the two on the event loop, whatever the machine's speed. */
async function endsBefore(call: Promise<unknown>, ms: number): Promise<boolean> {
  let timer: NodeJS.Timeout | undefined;
  const reference = new Promise<'reference'>((r) => (timer = setTimeout(() => r('reference'), ms)));
  const first = await Promise.race([call.then(() => 'call' as const), reference]);
  clearTimeout(timer);
  return first === 'call';
}

/** A port nothing listens on (bound then released). */
async function closedPort(): Promise<number> {
  const s = http.createServer();
  await new Promise<void>((resolve) => s.listen(0, '127.0.0.1', resolve));
  const port = (s.address() as AddressInfo).port;
  await new Promise<void>((resolve) => s.close(() => resolve()));
  return port;
}

describe('HttpProvider (real HTTP server)', () => {
  const server = new TestServer();
  let url = '';
  const providers: HttpProvider[] = [];
  const provider = (defaultUrl: string | null = null) => {
    const p = new HttpProvider(defaultUrl);
    providers.push(p);
    return p;
  };

  beforeAll(async () => {
    url = await server.listen();
  });
  afterEach(() => {
    server.reset();
    for (const p of providers.splice(0)) p.close();
  });
  afterAll(async () => {
    await server.close();
  });

  it('POSTs {intentId, attemptNo, payload} as JSON with idempotency-key (stable across attempts) and x-lease-epoch', async () => {
    const p = provider();
    const r1 = await p.submit(req(url, { attemptNo: 1, leaseEpoch: 7 }), { timeoutMs: 5_000 });
    const r2 = await p.submit(req(url, { attemptNo: 2, leaseEpoch: 8 }), { timeoutMs: 5_000 });
    expect(r1).toEqual({ kind: 'success', httpStatus: 200 });
    expect(r2).toEqual({ kind: 'success', httpStatus: 200 });
    expect(server.seen).toHaveLength(2);
    const [a, b] = server.seen as [Seen, Seen];
    for (const [s, attemptNo, epoch] of [[a, 1, '7'], [b, 2, '8']] as const) {
      expect(s.method).toBe('POST');
      expect(s.url).toBe('/submit');
      expect(s.headers['content-type']).toBe('application/json');
      expect(s.headers['content-length']).toBe(String(Buffer.byteLength(s.body)));
      expect(s.headers['idempotency-key']).toBe('0190f3c2-7d6a-7000-8000-00000000abcd');
      expect(s.headers['x-lease-epoch']).toBe(epoch);
      expect(s.headers['x-attempt-no']).toBe(String(attemptNo));
      expect(JSON.parse(s.body)).toEqual({
        intentId: '0190f3c2-7d6a-7000-8000-00000000abcd',
        attemptNo,
        payload: { amount: 12.5, currency: 'EUR', nested: { list: [1, 'two', null], unicode: 'é✓' } },
      });
      expect(Object.keys(JSON.parse(s.body))).toEqual(['intentId', 'attemptNo', 'payload']); // no lease epoch etc.
    }
    expect(a.headers['idempotency-key']).toBe(b.headers['idempotency-key']);
  });

  it('sends the cluster (the base LEASE_NAME) as x-lease-name when given, so a provider serving two clusters keeps a fence per cluster', async () => {
    const named = new HttpProvider(null, { leaseName: 'payments-eu' });
    try {
      await named.submit(req(url, { leaseEpoch: 4, partition: 3 }), { timeoutMs: 5_000 });
    } finally {
      named.close();
    }
    await provider().submit(req(url, { leaseEpoch: 4 }), { timeoutMs: 5_000 });
    expect(server.seen.map((s) => s.headers['x-lease-name'])).toEqual(['payments-eu', undefined]);
  });

  it('sends the partition as x-lease-partition beside x-lease-epoch (0 when the request names none)', async () => {
    const p = provider();
    await p.submit(req(url, { leaseEpoch: 4, partition: 3 }), { timeoutMs: 5_000 });
    await p.submit(req(url, { leaseEpoch: 9 }), { timeoutMs: 5_000 });
    expect(server.seen.map((s) => [s.headers['x-lease-partition'], s.headers['x-lease-epoch']])).toEqual([['3', '4'], ['0', '9']]);
    expect(Object.keys(JSON.parse(server.seen[0]!.body))).toEqual(['intentId', 'attemptNo', 'payload']); // a header, not a body field
  });

  it('keeps the query string of the target URL', async () => {
    const p = provider();
    await p.submit(req(`${url}?tenant=a&x=1`), { timeoutMs: 5_000 });
    expect(server.seen[0]!.url).toBe('/submit?tenant=a&x=1');
  });

  it.each([
    [200, 'success'], [201, 'success'], [202, 'success'], [204, 'success'],
    [301, 'permanent'], [304, 'permanent'],
    [400, 'permanent'], [401, 'permanent'], [403, 'permanent'], [404, 'permanent'], [409, 'permanent'], [410, 'permanent'],
    [422, 'permanent'],
    [408, 'retryable'], [429, 'retryable'], [500, 'retryable'], [501, 'retryable'], [502, 'retryable'], [503, 'retryable'],
    [504, 'retryable'],
  ] as const)('server answers %i → %s', async (status, kind) => {
    server.handler = (_req, res) => {
      res.statusCode = status;
      if (status === 301) res.setHeader('location', '/elsewhere');
      res.end(status === 204 || status === 304 ? undefined : `status ${status} body`);
    };
    const r = await provider().submit(req(url), { timeoutMs: 5_000 });
    expect(r.kind).toBe(kind);
    expect(r.httpStatus).toBe(status);
    if (r.kind === 'success') return;
    const withBody = status !== 304;
    expect(r.error).toBe(withBody ? `HTTP ${status}: status ${status} body` : `HTTP ${status}`);
    if (r.kind === 'retryable') expect(r.retryAfterMs).toBeNull();
    expect(server.seen).toHaveLength(1); // redirects are not followed, nothing is retried in place
  });

  it.each([
    [429, '3', 3_000],
    [503, '0', 0],
    [503, '120', 120_000],
    [429, 'soon', null],
    [503, 'Wed, 21 Oct 2015 07:28:00 GMT', 0],
  ] as const)('HTTP %i with Retry-After %j → retryAfterMs %j', async (status, header, expected) => {
    server.handler = (_req, res) => {
      res.writeHead(status, { 'retry-after': header });
      res.end();
    };
    const r = await provider().submit(req(url), { timeoutMs: 5_000 });
    expect(r).toEqual({ kind: 'retryable', httpStatus: status, error: `HTTP ${status}`, retryAfterMs: expected });
  });

  it('Retry-After as an HTTP-date ~30 s ahead → retryAfterMs: that date less the time it was read', async () => {
    let dateMs = 0; // the date sent (an HTTP-date keeps whole seconds)
    server.handler = (_req, res) => {
      const date = new Date(Date.now() + 30_000);
      dateMs = Math.floor(date.getTime() / 1_000) * 1_000;
      res.writeHead(503, { 'retry-after': date.toUTCString() });
      res.end();
    };
    const sentAt = Date.now();
    const r = await provider().submit(req(url), { timeoutMs: 5_000 });
    const answeredAt = Date.now();
    expect(r.kind).toBe('retryable');
    if (r.kind !== 'retryable') return;
    // Read between the send and the answer, however slow the machine was meanwhile.
    expect(r.retryAfterMs).toBeGreaterThanOrEqual(dateMs - answeredAt);
    expect(r.retryAfterMs).toBeLessThanOrEqual(dateMs - sentAt);
  });

  it.each([100, 250])('a server that never answers → retryable "timeout", ended by its %i-ms timer (before a later one), socket destroyed', async (timeoutMs) => {
    server.handler = () => { /* never answers */ };
    const before = server.sockets.length;
    const t0 = performance.now();
    const call = provider().submit(req(url), { timeoutMs: timeoutMs });
    expect(await endsBefore(call, 2 * timeoutMs)).toBe(true); // its timer, not a later one
    const r = await call;
    expect(r).toEqual({ kind: 'retryable', httpStatus: null, error: `timeout after ${timeoutMs} ms`, retryAfterMs: null });
    expect(performance.now() - t0).toBeGreaterThanOrEqual(timeoutMs - 5); // never before it
    const ids = server.sockets.map((_s, i) => i).slice(before);
    expect(ids.length).toBeGreaterThanOrEqual(1);
    // The client destroyed its socket: the server sees the connection close promptly.
    expect(await waitFor(() => ids.every((i) => server.closed.has(i)), 2_000)).toBe(true);
  });

  // A stall (a long GC, a starved event loop) past the call's deadline after the answer was written: when the
  // process runs again its timer and the unread answer are both due, and the timer must not win.
  it('an answer written before a stall that outlasts the timeout is read, not a timeout', async () => {
    server.handler = (_req, res) => {
      res.end('ok');
      const end = performance.now() + 300;
      while (performance.now() < end); // the process stalls: the answer waits on the socket, the 100-ms timer is due
    };
    expect(await provider().submit(req(url), { timeoutMs: 100 })).toEqual({ kind: 'success', httpStatus: 200 });
  });

  it('headers sent but the body never ends → timeout, socket destroyed', async () => {
    server.handler = (_req, res) => {
      res.writeHead(200, { 'content-type': 'text/plain' });
      res.write('partial');
    };
    const before = server.sockets.length;
    const call = provider().submit(req(url), { timeoutMs: 150 });
    expect(await endsBefore(call, 300)).toBe(true);
    expect(await call).toMatchObject({ kind: 'retryable', httpStatus: null, error: 'timeout after 150 ms' }); // ended by its timer
    const ids = server.sockets.map((_s, i) => i).slice(before);
    expect(await waitFor(() => ids.every((i) => server.closed.has(i)), 2_000)).toBe(true);
  });

  it('the server drops the connection without answering → retryable connection error (no waiting for the timeout)', async () => {
    server.handler = (r) => r.socket.destroy();
    const r = await provider().submit(req(url), { timeoutMs: 10_000 });
    expect(r).toMatchObject({ kind: 'retryable', httpStatus: null, retryAfterMs: null });
    if (r.kind === 'retryable') expect(r.error).toMatch(/^connection error: /); // not 'timeout after 10000 ms': no waiting
  });

  it('the server dies mid-response (headers + part of the body) → retryable, without waiting for the timeout', async () => {
    server.handler = (r, res) => {
      res.writeHead(500, { 'content-length': '1000' });
      res.write('partial', () => setTimeout(() => r.socket.destroy(), 20));
    };
    const r = await provider().submit(req(url), { timeoutMs: 10_000 });
    expect(r).toMatchObject({ kind: 'retryable', httpStatus: null, retryAfterMs: null });
    if (r.kind === 'retryable') expect(r.error).not.toMatch(/^timeout/); // ended by the drop, not by the timer
  });

  it('connection refused (closed port) → retryable connection error', async () => {
    const port = await closedPort();
    const r = await provider().submit(req(`http://127.0.0.1:${port}/submit`), { timeoutMs: 10_000 });
    expect(r.kind).toBe('retryable');
    if (r.kind !== 'retryable') return;
    expect(r.httpStatus).toBeNull();
    expect(r.retryAfterMs).toBeNull();
    expect(r.error).toMatch(/^connection error: .*ECONNREFUSED/);
  });

  // A stall right after the gate (SIGSTOP, a long GC) while the connection opens: when the process runs again, the
  // connect completes in the I/O phase, before any timer, so only the send-by check stands between a lease that
  // may have expired meanwhile and a request written under it.
  it.each([
    { sendWithinMs: 50, sent: false },
    { sendWithinMs: 5_000, sent: true },
  ])('a 250 ms stall before the connection opens, send-by $sendWithinMs ms → sent: $sent', async ({ sendWithinMs, sent }) => {
    const call = provider().submit(req(url), { timeoutMs: 5_000, sendWithinMs });
    const end = performance.now() + 250;
    while (performance.now() < end); // the process stalls: nothing else runs
    const r = await call;
    await new Promise((resolve) => setTimeout(resolve, 200)); // a request written late would have arrived by now
    if (sent) {
      expect(r).toEqual({ kind: 'success', httpStatus: 200 });
      expect(server.seen).toHaveLength(1);
    } else {
      expect(r).toMatchObject({ kind: 'notSent', httpStatus: null, error: expect.stringMatching(/^not sent: \d+ ms past its send-by bound$/) });
      expect(server.seen).toHaveLength(0);
    }
  });

  it('keep-alive: 20 sequential calls reuse at most 2 sockets', async () => {
    const p = provider();
    const before = server.connections;
    for (let i = 1; i <= 20; i++) {
      const r = await p.submit(req(url, { attemptNo: i }), { timeoutMs: 5_000 });
      expect(r).toEqual({ kind: 'success', httpStatus: 200 });
    }
    expect(server.seen).toHaveLength(20);
    expect(server.connections - before).toBeLessThanOrEqual(2);
  });

  it('keep-alive: the socket is reused after error answers too (the body is drained)', async () => {
    server.handler = (_req, res) => {
      res.statusCode = 503;
      res.end('x'.repeat(100_000));
    };
    const p = provider();
    const before = server.connections;
    for (let i = 0; i < 10; i++) expect((await p.submit(req(url), { timeoutMs: 5_000 })).kind).toBe('retryable');
    expect(server.connections - before).toBeLessThanOrEqual(2);
  });

  it.each([
    [500, 'retryable', 'E'.repeat(1_000_000)],
    [400, 'permanent', 'line one\n\tline two '.repeat(10_000)],
    [503, 'retryable', 'é✓'.repeat(50_000)],
  ] as const)('a large error body (HTTP %i, %s) is truncated to at most 512 chars', async (status, kind, body) => {
    server.handler = (_req, res) => {
      res.statusCode = status;
      res.end(body);
    };
    const r = await provider().submit(req(url), { timeoutMs: 5_000 });
    expect(r.kind).toBe(kind);
    if (r.kind === 'success') return;
    expect(r.error.length).toBeLessThanOrEqual(512);
    expect(r.error.startsWith(`HTTP ${status}: `)).toBe(true);
    expect(r.error).not.toMatch(/\s{2,}|\n/); // whitespace collapsed
  });

  it('credentials in the URL are sent as Basic authorization (and not in the request line)', async () => {
    const withCreds = url.replace('http://', 'http://us%40er:p%3Ass@');
    const r = await provider().submit(req(withCreds), { timeoutMs: 5_000 });
    expect(r).toEqual({ kind: 'success', httpStatus: 200 });
    expect(server.seen[0]!.headers.authorization).toBe(`Basic ${Buffer.from('us@er:p:ss').toString('base64')}`);
    expect(server.seen[0]!.url).toBe('/submit');
  });

  it('url null → the configured default URL', async () => {
    const p = provider(url);
    const r = await p.submit(req(null), { timeoutMs: 5_000 });
    expect(r).toEqual({ kind: 'success', httpStatus: 200 });
    expect(server.seen).toHaveLength(1);
    expect(server.seen[0]!.url).toBe('/submit');
  });

  it("the contract's URL wins over the default", async () => {
    const port = await closedPort();
    const p = provider(`http://127.0.0.1:${port}/never`);
    const r = await p.submit(req(`${url}?who=contract`), { timeoutMs: 5_000 });
    expect(r).toEqual({ kind: 'success', httpStatus: 200 });
    expect(server.seen[0]!.url).toBe('/submit?who=contract');
  });

  it('no default and url null → retryable, naming PROVIDER_URL, nothing sent', async () => {
    const p = provider(null);
    const r = await p.submit(req(null), { timeoutMs: 5_000 });
    expect(r.kind).toBe('retryable');
    if (r.kind !== 'retryable') return;
    expect(r.httpStatus).toBeNull();
    expect(r.retryAfterMs).toBeNull();
    expect(r.error).toContain('PROVIDER_URL');
    expect(server.seen).toHaveLength(0);
  });
});
