// The OpenAPI document against reality: every registered HTTP function is an operation (same route, method,
// auth level); real responses from every route — success and error cases, through real @azure/functions
// objects against PGlite — have a documented status and content type and validate against the schema; and
// the committed docs/openapi.json is what `npm run openapi` would write.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createRequire } from 'node:module';
import { readFileSync } from 'node:fs';
import type { Registry } from '../../src/local/functionsCore.js';
import type { App } from '../../src/app.js';
// @ts-ignore compiled output has no declarations
import { createApp, runWithApp } from '../../dist/src/app.js';
// @ts-ignore compiled output has no declarations
import { openStores } from '../../dist/src/store/open.js';
// @ts-ignore compiled output has no declarations
import { silentLogger } from '../../dist/src/observability/logger.js';
// @ts-ignore compiled output has no declarations
import { buildOpenApiDocument, renderOpenApiFile } from '../../dist/src/http/openapi/document.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { openFunctionsHarness } from '../support/functionsHarness.js';
import { changeArrangement } from '../support/partitionChanges.js';
import { assignPartition } from '../../src/intents/partition.js';

type Json = Record<string, any>;
const require = createRequire(import.meta.url);
const Ajv2020 = require('ajv/dist/2020.js') as new (o: object) => { validate(s: object, d: unknown): boolean; errors: unknown };
const addFormats = require('ajv-formats') as (ajv: unknown) => void;

let reg: Registry;
let azf: typeof import('@azure/functions');
let provider: RecordingProvider;
let leader: App;
let follower: App;
let broken: App;
const doc = buildOpenApiDocument() as Json;
const ajv = new Ajv2020({ strict: false, allErrors: true });
addFormats(ajv);

const ops = new Map<string, { path: string; method: string; op: Json }>();
for (const [path, item] of Object.entries(doc.paths as Json)) {
  for (const [method, op] of Object.entries(item as Json)) ops.set(op.operationId, { path, method, op });
}
const exercised = new Map<string, Set<number>>();

beforeAll(async () => {
  const h = await openFunctionsHarness();
  ({ reg, azf, provider } = h);
  const { base, stores } = h;
  const make = (holderId: string, s = stores) => createApp({ config: { ...base, lease: { ...base.lease, holderId } }, stores: s, logger: silentLogger });
  leader = await make('oa-leader');
  follower = await make('oa-follower');
  const lost = await openStores(base.database, base, silentLogger);
  await lost.migrate();
  broken = await make('oa-broken', lost);
  await lost.close(); // every database call now fails: the store-unavailable path
});
afterAll(async () => {
  await leader?.close();
  await follower?.close();
  await leader?.stores.close();
  await provider?.close();
});

interface Call { method: string; path: string; params?: Record<string, string>; body?: string; headers?: Record<string, string> }
async function call(app: App, name: string, c: Call) {
  const f = reg.functions.find((x) => x.name === name)!;
  const req = new azf.HttpRequest({ method: c.method, url: `http://localhost/api/${c.path}`, headers: c.headers ?? {}, params: c.params ?? {},
    ...(c.body !== undefined ? { body: { string: c.body } } : {}) });
  const ctx = new azf.InvocationContext({ functionName: name, invocationId: 'oa', logHandler: () => {} });
  const res = (await runWithApp(app, () => f.handler(req, ctx))) as { status?: number; headers?: Record<string, string>; body?: string };
  const status = res.status ?? 200;
  const contentType = String(res.headers?.['content-type'] ?? '');
  checkAgainstDocument(name, status, contentType, res.body);
  return { status, body: res.body, json: /json/.test(contentType) && res.body ? JSON.parse(res.body) : undefined };
}

