// The chaos campaign's recording provider, run as its own process so its record survives whatever happens
// to the hosts: every request is appended (synchronously, at arrival) as one JSON line to --out with its
// Idempotency-Key, X-Lease-Epoch, X-Attempt-No, arrival time and the answer decided for it. Answers are
// seeded: payload.mode "permanent" → 422; otherwise a share --failure-rate gets 503, the rest 200 after
// --latency-ms (±50 %), and a share --slow-rate answers after --slow-ms (so calls are in flight at faults).
// With --fence on (the campaign's setting) it is a consumer that fences: it keeps the highest X-Layout-Generation seen
// and the highest X-Lease-Epoch seen per X-Lease-Partition and refuses a request below either with 409, recorded,
// before any effect (the rule of docs/provider-fencing.md, src/local/providerFence.ts).
// Each request also gets a second line when it ends, `{"end": seq, "at": ms, "aborted": bool}`: answered, or the caller
// closed the connection first (a timeout, an abort, a killed process), so the record shows what was in flight at any
// moment. `POST /control {"latencyMs": N}` sets the typical answer time from then on (the campaign's slow phases).
// Prints `listening <url>` on stdout once ready; SIGTERM closes it.
import { closeSync, openSync, writeSync } from 'node:fs';
import http from 'node:http';
import type { AddressInfo } from 'node:net';
import type { ProviderEnd } from './history.js';
import { createRng } from './rng.js';
import { fenceHeaders, ProviderFence } from '../../src/local/providerFence.js';

export interface ProviderRecord {
  /** Arrival order (absent in records of older runs). */
  seq?: number;
  key: string;
  attemptNo: number;
  epoch: number;
  arrivedAt: number;
  status: number;
  delayMs: number;
  /** Stale by the provider's rule: X-Layout-Generation lower than the highest it had seen, or X-Lease-Epoch lower than
   *  the highest it had seen for the same partition. */
  staleEpoch: boolean;
  /** X-Lease-Partition (absent in records of older runs: 0). */
  partition?: number;
  /** X-Layout-Generation (absent: the request carried none, or a record of an older run). */
  generation?: number;
  /** The provider fenced (--fence on): a stale request is refused (409), never acted on. */
  fenced?: boolean;
  /** This request was refused as stale (409 stale-epoch). */
  refused?: boolean;
  /** Wall ms when it stopped being in flight at the provider: its answer written, or the caller gone (from the end line;
   *  absent in records of older runs, or when the provider stopped first). */
  endedAt?: number;
  /** The caller closed the connection before the answer. */
  aborted?: boolean;
}

function arg(name: string, def: string): string {
  const i = process.argv.indexOf(`--${name}`);
  return i >= 0 && process.argv[i + 1] !== undefined ? process.argv[i + 1]! : def;
}

const out = arg('out', '');
if (!out) {
  process.stderr.write('providerProcess: --out <file> is required\n');
  process.exit(2);
}
const rng = createRng(Number(arg('seed', '1')));
const failureRate = Number(arg('failure-rate', '0.1'));
let latencyMs = Number(arg('latency-ms', '20'));
const slowRate = Number(arg('slow-rate', '0.03'));
const slowMs = Number(arg('slow-ms', '300'));
const fence = arg('fence', 'off') === 'on';
const fd = openSync(out, 'a');
const fencing = new ProviderFence();
let seq = 0;

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  if (req.url === '/control') {
    req.on('data', (c: Buffer) => chunks.push(c));
    req.on('end', () => {
      const v = Number((JSON.parse(Buffer.concat(chunks).toString('utf8') || '{}') as { latencyMs?: unknown }).latencyMs);
      if (Number.isFinite(v) && v >= 0) latencyMs = v;
      res.writeHead(Number.isFinite(v) && v >= 0 ? 200 : 400, { 'content-type': 'application/json' }).end(JSON.stringify({ latencyMs }));
    });
    return;
  }
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('error', () => {});
  req.on('end', () => {
    const arrivedAt = Date.now();
    let mode = '';
    try {
      const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { payload?: { mode?: string } };
      mode = String(body.payload?.mode ?? '');
    } catch {
      mode = 'unparsable';
    }
    const headers = fenceHeaders(req.headers);
    const { epoch, partition, generation } = headers;
    const staleEpoch = fencing.admit(headers).stale; // judged and raised at arrival, before any effect
    const refused = fence && staleEpoch;
    let status = 200;
    if (refused) status = 409;
    else if (mode === 'permanent' || mode === 'unparsable') status = 422;
    else if (rng.chance(failureRate)) status = 503;
    const delayMs = rng.chance(slowRate) ? slowMs : Math.round(latencyMs * (0.5 + rng.next()));
    const n = ++seq;
    const rec: ProviderRecord = {
      seq: n, key: String(req.headers['idempotency-key'] ?? ''), attemptNo: Number(req.headers['x-attempt-no']), epoch,
      arrivedAt, status, delayMs, staleEpoch, partition, ...(generation === undefined ? {} : { generation }), fenced: fence, refused,
    };
    writeSync(fd, `${JSON.stringify(rec)}\n`); // before answering: the effect is recorded even if we die
    let ended = false;
    const end = (aborted: boolean) => {
      if (ended) return;
      ended = true;
      try {
        writeSync(fd, `${JSON.stringify({ end: n, at: Date.now(), aborted } satisfies ProviderEnd)}\n`);
      } catch { /* closing down: the record ends without it */ }
    };
    res.on('close', () => end(!res.writableFinished)); // the caller gone before the answer: no longer in flight here
    setTimeout(() => {
      if (ended) return;
      end(false);
      if (refused) res.writeHead(409, { 'content-type': 'application/problem+json' });
      else res.writeHead(status, { 'content-type': 'application/json' });
      res.end(status === 200 ? '{"accepted":true}' : refused
        ? `{"type":"urn:submission-manager:problem:stale-epoch","status":409,"detail":"stale: epoch ${epoch} of partition ${partition}, layout generation ${generation ?? 'none'}"}`
        : '{"error":"chaos provider"}');
    }, delayMs);
  });
});

server.keepAliveTimeout = 30_000;
server.listen(0, '127.0.0.1', () => {
  process.stdout.write(`listening http://127.0.0.1:${(server.address() as AddressInfo).port}/submit\n`);
});
const stop = () => {
  server.closeAllConnections();
  server.close(() => {
    closeSync(fd);
    process.exit(0);
  });
  setTimeout(() => process.exit(0), 1_000).unref();
};
process.on('SIGTERM', stop);
process.on('SIGINT', stop);
