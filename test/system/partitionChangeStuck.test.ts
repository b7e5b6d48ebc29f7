// A count change that does not progress, end to end with separate OS processes on each server dialect (the runbook's
// "A count change that does not progress", docs/operations.md): two `node dist/src/local/main.js` processes
// (EXECUTOR_PARTITIONS=6, PARTITION_CHANGE_STUCK_STEPS=3), a provider failing 20 % with 503. Intents run; more are
// inserted due a few seconds later; a change 6 → 4 is requested and its switch made to fail at every step by a real
// fault (the count row locked by another connection past DB_STATEMENT_TIMEOUT_MS) after the leaders drained, so
// execution stops. Seen: the change reported stuck on the other process (GET /api/ops/partitions: stuck, the SQL
// code), the stuck metric counted, an error log. Then cancelled through the other process (SQL only): the count
// stays 6, the leaders resume, the finished intents the preparing pass had moved go back, every intent succeeds with
// exactly one 2xx and no call after it, and every one is in its partition under the count (the checker's rules).
import { readFileSync } from 'node:fs';
import { describe, expect, it } from 'vitest';
import { assignPartition, partitionHash } from '../../src/intents/partition.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { serverDatabases } from '../support/dialects.js';
import { killAll, waitFor, type HostProcess } from '../support/localHostProcess.js';
import {
  ADMIN_KEY, allLed, C, drained, expectCleanRun, FUNCTION_KEY, IntentStream, readHistory, requestCount, startChangeHost, useChangeFixture,
} from '../support/changeCluster.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const LATE = 40;

interface ChangeView { changeId: string; state: string; stuck: boolean; failedSteps: number; lastStepError: string | null; cancelledBy: string | null }

