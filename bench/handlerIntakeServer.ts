// Intake decomposition: the app's own framework-neutral postIntent handler (every validation, the idempotency
// hash, the submit span, metrics, the same store and pool) served straight from node:http, without the
// Functions programming model's HttpRequest / InvocationContext / HttpResponse objects the local host builds
// as the Azure worker does. Its own process, like the host and the bare baseline; prints its port.
import http from 'node:http';
import { createApp } from '../src/app.js';

const app = await createApp({ env: { ...process.env, LOG_LEVEL: process.env.LOG_LEVEL ?? 'warn' } });

const server = http.createServer((req, res) => {
  const chunks: Buffer[] = [];
  req.on('data', (c: Buffer) => chunks.push(c));
  req.on('end', () => {
    const body = Buffer.concat(chunks).toString('utf8');
    const header = (name: string): string | null => {
      const v = req.headers[name.toLowerCase()];
      return v === undefined ? null : Array.isArray(v) ? v.join(', ') : v;
    };
    app.handlers.postIntent({
      method: req.method ?? 'GET', url: `http://${req.headers.host ?? '127.0.0.1'}${req.url ?? '/'}`,
      headers: { get: header }, params: {}, text: async () => body,
    }).then((r) => {
      res.writeHead(r.status, { ...r.headers, 'content-length': r.body === undefined ? 0 : Buffer.byteLength(r.body) });
      res.end(r.body);
    }, (e: Error) => {
      res.writeHead(500);
      res.end(e.message);
    });
  });
});
server.keepAliveTimeout = 60_000;
server.listen(0, '127.0.0.1', () => console.log(`listening on http://127.0.0.1:${(server.address() as { port: number }).port}/api`));
process.on('SIGTERM', () => server.close(() => void app.close().then(() => process.exit(0))));
