// A TokenCredential stand-in for the app's managed identity: each getToken hands out a new short-lived random
// "token" after `rotate` made it the database user's only valid password, as if Entra had issued it and the
// server accepted nothing older. Only the credential differs from production; pool, token cache and driver
// options are the app's own.
import { randomBytes } from 'node:crypto';
import tls from 'node:tls';
import type { AccessToken, TokenCredential } from '@azure/identity';
import { expect } from 'vitest';
import { createApp } from '../../src/app.js';
import type { ApiRequest } from '../../src/http/request.js';
import { OSS_RDBMS_SCOPE } from '../../src/store/entraToken.js';

/** Token lifetime in the tests: refreshed at half of it (the 5-minute default margin is capped there). */
export const LIFETIME_MS = 1_200;
export const ROTATIONS = 3;
export const TEST_CLIENT_ID = '00000000-0000-4000-8000-000000000001';

export class RotatingCredential implements TokenCredential {
  /** `mark`: what `rotate` returned, a server-side watermark (a connection opened after it used a later token). */
  readonly issued: Array<{ token: string; mark: number; scope: string }> = [];

  constructor(private readonly rotate: (token: string) => Promise<number>, private readonly lifetimeMs: number) {}

  async getToken(scopes: string | string[]): Promise<AccessToken> {
    const token = `tok-${randomBytes(16).toString('hex')}`;
    const mark = await this.rotate(token);
    this.issued.push({ token, mark, scope: ([] as string[]).concat(scopes).join(' ') });
    return { token, expiresOnTimestamp: Date.now() + this.lifetimeMs };
  }

  /** Resolves once `count` tokens have been issued (the cache refreshed count − 1 times). */
  async waitForIssued(count: number, timeoutMs = 10_000): Promise<void> {
    const deadline = Date.now() + timeoutMs;
    while (this.issued.length < count) {
      if (Date.now() > deadline) throw new Error(`only ${this.issued.length} of ${count} tokens issued in ${timeoutMs} ms`);
      await new Promise((r) => setTimeout(r, 10));
    }
  }
}

/** A RotatingCredential for LIFETIME_MS tokens whose rotation runs `rotate` on a fresh admin connection
 *  (returning the watermark), closed afterwards. */
export function adminRotation<C extends { end(): Promise<void> }>(open: () => Promise<C>, rotate: (admin: C, token: string) => Promise<number>) {
  return () => new RotatingCredential(async (token) => {
    const admin = await open();
    try {
      return await rotate(admin, token);
    } finally {
      await admin.end();
    }
  }, LIFETIME_MS);
}

/** Drive `request` from `workers` loops until stopped; every failure is kept (the tests expect none). */
export function steadyLoad(request: () => Promise<void>, workers = 2) {
  let stopped = false;
  const failures: unknown[] = [];
  let ok = 0;
  const loops = Array.from({ length: workers }, async () => {
    while (!stopped) {
      try {
        await request();
        ok++;
      } catch (e) {
        failures.push(e);
      }
      await new Promise((r) => setTimeout(r, 2));
    }
  });
  return {
    async stop() {
      stopped = true;
      await Promise.all(loops);
      return { ok, failures };
    },
  };
}

/** Trust a test server's certificate like a public CA: the app's TLS settings (verify, TLS 1.2+) stay as they are. */
export function trustTestCa(pem: string): void {
  tls.setDefaultCACertificates([...tls.getCACertificates('default'), pem]);
}

/** One connection's identity on the server and where it stands against a rotation watermark. */
export interface Held { id: number; mark: number }

/** Phase k (after the k-th rotation) holds 2 + 3k connections at once: more than the pool can have had before
 *  (the previous phase's plus the load's two), so at least one is opened after the rotation. */
export async function rotationPhases(cred: RotatingCredential, holdMany: (n: number) => Promise<Held[]>): Promise<Held[][]> {
  const seen: Held[][] = [await holdMany(2)];
  for (let k = 1; k <= ROTATIONS; k++) {
    await cred.waitForIssued(k + 1);
    seen.push(await holdMany(2 + 3 * k));
  }
  return seen;
}

/** No failed request; every phase opened a connection after its rotation (it could only log in with the new
 *  token); the first connections are still pooled at the end (`final` holds more than the pool has). */
export function expectRotationsServed(cred: RotatingCredential, seen: Held[][], final: Held[], load: { ok: number; failures: unknown[] }) {
  expect(load.failures).toEqual([]);
  expect(load.ok).toBeGreaterThan(20);
  expect(cred.issued.length).toBeGreaterThanOrEqual(ROTATIONS + 1);
  expect(new Set(cred.issued.map((i) => i.scope))).toEqual(new Set([OSS_RDBMS_SCOPE]));
  for (let k = 1; k <= ROTATIONS; k++) {
    expect(seen[k]!.some((h) => h.mark > cred.issued[k]!.mark), `phase ${k} opened a connection after rotation ${k}`).toBe(true);
  }
  const finalIds = new Set(final.map((h) => h.id));
  expect(seen[0]!.every((h) => finalIds.has(h.id))).toBe(true);
}

/** azd-free smoke: the app starts with a flexible engine's Azure settings shape (host, database, user, client id)
 *  and `credential` (null: none injected, the app's own ManagedIdentityCredential), migrates, serves an intent
 *  and takes the lease. */
export async function expectAppServes(engine: 'postgresql' | 'mysql', port: number, database: string, user: string,
  credential: RotatingCredential | null): Promise<void> {
  const app = await createApp({
    env: {
      DATABASE_ENGINE: engine, DATABASE_HOST: `127.0.0.1:${port}`, DATABASE_NAME: database, DATABASE_USER: user,
      AZURE_CLIENT_ID: TEST_CLIENT_ID, LOG_LEVEL: 'silent',
    },
    ...(credential ? { credential } : {}),
  });
  try {
    expect(app.config.database).toMatchObject({ kind: `${engine === 'mysql' ? 'mysql' : 'postgres'}Entra`, host: '127.0.0.1', port, user });
    await app.stores.ping();
    const res = await app.handlers.postIntent(apiRequest('POST', 'intents', JSON.stringify({ payload: { hello: engine } })));
    expect(res.status).toBe(201);
    const id = (JSON.parse(String(res.body)) as { intentId: string }).intentId;
    expect((await app.handlers.getIntent(apiRequest('GET', `intents/${id}`, '', { id }))).status).toBe(200);
    expect(await app.lease.tryAcquire()).toBe(true);
    if (credential) expect(credential.issued.length).toBeGreaterThanOrEqual(1);
  } finally {
    await app.close();
  }
}

/** An API request for the app's handlers (the azd-free smoke tests). */
function apiRequest(method: string, path: string, body: string, params: Record<string, string> = {}): ApiRequest {
  const headers = new Headers({ 'content-type': 'application/json', 'idempotency-key': `smoke-${randomBytes(4).toString('hex')}` });
  return { method, url: `http://localhost/api/${path}`, headers, params, text: async () => body };
}
