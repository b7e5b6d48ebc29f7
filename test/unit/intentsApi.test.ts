// The intents HTTP handlers against real databases (every dialect, a fresh schema per test), driven with
// fake ApiRequest objects. Bad input must give the right status, a problem+json naming the field, and
// store nothing.
import { Writable } from 'node:stream';
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import type { Stores } from '../../src/store/stores.js';
import { StoreError } from '../../src/store/ports.js';
import type { IntentStore } from '../../src/store/intentPorts.js';
import { createIntentHandlers, type IntentHandlers } from '../../src/http/intents.js';
import type { ApiResponse } from '../../src/http/problem.js';
import { MAX_BODY_BYTES, type ApiRequest } from '../../src/http/request.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { partitionOf } from '../../src/intents/partition.js';
import { createLogger } from '../../src/observability/logger.js';

const CONFIG = {
  retry: { defaultMaxAttempts: 5, baseDelayMs: 1_000, maxDelayMs: 60_000 },
  provider: { url: 'http://provider.test/submit', timeoutMs: 1_000 },
};
const LEASE = 'submission-manager-executor';

interface Fake { path?: string; query?: string; body?: string | object; headers?: Record<string, string | null>; params?: Record<string, string> }

/** A fake request: object bodies are JSON with an accurate content-length unless headers override (null = absent). */
function request(f: Fake): ApiRequest {
  const text = f.body === undefined ? '' : typeof f.body === 'string' ? f.body : JSON.stringify(f.body);
  const headers: Record<string, string | null> = {
    ...(f.body !== undefined ? { 'content-type': 'application/json', 'content-length': String(Buffer.byteLength(text)) } : {}),
    ...Object.fromEntries(Object.entries(f.headers ?? {}).map(([k, v]) => [k.toLowerCase(), v])),
  };
  return {
    method: 'POST',
    url: `http://localhost:7071${f.path ?? '/api/intents'}${f.query ?? ''}`,
    headers: { get: (n) => headers[n.toLowerCase()] ?? null },
    params: f.params ?? {},
    text: async () => text,
  };
}

const parse = (r: ApiResponse) => JSON.parse(r.body ?? 'null') as Record<string, any>;

type HandlerName = keyof IntentHandlers;
interface BadCase { name: string; handler: HandlerName; req: Fake; status: number; names: string }

const big = (bytes: number) => {
  const shell = JSON.stringify({ payload: { x: '' } });
  return JSON.stringify({ payload: { x: 'a'.repeat(bytes - shell.length) } });
};
const nested = (depth: number): object => (depth === 0 ? {} : { n: nested(depth - 1) });
const someId = '0190f0e0-0000-7000-8000-000000000000';

