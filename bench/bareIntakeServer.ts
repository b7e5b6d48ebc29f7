// The intake baseline: a bare node:http server that does what any intake must (read the body, JSON.parse it,
// one INSERT of the row through the same driver and pool size, due at the body's notBefore if given) and nothing
// else: no validation, no idempotency, no Functions objects. Run as its own process, like the local host; prints its port. Arguments: the
// database URL (postgres://, or mysql:// naming the database), the schema (PostgreSQL; '-' for MySQL), the pool size.
import http from 'node:http';
import { randomUUID } from 'node:crypto';
import { openPgPool } from '../src/store/postgres/db.js';
import { dbTime, openMysqlPool } from '../src/store/mysql/db.js';

const [url, schema, poolMax] = [process.argv[2]!, process.argv[3]!, Number(process.argv[4] ?? 10)];

const COLUMNS = `submission_intents (intent_id, idempotency_key, request_hash, contract, status, attempt_count,
  max_attempts, next_attempt_at, created_at, last_modified_at)`;

/** One INSERT of the row, database times from the server's clock, as the dialect spells it. */
function database(): { insert(values: [string, string | null, string, string, number, Date | null]): Promise<unknown>; close(): Promise<void> } {
  if (/^(mysql|mariadb):/.test(url)) {
    const db = openMysqlPool({ url: url.replace(/^mariadb:/, 'mysql:'), max: poolMax, statementTimeoutMs: 60_000 });
    return { insert: (v) => db.query(`INSERT INTO ${COLUMNS}
      VALUES (?, ?, ?, ?, 'scheduled', 0, ?, COALESCE(CAST(? AS DATETIME(6)), UTC_TIMESTAMP(6)), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`,
    [...v.slice(0, 5), v[5] && dbTime(v[5])]), close: () => db.close() };
  }
  const db = openPgPool({ url, max: poolMax, statementTimeoutMs: 60_000, schema });
  return { insert: (v) => db.query(`INSERT INTO ${COLUMNS}
    VALUES ($1, $2, $3, $4::jsonb, 'scheduled', 0, $5, COALESCE($6, clock_timestamp()), clock_timestamp(), clock_timestamp())`, v),
  close: () => db.close() };
}
const db = database();

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = JSON.parse(Buffer.concat(chunks).toString('utf8')) as { payload: unknown; maxAttempts?: number; notBefore?: string };
    const id = randomUUID();
    const contract = JSON.stringify({ provider: { url: null }, payload: body.payload, retry: { maxAttempts: body.maxAttempts ?? 5, baseDelayMs: 1000, maxDelayMs: 300000 } });
    const key = req.headers['idempotency-key'];
    const notBefore = body.notBefore === undefined ? null : new Date(body.notBefore);
    db.insert([id, typeof key === 'string' ? key : null, '0'.repeat(64), contract, body.maxAttempts ?? 5, notBefore]).then(() => {
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
