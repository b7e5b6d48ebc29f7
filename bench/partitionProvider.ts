// The partitions benchmark's provider, in its own process (`node partitionProvider.js <latencyMs>`): a node:http
// server that answers every POST 200 `{}` after <latencyMs>, keep-alive, and records each arrival (idempotency key =
// intent id, X-Lease-Partition, X-Lease-Epoch, X-Attempt-No, Date.now() at arrival). `GET /calls?from=<n>` returns
// the arrivals from index n on as JSON rows [intentId, partition, arrivedAtMs, epoch, attemptNo]; the first line
// on stdout is the port.
import http from 'node:http';
import type { AddressInfo } from 'node:net';

type Arrival = [string, number, number, number, number];

const latencyMs = Number(process.argv[2] ?? 50);
const calls: Arrival[] = [];

const server = http.createServer((req, res) => {
  if (req.method === 'GET') {
    const from = Number(new URL(req.url ?? '/', 'http://x').searchParams.get('from') ?? 0);
    res.writeHead(200, { 'content-type': 'application/json' }).end(JSON.stringify(calls.slice(from)));
    return;
  }
  calls.push([String(req.headers['idempotency-key'] ?? ''), Number(req.headers['x-lease-partition'] ?? NaN), Date.now(),
    Number(req.headers['x-lease-epoch'] ?? NaN), Number(req.headers['x-attempt-no'] ?? NaN)]);
  req.resume();
  req.on('end', () => setTimeout(() => res.writeHead(200, { 'content-type': 'application/json' }).end('{}'), latencyMs));
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => console.log((server.address() as AddressInfo).port));
