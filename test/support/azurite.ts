// A real Azurite blob service (the devDependency) for tests and the campaign: its own process on a free port,
// in-memory persistence, stopped afterwards. Gives the AzureWebJobsStorage connection string hosts use, and a
// proxy in front of it that fails chosen requests.
import { spawn, type ChildProcess } from 'node:child_process';
import { createServer as createHttpServer, request as httpRequest, type IncomingMessage } from 'node:http';
import { createServer } from 'node:net';
import path from 'node:path';
import { azuriteConnectionString } from '../../src/local/blobLockStore.js';
import { projectRoot } from './projectRoot.js';

const AZURITE_BLOB = path.join(projectRoot(import.meta.url), 'node_modules/azurite/dist/src/blob/main.js');

export interface Azurite {
  port: number;
  connectionString: string;
  child: ChildProcess;
  stop(): Promise<void>;
}

/** A TCP port free on 127.0.0.1 right now. */
export function freePort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const s = createServer();
    s.once('error', reject);
    s.listen(0, '127.0.0.1', () => {
      const { port } = s.address() as { port: number };
      s.close(() => resolve(port));
    });
  });
}

export async function startAzurite(timeoutMs = 30_000): Promise<Azurite> {
  const port = await freePort();
  const child = spawn(process.execPath, [AZURITE_BLOB, '--blobHost', '127.0.0.1', '--blobPort', String(port), '--inMemoryPersistence',
    '--skipApiVersionCheck', '--disableProductStyleUrl'], { stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  const exited = new Promise<void>((r) => child.on('exit', () => r()));
  await new Promise<void>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`Azurite did not start within ${timeoutMs} ms: ${out}`)), timeoutMs);
    const onData = (d: Buffer) => {
      out += d.toString();
      if (/successfully listens on/i.test(out)) {
        clearTimeout(timer);
        resolve();
      }
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    void exited.then(() => {
      clearTimeout(timer);
      reject(new Error(`Azurite exited: ${out}`));
    });
  });
  return {
    port, child, connectionString: azuriteConnectionString(port),
    async stop() {
      if (child.exitCode === null && child.signalCode === null) child.kill('SIGKILL');
      await exited;
    },
  };
}

export interface BlobProxy {
  connectionString: string;
  /** Requests it answers 500 itself, without forwarding (counted in `failed`). */
  fail: ((req: IncomingMessage) => boolean) | null;
  failed: number;
  close(): Promise<void>;
}

/** A plain HTTP proxy in front of Azurite that can refuse chosen requests, to fail one storage call for real. */
export async function startBlobProxy(azurite: Azurite): Promise<BlobProxy> {
  const proxy: BlobProxy = { connectionString: '', fail: null, failed: 0, close: async () => {} };
  const server = createHttpServer((req, res) => {
    if (proxy.fail?.(req)) {
      proxy.failed++;
      req.resume();
      res.writeHead(500, { 'content-type': 'application/xml', 'x-ms-error-code': 'InternalError' }).end(
        '<?xml version="1.0" encoding="utf-8"?><Error><Code>InternalError</Code><Message>injected by the test proxy</Message></Error>');
      return;
    }
    const up = httpRequest({ host: '127.0.0.1', port: azurite.port, method: req.method, path: req.url, headers: req.headers }, (r) => {
      res.writeHead(r.statusCode ?? 502, r.headers);
      r.pipe(res);
    });
    up.on('error', () => res.destroy());
    req.pipe(up);
  });
  await new Promise<void>((r) => server.listen(0, '127.0.0.1', r));
  const port = (server.address() as { port: number }).port;
  proxy.connectionString = azuriteConnectionString(port);
  proxy.close = () => new Promise<void>((r) => {
    server.closeAllConnections();
    server.close(() => r());
  });
  return proxy;
}