const BAD: BadCase[] = [
  { name: 'malformed JSON', handler: 'postIntent', req: { body: '{"payload":' }, status: 400, names: 'body' },
  { name: 'empty body', handler: 'postIntent', req: { body: '' }, status: 400, names: 'body' },
  { name: 'body is an array', handler: 'postIntent', req: { body: [] }, status: 400, names: 'body' },
  { name: 'body is null', handler: 'postIntent', req: { body: 'null' }, status: 400, names: 'body' },
  { name: 'payload missing', handler: 'postIntent', req: { body: { maxAttempts: 2 } }, status: 400, names: 'payload' },
  { name: 'payload array', handler: 'postIntent', req: { body: { payload: [1] } }, status: 400, names: 'payload' },
  { name: 'payload null', handler: 'postIntent', req: { body: { payload: null } }, status: 400, names: 'payload' },
  { name: 'payload string', handler: 'postIntent', req: { body: { payload: 'x' } }, status: 400, names: 'payload' },
  { name: 'payload with NUL', handler: 'postIntent', req: { body: { payload: { s: 'a\u0000b' } } }, status: 400, names: 'payload' },
  { name: 'payload with a lone surrogate', handler: 'postIntent', req: { body: '{"payload":{"s":"\\ud800"}}' }, status: 400, names: 'payload' },
  { name: 'payload with a non-finite number', handler: 'postIntent', req: { body: '{"payload":{"n":1e999}}' }, status: 400, names: 'payload' },
  { name: 'payload nested too deep', handler: 'postIntent', req: { body: { payload: nested(80) } }, status: 400, names: 'payload' },
  { name: 'maxAttempts 0', handler: 'postIntent', req: { body: { payload: {}, maxAttempts: 0 } }, status: 400, names: 'maxAttempts' },
  { name: 'maxAttempts 51', handler: 'postIntent', req: { body: { payload: {}, maxAttempts: 51 } }, status: 400, names: 'maxAttempts' },
  { name: 'maxAttempts 1.5', handler: 'postIntent', req: { body: { payload: {}, maxAttempts: 1.5 } }, status: 400, names: 'maxAttempts' },
  { name: 'maxAttempts string', handler: 'postIntent', req: { body: { payload: {}, maxAttempts: '3' } }, status: 400, names: 'maxAttempts' },
  { name: 'unknown key', handler: 'postIntent', req: { body: { payload: {}, priority: 1 } }, status: 400, names: 'priority' },
  { name: 'notBefore number', handler: 'postIntent', req: { body: { payload: {}, notBefore: 123 } }, status: 400, names: 'notBefore' },
  { name: 'notBefore date only', handler: 'postIntent', req: { body: { payload: {}, notBefore: '2030-01-01' } }, status: 400, names: 'notBefore' },
  { name: 'notBefore without offset', handler: 'postIntent', req: { body: { payload: {}, notBefore: '2030-01-01T00:00:00' } }, status: 400, names: 'notBefore' },
  { name: 'notBefore impossible date', handler: 'postIntent', req: { body: { payload: {}, notBefore: '2030-02-30T00:00:00Z' } }, status: 400, names: 'notBefore' },
  { name: 'notBefore year 0000', handler: 'postIntent', req: { body: { payload: {}, notBefore: '0000-01-01T00:00:00Z' } }, status: 400, names: 'notBefore' },
  { name: 'notBefore past year 9999 in UTC', handler: 'postIntent', req: { body: { payload: {}, notBefore: '9999-12-31T23:59:59-05:00' } }, status: 400, names: 'notBefore' },
  { name: 'notBefore words', handler: 'postIntent', req: { body: { payload: {}, notBefore: 'tomorrow' } }, status: 400, names: 'notBefore' },
  { name: 'oversize body (256 KiB + 1)', handler: 'postIntent', req: { body: big(MAX_BODY_BYTES + 1) }, status: 413, names: 'body' },
  { name: 'content-length lying small', handler: 'postIntent', req: { body: big(MAX_BODY_BYTES + 1), headers: { 'content-length': '20' } }, status: 413, names: 'body' },
  { name: 'content-length declared huge', handler: 'postIntent', req: { body: { payload: {} }, headers: { 'content-length': '999999999' } }, status: 413, names: 'body' },
  { name: 'multi-byte body over the byte limit', handler: 'postIntent', req: { body: { payload: { x: 'é'.repeat(MAX_BODY_BYTES / 2) } }, headers: { 'content-length': null } }, status: 413, names: 'body' },
  { name: 'wrong content type', handler: 'postIntent', req: { body: { payload: {} }, headers: { 'content-type': 'text/plain' } }, status: 415, names: 'content-type' },
  { name: 'non-utf-8 charset', handler: 'postIntent', req: { body: { payload: {} }, headers: { 'content-type': 'application/json; charset=latin1' } }, status: 415, names: 'content-type' },
  { name: 'missing content type', handler: 'postIntent', req: { body: { payload: {} }, headers: { 'content-type': null } }, status: 415, names: 'content-type' },
  { name: 'idempotency key too long', handler: 'postIntent', req: { body: { payload: {} }, headers: { 'idempotency-key': 'k'.repeat(256) } }, status: 400, names: 'Idempotency-Key' },
  { name: 'idempotency key not ASCII', handler: 'postIntent', req: { body: { payload: {} }, headers: { 'idempotency-key': 'ключ' } }, status: 400, names: 'Idempotency-Key' },
  { name: 'idempotency key empty', handler: 'postIntent', req: { body: { payload: {} }, headers: { 'idempotency-key': '' } }, status: 400, names: 'Idempotency-Key' },
  { name: 'idempotency key control char', handler: 'postIntent', req: { body: { payload: {} }, headers: { 'idempotency-key': 'a\tb' } }, status: 400, names: 'Idempotency-Key' },
  { name: 'partitionKey empty', handler: 'postIntent', req: { body: { payload: {}, partitionKey: '' } }, status: 400, names: 'partitionKey' },
  { name: 'partitionKey of 129 characters', handler: 'postIntent', req: { body: { payload: {}, partitionKey: 'k'.repeat(129) } }, status: 400, names: 'partitionKey' },
  { name: 'partitionKey of 129 emoji', handler: 'postIntent', req: { body: { payload: {}, partitionKey: '😀'.repeat(129) } }, status: 400, names: 'partitionKey' },
  { name: 'partitionKey a number', handler: 'postIntent', req: { body: { payload: {}, partitionKey: 42 } }, status: 400, names: 'partitionKey' },
  { name: 'partitionKey null', handler: 'postIntent', req: { body: { payload: {}, partitionKey: null } }, status: 400, names: 'partitionKey' },
  { name: 'partitionKey with NUL', handler: 'postIntent', req: { body: { payload: {}, partitionKey: 'a\u0000b' } }, status: 400, names: 'partitionKey' },
  { name: 'partitionKey with a lone surrogate', handler: 'postIntent', req: { body: '{"payload":{},"partitionKey":"\\udc00"}' }, status: 400, names: 'partitionKey' },
  { name: 'get unknown id', handler: 'getIntent', req: { params: { id: uuidv7() } }, status: 404, names: 'intent' },
  { name: 'get non-uuid id', handler: 'getIntent', req: { params: { id: "x' OR 1=1 --" } }, status: 404, names: 'intent' },
  { name: 'attempts of unknown id', handler: 'getIntentAttempts', req: { params: { id: someId } }, status: 404, names: 'intent' },
  { name: 'cancel unknown id', handler: 'postCancel', req: { params: { id: someId } }, status: 404, names: 'intent' },
  { name: 'cancel non-uuid id', handler: 'postCancel', req: { params: { id: 'nope' } }, status: 404, names: 'intent' },
  { name: 'reschedule unknown id', handler: 'postReschedule', req: { params: { id: someId }, body: { notBefore: '2030-01-01T00:00:00Z' } }, status: 404, names: 'intent' },
  { name: 'reschedule bad notBefore', handler: 'postReschedule', req: { params: { id: someId }, body: { notBefore: 'soon' } }, status: 400, names: 'notBefore' },
  { name: 'reschedule unknown key', handler: 'postReschedule', req: { params: { id: someId }, body: { notBefore: '2030-01-01T00:00:00Z', x: 1 } }, status: 400, names: 'x' },
  { name: 'reschedule wrong content type', handler: 'postReschedule', req: { params: { id: someId }, body: '{}', headers: { 'content-type': 'text/json' } }, status: 415, names: 'content-type' },
  { name: 'list bad status', handler: 'listIntents', req: { query: '?status=done' }, status: 400, names: 'status' },
  { name: 'list limit 0', handler: 'listIntents', req: { query: '?limit=0' }, status: 400, names: 'limit' },
  { name: 'list limit 501', handler: 'listIntents', req: { query: '?limit=501' }, status: 400, names: 'limit' },
  { name: 'list limit not a number', handler: 'listIntents', req: { query: '?limit=ten' }, status: 400, names: 'limit' },
  { name: 'list after not a uuid', handler: 'listIntents', req: { query: '?after=123' }, status: 400, names: 'after' },
  { name: 'list status twice', handler: 'listIntents', req: { query: '?status=failed&status=scheduled' }, status: 400, names: 'status' },
];