describe.each(serverDatabases)('a count change that does not progress ($name server)', (server) => {
  const f = useChangeFixture(server, 2727);

  const active = async (api: string): Promise<ChangeView | null> => {
    const r = await fetch(`${api}/ops/partitions`, { headers: { 'x-functions-key': ADMIN_KEY }, signal: AbortSignal.timeout(10_000) });
    return ((await r.json()) as { active: ChangeView | null }).active;
  };

  it('stuck before its switch: reported on any process, cancelled there; execution resumes and every intent runs once', async () => {
    const { db, provider, records, hosts } = f;
    hosts.push(...await Promise.all(['stk1', 'stk2'].map((h) => startChangeHost(db, provider.url, h, { PARTITION_CHANGE_STUCK_STEPS: '3' }))));
    const [a, b] = hosts as [HostProcess, HostProcess];
    await allLed(db, C, server.dbTimeSql());
    const stream = new IntentStream(() => hosts, 27);
    stream.start();
    await sleep(2_000);
    await stream.stop();
    await drained(db);
    // Intents due in a few seconds: they come due while the change holds execution (the leaders drained).
    const stores = await server.openStores(db.url, 10_000);
    const late: string[] = [];
    try {
      for (let i = 0; i < LATE; i++) {
        const intentId = uuidv7();
        late.push(intentId);
        await stores.intents.insert({ intentId, idempotencyKey: null, requestHash: 'late', maxAttempts: 25, notBefore: new Date(Date.now() + 3_000),
          contract: { provider: { url: null }, payload: { late: i }, retry: { maxAttempts: 25, baseDelayMs: 100, maxDelayMs: 500 } },
          partitionHash: partitionHash(intentId), partitionKey: null });
      }
    } finally {
      await stores.close();
    }

    const asked = await requestCount(a.api, 4);
    expect(asked).toMatchObject({ status: 202, change: { fromCount: C, toCount: 4 } });
    const changeId = asked.change!.changeId;
    // The fault: the count row, which the switch writes, held by another connection (after the request, which locks it).
    const lock = await server.holdRowLock(db, 'submission_manager_partition_count', 'id', [1]);
    let cancelled: { status: number; json: { cancelled: boolean; change: ChangeView } };
    try {
      let last: ChangeView | null = null;
      const stuck = await waitFor('the change reported stuck', async () => {
        last = await active(b.api);
        return last?.stuck ? last : null;
      }, 60_000, 250).catch((e: unknown) => {
        throw new Error(`${String(e)}; last seen ${JSON.stringify(last)}`);
      });
      expect(stuck).toMatchObject({ changeId, state: 'pending', stuck: true, lastStepError: expect.stringMatching(/^StoreError transient \w+$/) });
      expect(stuck.failedSteps).toBeGreaterThanOrEqual(3);
      const metrics = await Promise.all(hosts.map(async (h) => (await fetch(`${h.api}/metrics`, { headers: { 'x-functions-key': FUNCTION_KEY } })).text()));
      const stuckSteps = metrics.flatMap((m) => [...m.matchAll(/^partition_change_stuck_steps_total\{[^}]*\} (\d+)$/gm)].map((x) => Number(x[1])));
      expect(stuckSteps.reduce((n, x) => n + x, 0)).toBeGreaterThan(0);
      // Execution stopped: no lease is a leader's (the changer holds the ones it took; the others are free).
      const leaders = await db.sql<{ holder_id: string }>(`SELECT holder_id FROM submission_manager_leases WHERE expires_at > ${server.dbTimeSql()}`);
      expect(leaders.filter((l) => !l.holder_id.endsWith('~partition-change'))).toEqual([]);

      // The way out, through the process that does not run the changer's lock: cancel (SQL only), then the fault goes.
      const r = await fetch(`${b.api}/ops/partitions/${changeId}/cancel`, { method: 'POST', body: JSON.stringify({ reason: 'stuck test' }),
        headers: { 'content-type': 'application/json', 'x-functions-key': ADMIN_KEY }, signal: AbortSignal.timeout(30_000) });
      cancelled = { status: r.status, json: (await r.json()) as never };
    } finally {
      await lock.release();
    }
    // Its preparing pass had moved finished intents (rowsMoved > 0): they go back first (state preparing, execution goes on).
    const movingBack = (cancelled.json as unknown as { movingBack: boolean }).movingBack;
    expect(cancelled).toMatchObject({ status: 200, json: { cancelled: true, change: { changeId, state: movingBack ? 'preparing' : 'cancelled',
      cancelledBy: `admin@${b.holderIds[0]}` } } });
    const logs = hosts.map((h) => readFileSync(h.logFile, 'utf8')).join('\n').split('\n').filter((l) => l.includes('"event":"partition_change_stuck"'));
    expect(logs.length).toBeGreaterThan(0);
    expect(logs[0]).toMatch(/"level":"error"/);
    expect(logs[0]).toContain(`POST /api/ops/partitions/${changeId}/cancel`);

    await allLed(db, C, server.dbTimeSql()); // the leaders resume under the count in force
    await drained(db);
    await waitFor('the change ended as cancelled', async () => (await active(a.api)) === null, 30_000, 200);
    const r = await fetch(`${a.api}/ops/partitions/${changeId}`, { headers: { 'x-functions-key': ADMIN_KEY } });
    expect(await r.json()).toMatchObject({ state: 'cancelled', stuck: false, switchedAt: null });
    const count = await db.sql<{ c: number | string }>('SELECT partition_count AS c FROM submission_manager_partition_count');
    expect(count.map((x) => Number(x.c))).toEqual([C]);
    const rows = await db.sql<{ intent_id: string; status: string; partition_no: number | string }>(
      `SELECT intent_id, status, partition_no FROM submission_intents WHERE request_hash = 'late'`);
    expect(rows).toHaveLength(LATE);
    for (const row of rows) {
      expect(row.status).toBe('succeeded');
      expect(Number(row.partition_no)).toBe(assignPartition({ intentId: row.intent_id, partitionKey: null }, C));
    }

    await killAll(hosts.splice(0));
    const history = await readHistory(db, records, stream.accepted);
    // The cancelled change never switched: the count timeline is the initial count throughout (the checker's change
    // rules are for changes that switch).
    expectCleanRun({ ...history, partitionChanges: history.partitionChanges!.filter((c) => c.switchedAtMs !== null) });
  }, 240_000);
});
