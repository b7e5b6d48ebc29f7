// GET /api/leases and /api/leases/{partition} over real HTTP (issue 25): a local host process with
// EXECUTOR_PARTITIONS=4 on a fresh PostgreSQL database and no timers (nothing of its own acquires a lease); the test
// acquires the lease rows of partitions 1 and 3 through the LeaseStore, partition 3's only briefly, and submits
// intents through the API. Every partition is listed with its holder only while held (by database time), its
// backlog as submitted (due now vs later), and one partition reads alone; bad partitions are problem+json.
// GET /api/lease still answers for partition 0 exactly as before (404 while never acquired).
import { afterAll, beforeAll, describe, expect, inject, it } from 'vitest';
import { loadConfig } from '../../src/config.js';
import { openStores } from '../../src/store/open.js';
import type { Stores } from '../../src/store/stores.js';
import { partitionLeaseName } from '../../src/limits.js';
import { silentLogger } from '../../src/observability/logger.js';
import { FAST_ENV, createPgDatabase, ensureBuilt, killAll, startHost, type HostProcess, type PgTestDatabase } from '../support/localHostProcess.js';

const P = 4;
const LEASE = 'p25-leases';
let db: PgTestDatabase;
let host: HostProcess;
let stores: Stores;
const submitted: { partition: number; due: boolean }[] = [];

const get = async (path: string) => {
  const r = await fetch(`${host.api}${path}`);
  return { status: r.status, type: r.headers.get('content-type'), body: (await r.json()) as Record<string, unknown> };
};

describe.skipIf(inject('pgUnavailable'))('GET /api/leases over HTTP, P = 4', () => {
  beforeAll(async () => {
    ensureBuilt();
    db = await createPgDatabase();
    const env = { ...FAST_ENV, DATABASE_URL: db.url, EXECUTOR_PARTITIONS: String(P), LEASE_NAME: LEASE, TIMER_MODE: 'off', INSTANCES: '1' };
    host = await startHost(env);
    const config = loadConfig({ ...env, PROVIDER_URL: 'http://127.0.0.1:1/' });
    stores = await openStores(config.database, config, silentLogger);
    expect((await stores.lease.tryAcquire(partitionLeaseName(LEASE, 1), 'holder-one', 60_000)).acquired).toBe(true);
    expect((await stores.lease.tryAcquire(partitionLeaseName(LEASE, 3), 'holder-three', 50)).acquired).toBe(true);
    // Keys spread the intents over the partitions (the response names each one's partition); some are due later.
    for (let i = 0; i < 24; i++) {
      const later = i % 3 === 0;
      const r = await fetch(`${host.api}/intents`, {
        method: 'POST', headers: { 'content-type': 'application/json' },
        body: JSON.stringify({ payload: { i }, partitionKey: `tenant-${i % 7}`, ...(later ? { notBefore: '2099-01-01T00:00:00Z' } : {}) }),
      });
      expect(r.status).toBe(201);
      submitted.push({ partition: ((await r.json()) as { partition: number }).partition, due: !later });
    }
    await new Promise((r) => setTimeout(r, 100)); // partition 3's row expires
  }, 120_000);

  afterAll(async () => {
    await stores?.close();
    await killAll(host ? [host] : []);
    await db?.drop();
  });

  it('lists every partition: held ones with holder and epoch, unheld ones without a holder; backlog as submitted', async () => {
    const r = await get('/leases');
    expect(r.status).toBe(200);
    expect(r.type).toMatch(/^application\/json/);
    const body = r.body as { partitions: number; dbNow: string; leases: Record<string, unknown>[] };
    expect(body.partitions).toBe(P);
    expect(body.leases.map((l) => [l.partition, l.leaseName])).toEqual([[0, LEASE], [1, `${LEASE}#1`], [2, `${LEASE}#2`], [3, `${LEASE}#3`]]);
    expect(body.leases[1]).toMatchObject({ held: true, holderId: 'holder-one', lastHolderId: 'holder-one', leaseEpoch: 1 });
    expect(Date.parse(body.leases[1]!.expiresAt as string)).toBeGreaterThan(Date.parse(body.dbNow));
    expect(body.leases[3]).toMatchObject({ held: false, holderId: null, lastHolderId: 'holder-three', leaseEpoch: 1 });
    for (const p of [0, 2]) {
      expect(body.leases[p]).toMatchObject({ held: false, holderId: null, lastHolderId: null, leaseEpoch: 0, acquiredAt: null, expiresAt: null });
    }
    const used = new Set(submitted.map((s) => s.partition));
    expect(used.size, 'the keys spread over several partitions').toBeGreaterThan(1);
    for (const l of body.leases) {
      const mine = submitted.filter((s) => s.partition === l.partition);
      expect(l.backlog, `partition ${l.partition}`).toEqual({ scheduled: mine.length, due: mine.filter((s) => s.due).length });
      expect(l.lastAttemptAt).toBeNull(); // nothing executes here
    }
  });

  it('reads one partition for a fencing check; 400 for a non-integer, 404 naming the range outside it', async () => {
    const one = await get('/leases/1');
    expect(one.status).toBe(200);
    expect(one.body).toMatchObject({ partition: 1, held: true, holderId: 'holder-one', leaseEpoch: 1 });
    expect(typeof one.body.dbNow).toBe('string');
    for (const bad of ['x', '1.5', '%20']) {
      const r = await get(`/leases/${bad}`);
      expect([r.status, r.type], bad).toEqual([400, 'application/problem+json']);
      expect(r.body).toMatchObject({ type: 'urn:submission-manager:problem:validation-error' });
      expect(r.body.detail).toMatch(/partition: must be an integer/);
    }
    for (const out of ['4', '-1', '99999']) {
      const r = await get(`/leases/${out}`);
      expect([r.status, r.type], out).toEqual([404, 'application/problem+json']);
      expect(r.body).toMatchObject({ type: 'urn:submission-manager:problem:partition-not-found', validRange: { min: 0, max: 3 } });
      expect(r.body.detail).toContain('partitions are 0..3');
    }
  });

  it('GET /api/lease answers for partition 0 as before: 404 while its row was never acquired, then the row', async () => {
    expect((await get('/lease')).status).toBe(404);
    expect((await stores.lease.tryAcquire(LEASE, 'holder-zero', 60_000)).acquired).toBe(true);
    const r = await get('/lease');
    expect(r.status).toBe(200);
    expect(r.body).toMatchObject({ leaseName: LEASE, holderId: 'holder-zero', leaseEpoch: 1, expired: false });
    expect((await get('/leases/0')).body).toMatchObject({ held: true, holderId: 'holder-zero' });
  });
});