function checkAgainstDocument(name: string, status: number, contentType: string, body: string | undefined) {
  const o = ops.get(name);
  expect(o, `operation ${name} documented`).toBeDefined();
  const r = o!.op.responses[String(status)];
  expect(r, `${name}: status ${status} documented`).toBeDefined();
  const media = contentType.split(';')[0]!.trim();
  const m = r.content?.[media];
  expect(m, `${name} ${status}: content type ${media} documented`).toBeDefined();
  const value = /json/.test(media) ? JSON.parse(body ?? 'null') : body ?? '';
  const ok = ajv.validate({ ...m.schema, components: doc.components }, value);
  expect(ok, `${name} ${status}: ${JSON.stringify(ajv.errors)}\n${String(body).slice(0, 500)}`).toBe(true);
  (exercised.get(name) ?? exercised.set(name, new Set()).get(name)!).add(status);
}

const J = { 'content-type': 'application/json' };

describe('OpenAPI document', () => {
  it('the committed docs/openapi.json is current (npm run openapi)', () => {
    expect(readFileSync('docs/openapi.json', 'utf8'), 'docs/openapi.json is stale: run npm run openapi').toBe(renderOpenApiFile());
    expect(doc.openapi).toBe('3.1.0');
  });

  it('operations are exactly the registered HTTP functions (route, method, auth level)', () => {
    const http = reg.functions.filter((f) => f.trigger.type === 'httpTrigger');
    expect([...ops.keys()].sort()).toEqual(http.map((f) => f.name).sort());
    for (const f of http) {
      const o = ops.get(f.name)!;
      expect(o.path, f.name).toBe(`/${f.trigger.route}`);
      expect([o.method.toUpperCase()], f.name).toEqual(f.trigger.methods);
      expect(o.op['x-auth-level'], f.name).toBe(f.trigger.authLevel);
      expect(o.op.security, f.name).toEqual(f.trigger.authLevel === 'anonymous' ? [] : expect.arrayContaining([{ functionKey: [] }]));
    }
  });

  it('real responses of every route, success and error cases, validate against it', async () => {
    // Lease not yet acquired; intents API: create, replay, conflict, bad input.
    expect((await call(follower, 'getLease', { method: 'GET', path: 'lease' })).status).toBe(404);
    const body = JSON.stringify({ payload: { order: 1 }, maxAttempts: 3 });
    const created = await call(follower, 'postIntent', { method: 'POST', path: 'intents', body, headers: { ...J, 'idempotency-key': 'oa-1' } });
    expect(created.status).toBe(201);
    const id = created.json.intentId as string;
    expect((await call(leader, 'postIntent', { method: 'POST', path: 'intents', body, headers: { ...J, 'idempotency-key': 'oa-1' } })).status).toBe(200);
    expect((await call(leader, 'postIntent', { method: 'POST', path: 'intents', body: '{"payload":{"order":2}}', headers: { ...J, 'idempotency-key': 'oa-1' } })).status).toBe(409);
    expect((await call(leader, 'postIntent', { method: 'POST', path: 'intents', body: '{"payload":1,"x":2}', headers: J })).status).toBe(400);
    expect((await call(leader, 'postIntent', { method: 'POST', path: 'intents', body: '{', headers: J })).status).toBe(400);
    expect((await call(leader, 'postIntent', { method: 'POST', path: 'intents', body: 'a=1', headers: { 'content-type': 'text/plain' } })).status).toBe(415);
    expect((await call(leader, 'postIntent', { method: 'POST', path: 'intents', body: `{"payload":{"s":"${'x'.repeat(300_000)}"}}`, headers: J })).status).toBe(413);

    // Execute it: timer on the leader (lease acquired), attempts and lease views.
    const timer = reg.functions.find((x) => x.name === 'executorTimer')!;
    const tctx = () => new azf.InvocationContext({ functionName: 'executorTimer', invocationId: 't', logHandler: () => {} });
    for (let i = 0; i < 10 && !provider.calls.some((c) => c.intentId === id); i++) {
      await runWithApp(leader, () => timer.handler({ isPastDue: false, schedule: { adjustForDST: false }, scheduleStatus: {} }, tctx()));
    }
    // An arrival at the provider is not yet a written completion (it may be written between ticks): wait for it.
    const statusOf = async () => (await call(follower, 'getIntent', { method: 'GET', path: `intents/${id}`, params: { id } })).json.status;
    for (let end = Date.now() + 10_000; (await statusOf()) !== 'succeeded' && Date.now() < end;) await new Promise((r) => setTimeout(r, 50));
    expect(await statusOf()).toBe('succeeded');
    expect((await call(follower, 'getIntent', { method: 'GET', path: 'intents/nope', params: { id: 'nope' } })).status).toBe(404);
    expect((await call(follower, 'getIntentAttempts', { method: 'GET', path: `intents/${id}/attempts`, params: { id } })).json.attempts).toHaveLength(1);
    expect((await call(follower, 'getIntentAttempts', { method: 'GET', path: 'intents/nope/attempts', params: { id: 'nope' } })).status).toBe(404);
    expect((await call(follower, 'getLease', { method: 'GET', path: 'lease' })).json.holderId).toBe('oa-leader');
    // Per-partition leases (one partition here): the list, one partition, a non-integer (400), out of range (404).
    expect((await call(follower, 'getLeases', { method: 'GET', path: 'leases' })).json.leases).toMatchObject([{ partition: 0, holderId: 'oa-leader' }]);
    const partitionLease = (p: string) => call(follower, 'getPartitionLease', { method: 'GET', path: `leases/${p}`, params: { partition: p } });
    expect((await partitionLease('0')).json).toMatchObject({ partition: 0, held: true, holderId: 'oa-leader', leaseEpoch: 1 });
    expect((await partitionLease('zero')).status).toBe(400);
    expect((await partitionLease('1')).status).toBe(404);
    // The instances' heartbeat rows (one written here, whether or not the apps beat themselves).
    await follower.stores.instances.heartbeat({ holderId: 'oa-probe', version: '0.1.0', roles: ['http', 'timer'], partitions: [0] });
    expect((await call(follower, 'getInstances', { method: 'GET', path: 'instances' })).json.instances)
      .toContainEqual(expect.objectContaining({ holderId: 'oa-probe', roles: ['http', 'timer'], partitions: [0], live: true }));
    expect((await call(follower, 'listIntents', { method: 'GET', path: 'intents?limit=2&status=succeeded' })).json.items).toHaveLength(1);
    expect((await call(follower, 'listIntents', { method: 'GET', path: 'intents?limit=0' })).status).toBe(400);

    // Cancel and reschedule, each in every state.
    const other = (await call(follower, 'postIntent', { method: 'POST', path: 'intents', body: JSON.stringify({ payload: { b: 1 }, notBefore: '2099-01-01T00:00:00Z' }), headers: J })).json.intentId as string;
    const resched = (p: string, b: string, h: Record<string, string> = J) =>
      call(follower, 'rescheduleIntent', { method: 'POST', path: `intents/${p}/reschedule`, params: { id: p }, body: b, headers: h });
    expect((await resched(other, '{"notBefore":"2098-01-01T00:00:00Z"}')).status).toBe(200);
    expect((await resched(other, '{"notBefore":"soon"}')).status).toBe(400);
    expect((await resched(other, 'x', { 'content-type': 'text/plain' })).status).toBe(415);
    expect((await resched(other, `{"notBefore":"${'x'.repeat(300_000)}"}`)).status).toBe(413);
    expect((await resched('nope', '{"notBefore":"2098-01-01T00:00:00Z"}')).status).toBe(404);
    const cancel = (p: string) => call(follower, 'cancelIntent', { method: 'POST', path: `intents/${p}/cancel`, params: { id: p } });
    expect((await cancel(other)).json.status).toBe('cancelled');
    expect((await cancel(other)).status).toBe(409);
    expect((await cancel('nope')).status).toBe(404);
    expect((await resched(other, '{"notBefore":"2098-01-01T00:00:00Z"}')).status).toBe(409);

    // Health, readiness (both representations), metrics, the document itself.
    const version = (JSON.parse(readFileSync('package.json', 'utf8')) as { version: string }).version;
    expect((await call(follower, 'healthz', { method: 'GET', path: 'healthz' })).body).toBe(`ok version=${version}`);
    expect((await call(follower, 'healthz', { method: 'GET', path: 'healthz', headers: { accept: 'application/json' } })).json).toEqual({ status: 'ok', version });
    expect(doc.info.version).toBe(version);
    expect((await call(leader, 'readyz', { method: 'GET', path: 'readyz' })).body).toMatch(/^mode=leader/);
    expect((await call(follower, 'readyz', { method: 'GET', path: 'readyz', headers: { accept: 'application/json' } })).json.mode).toBe('follower');
    expect((await call(leader, 'metrics', { method: 'GET', path: 'metrics' })).body).toMatch(/^leader_acquired_total\{holder_id="oa-leader"\} 1$/m);
    expect((await call(leader, 'openapi', { method: 'GET', path: 'openapi.json' })).json).toEqual(doc);

    // Admin: execution control (pause with and without a body, bad bodies), then drain on follower and leader.
    expect((await call(follower, 'getExecution', { method: 'GET', path: 'ops/execution' })).json.paused).toBe(false);
    const pause = (b?: string, h: Record<string, string> = J) => call(follower, 'pauseExecution', { method: 'POST', path: 'ops/execution/pause', ...(b === undefined ? {} : { body: b, headers: h }) });
    expect((await pause()).json.paused).toBe(true);
    expect((await pause('{"reason":"maintenance"}')).json.paused).toBe(true);
    expect((await pause('{"why":"x"}')).status).toBe(400);
    expect((await pause('reason', { 'content-type': 'text/plain' })).status).toBe(415);
    expect((await pause(`{"reason":"${'x'.repeat(300_000)}"}`)).status).toBe(413);
    const resume = (b?: string, h: Record<string, string> = J) => call(leader, 'resumeExecution', { method: 'POST', path: 'ops/execution/resume', ...(b === undefined ? {} : { body: b, headers: h }) });
    expect((await resume('{"reason":""}')).status).toBe(400);
    expect((await resume('x', { 'content-type': 'text/plain' })).status).toBe(415);
    expect((await resume(`{"reason":"${'x'.repeat(300_000)}"}`)).status).toBe(413);
    expect((await resume()).json.paused).toBe(false);
    // Partition 0's own flag left set (an earlier release's pause): the cluster resume says 409, ?partition=all lifts it.
    expect((await call(follower, 'pauseExecution', { method: 'POST', path: 'ops/execution/pause?partition=0' })).json.paused).toBe(true);
    expect((await resume()).json).toMatchObject({ status: 409, stillHeld: [0] });
    expect((await call(leader, 'resumeExecution', { method: 'POST', path: 'ops/execution/resume?partition=all' })).json).toMatchObject({ running: true });
    // Admin: redrive (nothing failed here: the succeeded intent is reported as not redriven), bad bodies.
    const redrive = (b: string, h: Record<string, string> = J) => call(follower, 'redriveIntents', { method: 'POST', path: 'ops/intents/redrive', body: b, headers: h });
    expect((await redrive(JSON.stringify({ ids: [id] }))).json).toMatchObject({ redriven: 0, notRedriven: [id], more: false });
    expect((await redrive('{"filter":{"errorContains":"timeout"},"limit":5}')).json).toMatchObject({ redriven: 0, intents: [] });
    expect((await redrive(JSON.stringify({ ids: [id], filter: {} }))).status).toBe(400);
    expect((await redrive('ids', { 'content-type': 'text/plain' })).status).toBe(415);
    expect((await redrive(`{"reason":"${'x'.repeat(300_000)}"}`)).status).toBe(413);
    // Admin: the dashboard page and its JSON views.
    const dash = (q: string) => call(follower, 'dashboard', { method: 'GET', path: `dashboard${q}` });
    expect((await dash('')).body).toMatch(/^<!doctype html>/);
    expect((await dash('?data=overview')).json.intentsByStatus.succeeded).toBe(1);
    expect((await dash('?data=search&key=oa-1')).json.items.map((i: Json) => i.intentId)).toEqual([id]);
    expect((await dash(`?data=intent&id=${id}`)).json.contract).toMatchObject({ payload: null, payloadBytes: 11 });
    expect((await dash('?data=intent&id=01a21664-e75d-7511-bfbf-d9834bd6e04b')).status).toBe(404);
    expect((await dash('?data=search&limit=1000')).status).toBe(400);
    // Drain requests work on any instance: recorded in SQL (202), one pending at a time, listed by GET. The leader's
    // last tick executes on between ticks until the schedule's next occurrence (1 s here), and would observe and
    // complete the request: no timer runs after that, so the request stays pending while it is read.
    await new Promise((r) => setTimeout(r, 1_500));
    const release = (b?: string, h: Record<string, string> = J) => call(follower, 'releaseLease', { method: 'POST', path: 'ops/lease/release', ...(b === undefined ? {} : { body: b, headers: h }) });
    const requested = await release('{"reason":"deploy"}');
    expect([requested.status, requested.json]).toMatchObject([202, { status: 'pending', reason: 'deploy', requestedEpoch: 1, requestedBy: 'admin@oa-follower' }]);
    expect((await call(leader, 'releaseLease', { method: 'POST', path: 'ops/lease/release' })).json.requestId).toBe(requested.json.requestId);
    expect((await release('{"why":"x"}')).status).toBe(400);
    expect((await release('x', { 'content-type': 'text/plain' })).status).toBe(415);
    expect((await release(`{"reason":"${'x'.repeat(300_000)}"}`)).status).toBe(413);
    const listed = await call(leader, 'getHandovers', { method: 'GET', path: 'ops/lease/release' });
    expect(listed.json).toMatchObject({ pending: { requestId: requested.json.requestId }, requests: [{ requestId: requested.json.requestId }] });
    expect((await call(leader, 'getHandovers', { method: 'GET', path: 'ops/lease/release?limit=0' })).status).toBe(400);
    expect((await call(follower, 'getExecution', { method: 'GET', path: 'ops/execution' })).json.pendingHandoverId).toBe(requested.json.requestId);

    // Admin: the partition count (issue 26). This instance runs one partition: count 1 is unchanged, 2 is above it.
    const partitionsOf = (app: App) => call(app, 'getPartitions', { method: 'GET', path: 'ops/partitions' });
    const layout = (await partitionsOf(follower)).json;
    expect(layout).toMatchObject({ count: 1, executorPartitions: 1, active: null, changes: [],
      leases: [{ partition: 0, holderId: 'oa-leader', leaseEpoch: 1, held: true, heldByChanger: false }] });
    const setCount = (app: App, b: string, h: Record<string, string> = J) => call(app, 'postPartitions', { method: 'POST', path: 'ops/partitions', body: b, headers: h });
    const countsBefore = await follower.stores.partitions.listChanges(50);
    expect((await setCount(follower, '{"count":1}')).json).toMatchObject({ unchanged: true, count: 1 });
    const above = await setCount(follower, '{"count":2}');
    expect([above.status, above.json.type, above.json.detail]).toEqual([409, 'urn:submission-manager:problem:partition-capacity',
      'count 2 is more than this instance\'s EXECUTOR_PARTITIONS (1): partitions 1..1 would have no timer function here; ' +
      'deploy with EXECUTOR_PARTITIONS ≥ 2 first, then request count 2']);
    for (const bad of ['{"count":0}', '{"count":65}', '{"count":2.5}', '{"count":"2"}', '{"count":2,"x":1}', '{}', '[2]', '{']) {
      expect((await setCount(follower, bad)).status, bad).toBe(400);
    }
    expect((await setCount(follower, '{"count":2}', { 'content-type': 'text/plain' })).status).toBe(415);
    expect((await setCount(follower, `{"count":2,"x":"${'x'.repeat(300_000)}"}`)).status).toBe(413);
    // An instance deployed with EXECUTOR_PARTITIONS=4 (the same database): it records a change to 4, a retry is that
    // change, a change to 3 meanwhile is refused naming it. A LEASE_NAME without room for 64 partitions is refused first.
    const wide = { ...follower, config: { ...follower.config, partitions: { count: 4 } } } as App;
    const noRoom = { ...follower, config: { ...follower.config, lease: { ...follower.config.lease, name: 'x'.repeat(62) }, partitions: { count: 64 } } } as App;
    const tooLong = await setCount(noRoom, '{"count":64}');
    expect([tooLong.status, tooLong.json.type]).toEqual([409, 'urn:submission-manager:problem:lease-name-room']);
    expect(tooLong.json.detail).toMatch(/^LEASE_NAME \("x{62}", 62 characters\) is too long for count 64: .* at most 64$/);
    // A live instance of a release older than count changes need (the probe row, 0.2.0: the release before this one,
    // whose changer the release guards refuse): 409 naming it, nothing recorded; once its row is gone the change is
    // recorded.
    await follower.stores.instances.heartbeat({ holderId: 'oa-probe', version: '0.2.0', roles: ['http', 'timer'], partitions: [0] });
    const older = await setCount(wide, '{"count":4}');
    expect([older.status, older.json.type, older.json.minimumVersion, older.json.olderInstances])
      .toEqual([409, 'urn:submission-manager:problem:older-release-live', '0.3.0', [{ holderId: 'oa-probe', version: '0.2.0' }]]);
    expect(older.json.detail).toMatch(/^oa-probe \(0\.2\.0\) runs a release older than 0\.3\.0, whose changer cannot take part in this release's count changes: /);
    expect(await follower.stores.partitions.listChanges(50)).toEqual(countsBefore); // nothing recorded on bad input
    await follower.stores.instances.remove('oa-probe');
    const changeCreated = await setCount(wide, '{"count":4}');
    expect([changeCreated.status, changeCreated.json]).toMatchObject([202, { created: true, change: { fromCount: 1, toCount: 4, state: 'preparing',
      requestedBy: 'admin@oa-follower', changer: null, rowsMoved: 0 } }]);
    const changeId = changeCreated.json.change.changeId as string;
    expect((await setCount(wide, '{"count":4}')).json).toMatchObject({ created: false, change: { changeId, state: 'preparing' } });
    const otherChange = await setCount(wide, '{"count":3}');
    expect([otherChange.status, otherChange.json.type, otherChange.json.activeChange.changeId]).toEqual([409, 'urn:submission-manager:problem:partition-change-active', changeId]);
    expect(otherChange.json.detail).toContain(`another change is in progress: ${changeId} from 1 to 4 (preparing`);
    const during = (await partitionsOf(wide)).json;
    expect(during).toMatchObject({ count: 1, executorPartitions: 4, active: { changeId }, changes: [{ changeId }] });
    expect(during.leases.map((l: Json) => [l.partition, l.heldByChanger])).toEqual([[0, false], [1, false], [2, false], [3, false]]);
    const change = (p: string) => call(leader, 'getPartitionChange', { method: 'GET', path: `ops/partitions/${p}`, params: { changeId: p } });
    expect((await change(changeId)).json).toEqual(changeCreated.json.change);
    expect((await change(changeId.toUpperCase())).json.changeId).toBe(changeId);
    expect((await change('nope')).status).toBe(404);
    expect((await change('01a21664-e75d-7511-bfbf-d9834bd6e04b')).status).toBe(404);

    // Cancel before the switch: bad input refused with nothing stored; cancelled (the count stays), a retry harmless.
    const cancelChange = (p: string, body?: string, headers: Record<string, string> = J) => call(follower, 'cancelPartitionChange',
      { method: 'POST', path: `ops/partitions/${p}/cancel`, params: { changeId: p }, ...(body === undefined ? {} : { body, headers }) });
    for (const bad of ['{"reason":""}', '{"x":1}', '[1]', '{']) expect((await cancelChange(changeId, bad)).status, bad).toBe(400);
    expect((await cancelChange(changeId, '{"reason":"r"}', { 'content-type': 'text/plain' })).status).toBe(415);
    expect((await cancelChange(changeId, `{"reason":"${'x'.repeat(300_000)}"}`)).status).toBe(413);
    expect((await cancelChange('nope')).status).toBe(404);
    expect((await cancelChange('01a21664-e75d-7511-bfbf-d9834bd6e04b')).status).toBe(404);
    expect((await change(changeId)).json).toEqual(changeCreated.json.change); // nothing stored
    // A live instance of an older release (its changer takes no part in a cancel): 409 naming it, the change untouched.
    await follower.stores.instances.heartbeat({ holderId: 'oa-probe', version: '0.1.0', roles: ['http', 'timer'], partitions: [0] });
    const olderLive = await cancelChange(changeId);
    expect([olderLive.status, olderLive.json.type, olderLive.json.olderInstances])
      .toEqual([409, 'urn:submission-manager:problem:older-release-live', [{ holderId: 'oa-probe', version: '0.1.0' }]]);
    expect(olderLive.json.detail).toMatch(/^oa-probe \(0\.1\.0\) runs a release older than 0\.3\.0, whose changer takes no part in a cancel: .* cancel again /);
    expect(await follower.stores.partitions.getChange(changeId)).toMatchObject({ state: 'preparing', cancelledAt: null });
    await follower.stores.instances.remove('oa-probe');
    const cancelled = await cancelChange(changeId, '{"reason":"stuck"}');
    expect([cancelled.status, cancelled.json]).toMatchObject([200, { cancelled: true, alreadyCancelled: false, leasesReleased: 0,
      change: { changeId, state: 'cancelled', cancelledBy: 'admin@oa-follower', stuck: false } }]);
    expect((await cancelChange(changeId)).json).toMatchObject({ cancelled: true, alreadyCancelled: true, change: cancelled.json.change });
    expect((await partitionsOf(wide)).json).toMatchObject({ count: 1, active: null, changes: [{ changeId, state: 'cancelled' }] });
    // A change that switched (fenced by leases of its own here): stuck after PARTITION_CHANGE_STUCK_STEPS failed steps, shown
    // so; cancel refused (409, nothing written), it rolls forward.
    const ps = follower.stores.partitions;
    const second = await ps.requestChange(2, 'oa', '01a21664-e75d-7511-bfbf-d9834bd6e04c');
    if (second.kind !== 'created') throw new Error(second.kind);
    const secondId = second.change.changeId;
    await ps.prepareBatch(secondId, { limit: 1_000_000, horizon: new Date(0) });
    const fence = await Promise.all([0, 1].map(async (k) => {
      const a = await follower.stores.lease.tryAcquire(`oa-fence-${k}`, 'oa~partition-change', 60_000);
      if (!a.acquired) throw new Error('fence');
      return { leaseName: `oa-fence-${k}`, holderId: 'oa~partition-change', leaseEpoch: a.lease.leaseEpoch };
    }));
    await ps.claimChange([fence[0]!], secondId);
    expect(await ps.switchCount(fence, secondId)).toMatchObject({ kind: 'ok', value: { state: 'reassigning' } });
    for (let i = 0; i < follower.config.partitions.stuckSteps; i++) await ps.recordStepFailure(secondId, 'StoreError transient 57014');
    expect((await change(secondId)).json).toMatchObject({ state: 'reassigning', failedSteps: 5, stuck: true, lastStepError: 'StoreError transient 57014' });
    const refused = await cancelChange(secondId);
    expect([refused.status, refused.json.type, refused.json.change.state]).toEqual([409, 'urn:submission-manager:problem:partition-change-switched', 'reassigning']);
    expect(refused.json.detail).toMatch(/switched the count to 2 at .*: intents already live under the new count, so it can only roll forward/);
    expect(await ps.getChange(secondId)).toMatchObject({ state: 'reassigning', cancelledAt: null });
    await ps.completeChange(fence, secondId);
    const completed = await cancelChange(secondId);
    expect([completed.status, completed.json.type]).toEqual([409, 'urn:submission-manager:problem:partition-change-completed']);
    // A cancel after the preparing pass moved finished intents: they go back under the count in force first (the change
    // runs from that count to itself meanwhile). Asking for that count changes nothing (200); another count waits (409 saying so).
    const { put } = changeArrangement(() => follower.stores as never);
    const moving = Array.from({ length: 40 }, (_, i) => `mb-${i}`).filter((k) => assignPartition({ intentId: k, partitionKey: k }, 4) !== assignPartition({ intentId: k, partitionKey: k }, 2));
    for (const key of moving.slice(0, 3)) expect((await follower.stores.intents.cancel((await put({ key })).intentId)).kind).toBe('ok');
    const third = await ps.requestChange(4, 'oa', '01a21664-e75d-7511-bfbf-d9834bd6e04d');
    if (third.kind !== 'created') throw new Error(third.kind);
    expect((await ps.prepareBatch(third.change.changeId, { limit: 1_000_000, horizon: new Date(Date.now() + 60_000) }))!.rowsMoved).toBeGreaterThanOrEqual(3);
    expect((await cancelChange(third.change.changeId)).json).toMatchObject({ cancelled: true, movingBack: true, change: { state: 'preparing', toCount: 2 } });
    expect(await setCount(wide, '{"count":2}')).toMatchObject({ status: 200, json: { unchanged: true, count: 2 } });
    const waits = await setCount(wide, '{"count":3}');
    expect([waits.status, waits.json.type]).toEqual([409, 'urn:submission-manager:problem:partition-change-active']);
    expect(waits.json.detail).toContain('it was cancelled and moves the finished intents its preparing pass had moved back under count 2, then ends by itself');
    expect(await ps.prepareBatch(third.change.changeId, { limit: 1_000_000, horizon: new Date(Date.now() + 60_000) })).toMatchObject({ state: 'cancelled' });
    const after = (await partitionsOf(wide)).json;
    expect([after.count, after.active, after.changes[0].changeId, after.changes[0].state]).toEqual([2, null, third.change.changeId, 'cancelled']);

    // The database is unreachable: 503 problem+json (documented on every route that needs it).
    for (const [name, c] of [['getIntent', { method: 'GET', path: `intents/${id}`, params: { id } }], ['getExecution', { method: 'GET', path: 'ops/execution' }], ['getInstances', { method: 'GET', path: 'instances' }],
      ['pauseExecution', { method: 'POST', path: 'ops/execution/pause' }], ['listIntents', { method: 'GET', path: 'intents' }],
      ['redriveIntents', { method: 'POST', path: 'ops/intents/redrive', body: '{"filter":{}}', headers: J }],
      ['getPartitions', { method: 'GET', path: 'ops/partitions' }], ['postPartitions', { method: 'POST', path: 'ops/partitions', body: '{"count":1}', headers: J }],
      ['getPartitionChange', { method: 'GET', path: `ops/partitions/${changeId}`, params: { changeId } }],
      ['cancelPartitionChange', { method: 'POST', path: `ops/partitions/${changeId}/cancel`, params: { changeId } }]] as [string, Call][]) {
      expect((await call(broken, name, c)).status, name).toBe(503);
    }

    // Coverage: every operation answered, with every documented status but 500/503.
    for (const [name, { op }] of ops) {
      const want = Object.keys(op.responses).map(Number).filter((s) => s !== 500 && s !== 503).sort();
      expect([...(exercised.get(name) ?? [])].filter((s) => s !== 503).sort(), name).toEqual(want);
    }
  });
});
