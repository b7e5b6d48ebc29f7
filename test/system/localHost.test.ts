// The local host end to end, as a user meets it: a real `node dist/src/local/main.js` process, real HTTP.
// (1) Embedded PGlite, 3 in-process instances, demo provider, FUNCTION_KEY set: an intent succeeds; readyz
// shows exactly one leader among the instances; keys are enforced on function-level routes only; SIGTERM
// exits 0 promptly. (2) Bad configuration: one line naming the setting, exit code 2. (3) Three processes
// (INSTANCES=1) on each database server (PostgreSQL, MariaDB, SQL Server): kill -9 the leader → another takes over after the lease and keeps
// executing; SIGTERM the new leader → the third takes over within about one tick (graceful release).
import { rmSync } from 'node:fs';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import {
  ensureBuilt, FAST_ENV, findLeader, intentStatus, killAll, postIntent, readyz, startHost, tmpDir, waitFor,
  type HostProcess, type PgTestDatabase, type ReadyView,
} from '../support/localHostProcess.js';
import { serverDatabases } from '../support/dialects.js';

const KEY = 'local-test-key';
const hosts: HostProcess[] = [];
const dirs: string[] = [];
const start = async (env: Record<string, string>) => {
  const h = await startHost(env);
  hosts.push(h);
  return h;
};

beforeAll(() => ensureBuilt(), 120_000);
afterEach(async () => {
  await killAll(hosts.splice(0));
  for (const d of dirs.splice(0)) rmSync(d, { recursive: true, force: true });
});

const succeeded = (api: string, id: string, key?: string) => () => intentStatus(api, id, key).then((s) => s === 'succeeded');

const ADMIN = 'admin-secret-for-tests';

