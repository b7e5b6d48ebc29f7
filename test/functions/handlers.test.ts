// Registered handlers invoked with real HttpRequest / InvocationContext objects from @azure/functions,
// against PGlite: submit, read, replay, conflict, bad input, readyz in both roles, and the timer.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { readFileSync } from 'node:fs';
// The compiled modules (dist/) are the ones the registered function files import, so the app scoping
// (AsyncLocalStorage) must come from the same module instances.
import type { Registry } from '../../src/local/functionsCore.js';
import type { App } from '../../src/app.js';
// @ts-ignore compiled output has no declarations
import { createApp, runWithApp } from '../../dist/src/app.js';
// @ts-ignore compiled output has no declarations
import { silentLogger, createLogger } from '../../dist/src/observability/logger.js';
// @ts-ignore compiled output has no declarations
import { routingDestination } from '../../dist/src/observability/invocationLog.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { openFunctionsHarness } from '../support/functionsHarness.js';

let reg: Registry;
let azf: typeof import('@azure/functions');
let provider: RecordingProvider;
let leader: App;
let follower: App;

beforeAll(async () => {
  const h = await openFunctionsHarness();
  ({ reg, azf, provider } = h);
  const { base, stores } = h;
  // The leader logs through the routing destination: inside an invocation, records go to its context.
  const make = (holderId: string, logger = silentLogger) => createApp({ config: { ...base, lease: { ...base.lease, holderId } }, stores, logger });
  leader = await make('fn-leader', createLogger('info', routingDestination({ write: () => true })));
  follower = await make('fn-follower');
});
afterAll(async () => {
  await leader?.close();
  await follower?.close();
  await leader?.stores.close();
  await provider?.close();
});

const logs: string[] = [];
async function invoke(app: App, name: string, init: { method: string; path: string; body?: string; headers?: Record<string, string>; params?: Record<string, string> }) {
  const f = reg.functions.find((x) => x.name === name)!;
  const req = new azf.HttpRequest({
    method: init.method, url: `http://localhost/api/${init.path}`, headers: init.headers ?? {},
    params: init.params ?? {}, ...(init.body !== undefined ? { body: { string: init.body } } : {}),
  });
  const ctx = new azf.InvocationContext({ functionName: name, invocationId: 'test', logHandler: (_l, ...a) => logs.push(a.join(' ')) });
  const res = (await runWithApp(app, () => f.handler(req, ctx))) as { status: number; headers: Record<string, string>; body?: string };
  const isJson = /json/.test(res.headers['content-type'] ?? '');
  return { status: res.status, headers: res.headers, json: isJson && res.body ? JSON.parse(res.body) : undefined, text: res.body };
}
const json = { 'content-type': 'application/json' };
const pkgVersion = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version;

