// A real HTTP provider for tests: records every request (idempotency key, epoch, attempt, arrival) and
// answers by a programmable rule (default 200). Listens on an ephemeral loopback port.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

export interface ProviderCall {
  intentId: string;
  attemptNo: number;
  leaseEpoch: number;
  /** X-Lease-Partition (NaN when absent). */
  partition: number;
  arrivedAt: number;
  payload: unknown;
  /** The W3C traceparent header, if the call carried one. */
  traceparent: string | null;
  /** Resolves if the client gives the call up (its connection closes) before the answer is written. */
  abandoned: Promise<void>;
}

export type Answer = { status: number; delayMs?: number; headers?: Record<string, string>; body?: string };

export interface RecordingProvider {
  url: string;
  calls: ProviderCall[];
  answer: (call: ProviderCall) => Answer | Promise<Answer>;
  waitFor(pred: (calls: ProviderCall[]) => boolean, timeoutMs?: number): Promise<void>;
  close(): Promise<void>;
}

export async function startRecordingProvider(answer?: RecordingProvider['answer']): Promise<RecordingProvider> {
  const rec: RecordingProvider = {
    url: '',
    calls: [],
    answer: answer ?? (() => ({ status: 200 })),
    async waitFor(pred, timeoutMs = 20_000) {
      const end = Date.now() + timeoutMs;
      while (!pred(rec.calls)) {
        if (Date.now() > end) throw new Error(`provider condition not met within ${timeoutMs} ms (${rec.calls.length} calls)`);
        await new Promise((r) => setTimeout(r, 10));
      }
    },
    close: () => new Promise<void>((r) => { server.closeAllConnections(); server.close(() => r()); }),
  };
  const server = http.createServer((req, res) => {
    const chunks: Buffer[] = [];
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', async () => {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { payload: unknown; attemptNo: number };
      const call: ProviderCall = {
        intentId: String(req.headers['idempotency-key']),
        attemptNo: body.attemptNo,
        leaseEpoch: Number(req.headers['x-lease-epoch']),
        partition: Number(req.headers['x-lease-partition']),
        arrivedAt: Date.now(),
        payload: body.payload,
        traceparent: (req.headers.traceparent as string | undefined) ?? null,
        abandoned: new Promise<void>((r) => res.once('close', () => {
          if (!res.writableFinished) r();
        })),
      };
      rec.calls.push(call);
      const a = await rec.answer(call);
      if (a.delayMs) await new Promise((r) => setTimeout(r, a.delayMs));
      res.writeHead(a.status, { 'content-type': 'application/json', ...a.headers });
      res.end(a.body ?? '{}');
    });
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', () => r()));
  rec.url = `http://127.0.0.1:${(server.address() as AddressInfo).port}/submit`;
  return rec;
}