describe('local host on embedded PGlite', () => {
  it('serves the registered functions across 3 instances, executes an intent, enforces keys, stops on SIGTERM', async () => {
    const dir = tmpDir('pglite');
    dirs.push(dir);
    const h = await start({ ...FAST_ENV, DATABASE_URL: `pglite:${dir}/db`, FUNCTION_KEY: KEY, ADMIN_KEY: ADMIN });
    expect(h.holderIds).toHaveLength(3);

    // Anonymous routes need no key; function-level routes do (header or code query).
    expect((await fetch(`${h.api}/healthz`)).status).toBe(200);
    expect((await postIntent(h.api, { n: 1 })).status).toBe(401);
    const viaQuery = await fetch(`${h.api}/intents?code=${KEY}`);
    expect(viaQuery.status).toBe(200);
    expect(h.holderIds).toContain(viaQuery.headers.get('x-instance'));

    const posted = await postIntent(h.api, { orderId: 42 }, KEY);
    expect(posted.status).toBe(201);
    await waitFor('intent succeeded', succeeded(h.api, posted.intentId, KEY), 20_000);
    const attempts = (await (await fetch(`${h.api}/intents/${posted.intentId}/attempts`, { headers: { 'x-functions-key': KEY } })).json()) as
      { attempts: { outcome: string; httpStatus: number | null }[] };
    // One success, last; an attempt before it only as one whose answer never came (a timeout on a loaded machine).
    expect(attempts.attempts.at(-1)?.outcome).toBe('succeeded');
    for (const a of attempts.attempts.slice(0, -1)) expect(a).toMatchObject({ outcome: 'retryable_error', httpStatus: null });

    // readyz, hit several times (round-robin): every instance answers, exactly one leads.
    const views = new Map<string, ReadyView>();
    await waitFor('all three instances seen', async () => {
      const v = await readyz(h.api);
      views.set(v.holderId, v);
      return views.size === 3;
    }, 5_000, 10);
    expect([...views.keys()].sort()).toEqual([...h.holderIds].sort());
    const leaders = [...views.values()].filter((v) => v.mode === 'leader');
    expect(leaders).toHaveLength(1);
    expect(leaders[0]!.leaseEpoch).toBeGreaterThanOrEqual(1);
    expect(h.lines.some((l) => /^\[inst-\d\] leader \(epoch \d+, expires /.test(l))).toBe(true);

    // Admin routes need ADMIN_KEY (the function key is not enough); the admin key also opens function routes.
    const pauseState = `${h.api}/ops/execution`;
    expect((await fetch(pauseState, { headers: { 'x-functions-key': KEY } })).status).toBe(401);
    expect((await fetch(pauseState, { headers: { 'x-functions-key': ADMIN } })).status).toBe(200);
    expect((await fetch(`${h.api}/intents`, { headers: { 'x-functions-key': ADMIN } })).status).toBe(200);

    // Routing: unknown → 404 problem+json; wrong method → 405 with Allow.
    const missing = await fetch(`${h.api}/nope`);
    expect(missing.status).toBe(404);
    expect(missing.headers.get('content-type')).toBe('application/problem+json');
    const wrong = await fetch(`${h.api}/intents`, { method: 'DELETE', headers: { 'x-functions-key': KEY } });
    expect(wrong.status).toBe(405);
    expect(wrong.headers.get('allow')).toBe('GET, POST');

    h.signal('SIGTERM');
    const exit = await h.exited;
    expect(exit).toEqual({ code: 0, signal: null });
    expect(h.lines).toContain('[host] stopped');
  });

  it('TIMER_MODE=off serves HTTP only (Flex\'s HTTP group): it accepts intents and never leads', async () => {
    const dir = tmpDir('httponly');
    dirs.push(dir);
    const http = await start({ ...FAST_ENV, DATABASE_URL: `pglite:${dir}/db`, TIMER_MODE: 'off', INSTANCES: '2' });
    await http.waitForLine(/timer mode: off/, 5_000); // printed just after the listening line startHost waits for
    const { status, intentId } = await postIntent(http.api, { order: 1 });
    expect(status).toBe(201);
    // Several timer periods pass: with timers on, one of the two instances would have led and executed it.
    await new Promise((r) => setTimeout(r, 2_000));
    expect((await readyz(http.api)).mode).toBe('follower');
    expect(await intentStatus(http.api, intentId)).toBe('scheduled');
    expect(http.lines.some((l) => /\] leader \(epoch/.test(l))).toBe(false);
  });

  it('fails at start with exit code 2 and one line naming a bad setting', async () => {
    for (const [env, name] of [
      [{ PORT: 'seventy' }, 'PORT'],
      [{ EXECUTOR_SCHEDULE: '*/x * * * * *' }, 'EXECUTOR_SCHEDULE'],
      [{ DEMO_PROVIDER_FAILURE_RATE: '2' }, 'DEMO_PROVIDER_FAILURE_RATE'],
      [{ LEASE_RENEW_INTERVAL_MS: '5000', LEASE_DURATION_MS: '3000' }, 'LEASE_RENEW_INTERVAL_MS'],
    ] as const) {
      const p = startHost({ ...FAST_ENV, DATABASE_URL: 'pglite:', ...env });
      await expect(p).rejects.toThrow(/exited \(2\)/);
      const msg = (await p.catch((e: Error) => e.message)) as string;
      expect(msg).toContain(name);
      expect(msg.split('SubmissionManager: configuration error:')).toHaveLength(2);
    }
  });
});

describe.each(serverDatabases)('local host: a multi-process cluster on the $name server', (server) => {
  const skip = server.unavailable();
  let db: PgTestDatabase | null = null;
  afterEach(async () => {
    await killAll(hosts.splice(0));
    await db?.drop();
    db = null;
  });

  it('kill -9 the leader → another leads and executes; SIGTERM the new leader → the third takes over within a tick', async (t) => {
    if (skip) return t.skip(skip);
    db = await server.create();
    const env = { ...FAST_ENV, DATABASE_URL: db.url, INSTANCES: '1' };
    const procs = await Promise.all([1, 2, 3].map((i) => start({ ...env, HOLDER_ID: `proc${i}` })));
    expect(new Set(procs.map((p) => p.holderIds[0])).size).toBe(3);

    const first = await findLeader(procs);
    const follower = procs.find((p) => p !== first.host)!;
    const a = await postIntent(follower.api, { step: 'before crash' });
    await waitFor('first intent succeeded', succeeded(follower.api, a.intentId), 15_000);

    // Crash: no release, so a survivor must wait out the lease (3 s) and acquire on its next tick.
    first.host.signal('SIGKILL');
    const survivors = procs.filter((p) => p !== first.host);
    const second = await findLeader(survivors, 30_000); // a liveness guard: the epoch and the order are the checks
    expect(second.view.leaseEpoch).toBe(first.view.leaseEpoch! + 1);
    const b = await postIntent(survivors[0]!.api, { step: 'after crash' });
    await waitFor('second intent succeeded', succeeded(survivors[0]!.api, b.intentId), 15_000);

    // Planned handover: SIGTERM releases the lease, so the third acquires within about one tick.
    second.host.signal('SIGTERM');
    expect(await second.host.exited).toEqual({ code: 0, signal: null });
    const third = procs.find((p) => p !== first.host && p !== second.host)!;
    const view = await waitFor('third leads', async () => {
      const v = await readyz(third.api);
      return v.mode === 'leader' ? v : null;
    }, 30_000, 50);
    expect(view.leaseEpoch).toBe(second.view.leaseEpoch! + 1);
    const c = await postIntent(third.api, { step: 'after handover' });
    await waitFor('third intent succeeded', succeeded(third.api, c.intentId), 15_000);

    const events = await db.sql<{ event: string; lease_epoch: string }>('SELECT event, lease_epoch FROM submission_manager_lease_events ORDER BY seq');
    // SIGTERM released the row, and the third acquired after that release (the event order).
    const released = events.findIndex((e) => e.event === 'released' && Number(e.lease_epoch) === second.view.leaseEpoch);
    expect(released).toBeGreaterThanOrEqual(0);
    expect(events.findIndex((e) => e.event === 'acquired' && Number(e.lease_epoch) === view.leaseEpoch)).toBeGreaterThan(released);
  });
});