describe('HTTP functions through @azure/functions objects', () => {
  it('submit → 201, read, idempotent replay → 200, key reuse with another body → 409', async () => {
    const body = JSON.stringify({ payload: { order: 1 } });
    const created = await invoke(follower, 'postIntent', { method: 'POST', path: 'intents', body, headers: { ...json, 'idempotency-key': 'k-1' } });
    expect(created.status).toBe(201);
    expect(created.json).toMatchObject({ status: 'scheduled', attemptCount: 0 });
    const id = created.json.intentId as string;
    const got = await invoke(leader, 'getIntent', { method: 'GET', path: `intents/${id}`, params: { id } });
    expect(got.json.intentId).toBe(id);
    const replay = await invoke(leader, 'postIntent', { method: 'POST', path: 'intents', body, headers: { ...json, 'idempotency-key': 'k-1' } });
    expect([replay.status, replay.json.intentId]).toEqual([200, id]);
    const conflict = await invoke(leader, 'postIntent', { method: 'POST', path: 'intents', body: JSON.stringify({ payload: { order: 2 } }), headers: { ...json, 'idempotency-key': 'k-1' } });
    expect(conflict.status).toBe(409);
    expect(conflict.headers['content-type']).toMatch(/problem\+json/);
  });

  it('bad input → 4xx problem+json and nothing stored', async () => {
    const before = await leader.stores.intents.list({ limit: 500 });
    const bad = await invoke(leader, 'postIntent', { method: 'POST', path: 'intents', body: '{"payload": 3}', headers: json });
    expect(bad.status).toBe(400);
    expect(bad.json.detail).toMatch(/payload/);
    const wrongType = await invoke(leader, 'postIntent', { method: 'POST', path: 'intents', body: 'x=1', headers: { 'content-type': 'text/plain' } });
    expect(wrongType.status).toBe(415);
    expect(await leader.stores.intents.list({ limit: 500 })).toHaveLength(before.length);
  });

  it('readyz in both roles, healthz, and the timer executes an intent on the leader', async () => {
    const timer = reg.functions.find((x) => x.name === 'executorTimer')!;
    const ctx = () => new azf.InvocationContext({ functionName: 'executorTimer', invocationId: 't', logHandler: (_l, ...a) => logs.push(a.join(' ')) });
    const timerArg = { isPastDue: false, schedule: { adjustForDST: false }, scheduleStatus: {} };
    await runWithApp(leader, () => timer.handler(timerArg, ctx()));
    await runWithApp(follower, () => timer.handler(timerArg, ctx()));
    // Own role first (the spec's line), then the cluster's leader as SQL holds it: the same on every instance.
    const cluster = / cluster_leader=fn-leader cluster_epoch=1 cluster_expires_at=\S+Z cluster_renewed_at=\S+Z$/;
    expect((await invoke(leader, 'readyz', { method: 'GET', path: 'readyz' })).text).toMatch(/^mode=leader holder_id=fn-leader lease_epoch=1 lease_expires_at=\S+Z /);
    expect((await invoke(leader, 'readyz', { method: 'GET', path: 'readyz' })).text).toMatch(cluster);
    const followerReady = await invoke(follower, 'readyz', { method: 'GET', path: 'readyz' });
    expect(followerReady.status).toBe(200); // spec: followers stay in HTTP rotation
    expect((await invoke(leader, 'readyz', { method: 'GET', path: 'readyz' })).status).toBe(200);
    const followerLine = followerReady.text;
    expect(followerLine).toMatch(/^mode=follower holder_id=fn-follower cluster_leader=fn-leader /);
    expect(followerLine).toMatch(cluster);
    const asJson = await invoke(follower, 'readyz', { method: 'GET', path: 'readyz', headers: { accept: 'application/json' } });
    expect(asJson.json).toMatchObject({ mode: 'follower', holderId: 'fn-follower', leaseEpoch: null,
      cluster: { leader: { holderId: 'fn-leader', leaseEpoch: 1 }, lastEpoch: 1, error: null } });
    const health = await invoke(follower, 'healthz', { method: 'GET', path: 'healthz' });
    expect([health.status, health.text]).toEqual([200, `ok version=${pkgVersion}`]); // the release, from package.json
    const created = await invoke(follower, 'postIntent', { method: 'POST', path: 'intents', body: JSON.stringify({ payload: { t: 1 } }), headers: json });
    const id = created.json.intentId as string;
    for (let i = 0; i < 5 && !provider.calls.some((c) => c.intentId === id); i++) {
      await runWithApp(leader, () => timer.handler(timerArg, ctx()));
    }
    const done = await invoke(leader, 'getIntent', { method: 'GET', path: `intents/${id}`, params: { id } });
    expect(done.json.status).toBe('succeeded');
    expect(logs.some((l) => l.includes('"event":"tick_summary"'))).toBe(true); // pino reached the InvocationContext
    const lease = await invoke(follower, 'getLease', { method: 'GET', path: 'lease' });
    expect(lease.json).toMatchObject({ holderId: 'fn-leader', leaseEpoch: 1 });
  });
});