describe.each(dialects)('intents API: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  let h: IntentHandlers;
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    s = await ctx.openStores();
    h = createIntentHandlers({ intents: s.intents, lease: s.lease, leaseName: LEASE, config: CONFIG });
  });

  const rows = () => ctx.countIntents();
  const submit = (body: object, key?: string) => h.postIntent(request({ body, headers: key ? { 'idempotency-key': key } : {} }));

  it.each(BAD)('$name → $status problem naming "$names", nothing stored', async (c) => {
    const res = await h[c.handler](request(c.req));
    expect(res.status).toBe(c.status);
    expect(res.headers['content-type']).toBe('application/problem+json');
    const p = parse(res);
    expect(p).toMatchObject({ status: c.status, title: expect.any(String), type: expect.stringMatching(/^urn:/) });
    expect(p.detail).toContain(c.names);
    if (c.status === 400) expect((p.errors as { path: string }[]).map((e) => e.path)).toContain(c.names);
    expect(await rows()).toBe(0);
  });

  it('creates an intent: 201, Location, view with payload, immutable contract snapshot', async () => {
    const res = await h.postIntent(request({ body: { payload: { order: 42, note: 'ü 😀' }, notBefore: '2030-01-01T02:00:00+02:00' }, headers: { 'content-type': 'application/json; charset=UTF-8' } }));
    expect(res.status).toBe(201);
    expect(res.headers['content-type']).toBe('application/json');
    const v = parse(res);
    expect(res.headers.location).toBe(`/api/intents/${v.intentId}`);
    expect(v).toMatchObject({ status: 'scheduled', attemptCount: 0, maxAttempts: 5, nextAttemptAt: '2030-01-01T00:00:00.000Z', lastError: null, payload: { order: 42, note: 'ü 😀' } });
    const stored = await ctx.intentRows();
    expect(stored.map((r) => r.intentId)).toEqual([v.intentId]);
    expect(stored[0]!.contract).toEqual({ provider: { url: CONFIG.provider.url }, payload: { order: 42, note: 'ü 😀' }, retry: { maxAttempts: 5, baseDelayMs: 1_000, maxDelayMs: 60_000 } });
    const got = await h.getIntent(request({ path: `/api/intents/${v.intentId}`, params: { id: v.intentId } }));
    expect(got.status).toBe(200);
    expect(parse(got)).toEqual(v);
    const attempts = await h.getIntentAttempts(request({ params: { id: v.intentId.toUpperCase() } }));
    expect(parse(attempts)).toEqual({ intentId: v.intentId, attempts: [] });
  });

  it('idempotent replay → 200 with the same intent (key order and offset do not matter)', async () => {
    const a = await submit({ payload: { a: 1, b: { c: 2, d: 3 } }, notBefore: '2030-01-01T00:00:00Z', maxAttempts: 5 }, 'key-1');
    expect(a.status).toBe(201);
    const b = await submit({ maxAttempts: 5, notBefore: '2030-01-01T01:00:00.000+01:00', payload: { b: { d: 3, c: 2 }, a: 1 } }, 'key-1');
    expect(b.status).toBe(200);
    expect(parse(b).intentId).toBe(parse(a).intentId);
    // maxAttempts omitted resolves to the default (5): still the same request.
    const c = await submit({ payload: { a: 1, b: { c: 2, d: 3 } }, notBefore: '2030-01-01T00:00:00Z' }, 'key-1');
    expect(c.status).toBe(200);
    expect(await rows()).toBe(1);
  });

  it('key reused with a different body → 409, the stored intent untouched, still one row', async () => {
    const a = parse(await submit({ payload: { a: 1 } }, 'key-2'));
    const res = await submit({ payload: { a: 2 } }, 'key-2');
    expect(res.status).toBe(409);
    expect(res.headers['content-type']).toBe('application/problem+json');
    expect(parse(res)).toMatchObject({ status: 409, intentId: a.intentId, detail: expect.stringContaining('Idempotency-Key') });
    expect(await rows()).toBe(1);
    expect(parse(await h.getIntent(request({ params: { id: a.intentId } }))).payload).toEqual({ a: 1 });
  });

  it('partitionKey: accepted, shown with its partition (0 with one partition); without one: partition 0, null key', async () => {
    const keyed = await submit({ payload: { a: 1 }, partitionKey: 'tenant-😀' });
    expect(keyed.status).toBe(201);
    expect(parse(keyed)).toMatchObject({ partition: 0, partitionKey: 'tenant-😀' });
    const plain = parse(await submit({ payload: { a: 1 } }));
    expect(plain).toMatchObject({ partition: 0, partitionKey: null });
    expect(parse(await h.getIntent(request({ params: { id: parse(keyed).intentId } })))).toMatchObject({ partition: 0, partitionKey: 'tenant-😀' });
    const list = parse(await h.listIntents(request({})));
    expect(list.items.map((i: any) => [i.partition, i.partitionKey])).toEqual([[0, 'tenant-😀'], [0, null]]);
    expect((await ctx.intentRows()).map((r) => [r.partition, r.partitionKey])).toEqual([[0, 'tenant-😀'], [0, null]]);    const widest = await submit({ payload: {}, partitionKey: '😀'.repeat(128) }); // 128 characters, 256 UTF-16 units
    expect(widest.status).toBe(201);
    expect(parse(widest).partitionKey).toBe('😀'.repeat(128));
  });

  it('7 partitions recorded: one key, one partition (the pinned rule); without a key the id decides', async () => {
    await s.partitions.recordPartitionCount(7, 'host-a'); // the insert takes the count the database records (issue 26)
    const submit7 = (body: object) => h.postIntent(request({ body }));
    for (let i = 0; i < 5; i++) expect(parse(await submit7({ payload: { i }, partitionKey: 'customer-42' })).partition).toBe(partitionOf('customer-42', 7));
    const ids = [];
    for (let i = 0; i < 20; i++) ids.push(parse(await submit7({ payload: { i } })));
    for (const v of ids) expect(v.partition).toBe(partitionOf(v.intentId, 7));
    expect(new Set(ids.map((v) => v.partition)).size).toBeGreaterThan(1);
    for (const r of await ctx.intentRows()) expect(r.partition).toBe(partitionOf(r.partitionKey ?? r.intentId, 7));
  });

  it('partitionKey is part of the idempotent request: the same key replays; another key, or none, is a 409 and stores nothing', async () => {
    const a = await submit({ payload: { a: 1 }, partitionKey: 'p-1' }, 'key-p');
    expect(a.status).toBe(201);
    const replay = await submit({ partitionKey: 'p-1', payload: { a: 1 } }, 'key-p');
    expect(replay.status).toBe(200);
    expect(parse(replay)).toEqual(parse(a));
    for (const body of [{ payload: { a: 1 }, partitionKey: 'p-2' }, { payload: { a: 1 } }, { payload: { a: 1 }, partitionKey: 'P-1' }]) {
      const res = await submit(body, 'key-p');
      expect(res.status).toBe(409);
      expect(parse(res)).toMatchObject({ intentId: parse(a).intentId });
    }
    // …and the other way round: first without a key, then with one.
    expect((await submit({ payload: { b: 1 } }, 'key-q')).status).toBe(201);
    expect((await submit({ payload: { b: 1 }, partitionKey: 'p-1' }, 'key-q')).status).toBe(409);
    expect(await rows()).toBe(2);
    expect((await ctx.intentRows()).map((r) => r.partitionKey).sort()).toEqual(['p-1', null].sort());
  });

  it('cancel: scheduled → 200 cancelled; again → 409 naming the current status', async () => {
    const { intentId } = parse(await submit({ payload: {} }));
    const ok = await h.postCancel(request({ params: { id: intentId } }));
    expect(ok.status).toBe(200);
    expect(parse(ok).status).toBe('cancelled');
    const again = await h.postCancel(request({ params: { id: intentId } }));
    expect(again.status).toBe(409);
    expect(parse(again)).toMatchObject({ status: 409, intentStatus: 'cancelled', detail: expect.stringContaining('cancelled') });
  });

  it('reschedule: scheduled → 200; in_flight → 409; terminal → 409', async () => {
    const { intentId } = parse(await submit({ payload: {} }));
    const body = { notBefore: '2031-06-01T12:00:00Z' };
    const ok = await h.postReschedule(request({ params: { id: intentId }, body }));
    expect(ok.status).toBe(200);
    expect(parse(ok).nextAttemptAt).toBe('2031-06-01T12:00:00.000Z');
    for (const status of ['in_flight', 'succeeded'] as const) {
      await ctx.setIntentStatus(intentId, status);
      const res = await h.postReschedule(request({ params: { id: intentId }, body: { notBefore: '2040-01-01T00:00:00Z' } }));
      expect(res.status).toBe(409);
      expect(parse(res)).toMatchObject({ intentStatus: status, detail: expect.stringContaining(status) });
    }
    expect(parse(await h.getIntent(request({ params: { id: intentId } }))).nextAttemptAt).toBe('2031-06-01T12:00:00.000Z');
  });

  it('lists without payloads, filtered and paged by nextAfter; ignores host parameters like code', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(parse(await submit({ payload: { i } })).intentId);
    await h.postCancel(request({ params: { id: ids[3]! } }));
    const page1 = parse(await h.listIntents(request({ query: '?limit=2&code=secret' })));
    expect(page1.items.map((i: any) => i.intentId)).toEqual(ids.slice(0, 2));
    expect(page1.items[0].payload).toBeUndefined();
    expect(page1.nextAfter).toBe(ids[1]);
    const page2 = parse(await h.listIntents(request({ query: `?limit=2&after=${page1.nextAfter}&status=scheduled` })));
    expect(page2.items.map((i: any) => i.intentId)).toEqual([ids[2], ids[4]]);
    const all = parse(await h.listIntents(request({})));
    expect(all.items).toHaveLength(5);
    expect(all.nextAfter).toBeNull();
  });

  it('getLease: 404 before any acquire; holder, epoch and expiry (database time) after', async () => {
    const none = await h.getLease(request({ path: '/api/lease' }));
    expect(none.status).toBe(404);
    expect(none.headers['content-type']).toBe('application/problem+json');
    await s.lease.tryAcquire(LEASE, 'holder-a', 60_000);
    const res = await h.getLease(request({ path: '/api/lease' }));
    expect(res.status).toBe(200);
    const v = parse(res);
    expect(v).toMatchObject({ leaseName: LEASE, holderId: 'holder-a', leaseEpoch: 1, expired: false });
    expect(Date.parse(v.expiresAt) - Date.parse(v.acquiredAt)).toBe(60_000);
    await s.lease.release({ leaseName: LEASE, holderId: 'holder-a', leaseEpoch: 1 });
    expect(parse(await h.getLease(request({ path: '/api/lease' })))).toMatchObject({ leaseEpoch: 1, expired: true });
  });

  it('store failure → 503 with a generic detail; logs name the error, never the payload', async () => {
    const lines: string[] = [];
    const logger = createLogger('info', new Writable({ write(c, _e, cb) { lines.push(String(c)); cb(); } }));
    const failing: IntentStore = Object.assign(Object.create(s.intents) as IntentStore, {
      insert: async () => { throw new StoreError('transient', 'connection reset', 'ECONNRESET'); },
    });
    const metrics: string[] = [];
    const hf = createIntentHandlers({ intents: failing, lease: s.lease, leaseName: LEASE, config: CONFIG, logger, metrics: (e) => metrics.push(`${e.name}:${e.outcome}`) });
    const res = await hf.postIntent(request({ body: { payload: { secret: 'TOP-SECRET-VALUE' } } }));
    expect(res.status).toBe(503);
    expect(res.headers['retry-after']).toBe('1');
    expect(parse(res)).toMatchObject({ status: 503, detail: 'the database is unavailable; retry later' });
    expect(lines.join('')).toContain('ECONNRESET');
    expect(lines.join('')).not.toContain('TOP-SECRET-VALUE');
    await hf.postIntent(request({ body: { payload: [] } }));
    expect(metrics).toEqual(['intent_submit:invalid']);
    expect(await rows()).toBe(0);
  });
});
