// The intake baseline: a bare node:http server that does what any intake must (read the body, JSON.parse it,
// one INSERT of the row through the same driver and pool size) and nothing else: no validation, no
// idempotency, no Functions objects. Run as its own process, like the local host; prints its port.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { openPgPool } from '../src/store/postgres/db.js';

const [url, schema, poolMax] = [process.argv[2]!, process.argv[3]!, Number(process.argv[4] ?? 10)];
const db = openPgPool({ url, max: poolMax, statementTimeoutMs: 60_000, schema });

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { payload: unknown; maxAttempts?: number };
    const id = randomUUID();
    const contract = JSON.stringify({ provider: { url: null }, payload: body.payload, retry: { maxAttempts: body.maxAttempts ?? 5, baseDelayMs: 1000, maxDelayMs: 300000 } });
    db.query(`INSERT INTO submission_intents (intent_id, idempotency_key, request_hash, contract, status, attempt_count,
        max_attempts, next_attempt_at, created_at, last_modified_at)
      VALUES ($1, $2, $3, $4::jsonb, 'scheduled', 0, $5, clock_timestamp(), clock_timestamp(), clock_timestamp())`,
    [id, req.headers['idempotency-key'] ?? null, '0'.repeat(64), contract, body.maxAttempts ?? 5]).then(() => {
      const out = JSON.stringify({ intentId: id, status: 'scheduled' });
      res.writeHead(201, { 'content-type': 'application/json', 'content-length': Buffer.byteLength(out) });
      res.end(out);
    }, (e: Error) => {
      res.writeHead(500);
      res.end(e.message);
    });
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${(server.address() as { port: number }).port}/api`));
process.on('SIGTERM', () => server.close(() => void db.close().then(() => process.exit(0))));
