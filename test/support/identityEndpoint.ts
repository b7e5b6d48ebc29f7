// A stand-in for the managed identity endpoint Azure gives a function app (Flex Consumption, like App Service):
// IDENTITY_ENDPOINT + IDENTITY_HEADER in the environment, and the protocol @azure/identity's
// ManagedIdentityCredential speaks to it (GET ?api-version=2019-08-01&resource=…&client_id=…, the secret in
// X-IDENTITY-HEADER). It listens on 127.0.0.1 only. Each token it issues is first made the database user's only
// valid password (`issue`), so with it the app runs its production credential unchanged: nothing is injected,
// only the endpoint the platform would provide is local.
import { randomBytes } from 'node:crypto';
import http from 'node:http';
import type { AddressInfo } from 'node:net';

/** One token request as the endpoint saw it. */
export interface IdentityRequest {
  apiVersion: string | null;
  resource: string | null;
  clientId: string | null;
  /** The request carried the secret from IDENTITY_HEADER. */
  secret: boolean;
}

export interface IdentityEndpoint {
  /** The variables the platform sets for the app (point the process at this endpoint). */
  env: { IDENTITY_ENDPOINT: string; IDENTITY_HEADER: string };
  requests: IdentityRequest[];
  stop(): Promise<void>;
}

/** Start the endpoint; `issue(token)` runs before each token is handed out. Tokens live `lifetimeS` seconds. */
export async function startIdentityEndpoint(issue: (token: string) => Promise<void>, lifetimeS = 3600): Promise<IdentityEndpoint> {
  const header = randomBytes(12).toString('hex');
  const requests: IdentityRequest[] = [];
  const server = http.createServer((req, res) => {
    const url = new URL(req.url ?? '/', 'http://127.0.0.1');
    const seen: IdentityRequest = {
      apiVersion: url.searchParams.get('api-version'), resource: url.searchParams.get('resource'),
      clientId: url.searchParams.get('client_id'), secret: req.headers['x-identity-header'] === header,
    };
    requests.push(seen);
    const reply = (status: number, body: object) => {
      res.writeHead(status, { 'content-type': 'application/json' });
      res.end(JSON.stringify(body));
    };
    if (!seen.secret) return reply(401, { error: 'missing or wrong X-IDENTITY-HEADER' });
    const token = `tok-mi-${randomBytes(16).toString('hex')}`;
    issue(token).then(
      () => reply(200, {
        access_token: token, token_type: 'Bearer', resource: seen.resource, client_id: seen.clientId,
        expires_on: String(Math.floor(Date.now() / 1000) + lifetimeS),
      }),
      (e: unknown) => reply(500, { error: String(e) }),
    );
  });
  await new Promise<void>((resolve) => server.listen(0, '127.0.0.1', resolve));
  const { port } = server.address() as AddressInfo;
  return {
    env: { IDENTITY_ENDPOINT: `http://127.0.0.1:${port}/msi/token`, IDENTITY_HEADER: header },
    requests,
    stop: () => new Promise<void>((resolve) => server.close(() => resolve())),
  };
}

/** Run `fn` with `vars` in process.env (where ManagedIdentityCredential looks), restoring the previous values. */
export async function withProcessEnv<T>(vars: Record<string, string>, fn: () => Promise<T>): Promise<T> {
  const before = Object.fromEntries(Object.keys(vars).map((k) => [k, process.env[k]]));
  Object.assign(process.env, vars);
  try {
    return await fn();
  } finally {
    for (const [k, v] of Object.entries(before)) {
      if (v === undefined) delete process.env[k];
      else process.env[k] = v;
    }
  }
}
