// Changing the partition count (issue 26) with separate OS processes on each server dialect: `node dist/src/local/main.js`
// processes (EXECUTOR_PARTITIONS=6, every-instance mode, the process tests' short timings) on a fresh database, a
// provider failing 20 % with 503, a steady stream of intents (some sharing a partitionKey), the run judged by every
// rule of the campaign's checker (test/support/changeCluster.ts). One file, so its clusters never run side by side.
//  1. Under load: three processes; the count goes 6 → 4 first (no load), then 4 → 6 → 2 → 4 under the stream, each
//     POST /api/ops/partitions to another process. Every intent succeeds, none is executed twice (one 2xx received
//     per intent, no call after it), attempt numbers stay contiguous, intents sharing a partitionKey are first started
//     in submit order (key_order), and execution pauses around each change at most the bound its settings give
//     (pauseBoundMs: the drain, the changer's tick, the leaders' next tick), and resumes within one tick of the
//     switch, where the drain ends (resumeBoundMs): the pause is the drain plus one tick — counted in the ticks the
//     processes ran, between the attempts' start times (the product's records, not the runner's speed).
//  2. Kill at each step: two processes, 2 500 more intents seeded not yet due (a scan takes three batches), five
//     changes in a row (6 → 4 → 3 → 5 → 2 → 6), each held between two steps by a row lock the next step's statement
//     needs (test/support/changeKill.ts): while preparing, after the claim, after the switch, mid-reassignment, before
//     completion. Once the changer waits on it, the state is read in SQL, the process whose changer claimed the change
//     is SIGKILLed (while preparing, when every process's changer moves finished rows: all of them), the lock
//     released, and the process restarted under the same HOLDER_ID — at once (its changer adopts the leases) or
//     after the change completed (the other process's changer takes them over once they expire). Each change
//     completes; every rule holds over the whole run; every seeded row is in its final partition.
// PGlite cannot serve several processes: test/system/partitionChangeApps.test.ts runs a change with in-process apps on
// every dialect.
import { describe, expect, it } from 'vitest';
import { timerInvocations } from '../support/timerLog.js';
import type { FaultRecord } from '../chaos/faults.js';
import { assignPartition } from '../../src/intents/partition.js';
import { serverDatabases } from '../support/dialects.js';
import { killAll, waitFor } from '../support/localHostProcess.js';
import {
  allLed, C, completed, drained, expectCleanRun, IntentStream, killRecord, partitionsView, readHistory, requestCount, startChangeHost, useChangeFixture,
} from '../support/changeCluster.js';
import { expectPausesWithinBounds } from '../support/changePause.js';
import { holdAndKill, KILL_ENV, seed, STEPS } from '../support/changeKill.js';

describe.each(serverDatabases)('partition count change, separate OS processes ($name server)', (server) => {
  const f = useChangeFixture(server, 2626);

  const start = async (holder: string, extra: Record<string, string> = {}) => {
    const h = await startChangeHost(f.db, f.provider.url, holder, extra);
    f.all.push(h);
    return h;
  };

  it('6 → 4, then 4 → 6 → 2 → 4 under a stream of intents: each once, in key order, contiguous attempts; the pause per change within the drain + one tick', async () => {
    const { db, provider, records, hosts, all } = f;
    hosts.push(...await Promise.all([1, 2, 3].map((i) => start(`chg${i}`))));
    await allLed(db, C, server.dbTimeSql());
    // The first process recorded 6; the count that governs becomes 4: timers 4 and 5 go idle on every process.
    const first = await requestCount(hosts[0]!.api, 4);
    expect(first).toMatchObject({ status: 202, created: true, change: { fromCount: C, toCount: 4 } });
    await completed(db, first.change!.changeId);
    const stream = new IntentStream(() => hosts, 26);
    stream.start();
    const underLoad: string[] = [];
    // Execution goes on under the count: the provider answered `n` more calls (the stream's intents ran), so each
    // change has attempts started before its switch and after its completion to judge the pause by.
    const ran = (n: number) => {
      const from = records.length;
      return waitFor(`${n} more provider calls`, async () => records.length >= from + n, 30_000, 50);
    };
    try {
      await ran(20);
      for (const [k, to] of [6, 2, 4].entries()) {
        const api = hosts[(k + 1) % 3]!.api;
        const asked = await requestCount(api, to);
        expect(asked, `POST count ${to}`).toMatchObject({ status: 202, created: true, change: { toCount: to } });
        // A retried request (from another process) is the same change: harmless.
        expect(await requestCount(hosts[k % 3]!.api, to)).toMatchObject({ status: 202, created: false, change: { changeId: asked.change!.changeId } });
        underLoad.push(asked.change!.changeId);
        await completed(db, asked.change!.changeId);
        await ran(20);
      }
      await waitFor('over 100 intents accepted', async () => stream.accepted.length > 120, 30_000, 100);
    } finally {
      await stream.stop();
    }
    const ids = stream.accepted.map((a) => a.intentId);
    expect(ids.length, 'intents accepted').toBeGreaterThan(100);
    await drained(db);
    const view = await partitionsView(hosts[2]!.api);
    expect(view).toMatchObject({ count: 4, active: null });
    expect(view.changes.slice(0, 4).map((c) => [c.toCount, c.state])).toEqual([[4, 'completed'], [2, 'completed'], [6, 'completed'], [4, 'completed']]);
    expect(view.leases.filter((l) => l.heldByChanger)).toEqual([]);
    const ticks = timerInvocations(all.map((h) => h.logFile)); // (read before the processes stop: their logs go)
    hosts.splice(0);
    await killAll(all.splice(0)); // a quiescent database and provider record for the checker

    const history = await readHistory(db, records, stream.accepted);
    const stats = expectCleanRun(history);
    expect(stats.keyOrderPairs, 'same-key pairs whose order was checked').toBeGreaterThan(10);
    // The pause around each change, in the ticks the processes ran between the attempts' start times
    // (test/support/changePause.ts).
    expectPausesWithinBounds(`partitionChange ${server.name}`, history, ticks, records.map((r) => r.arrivedAt), underLoad);
  }, 240_000);

  it('kill the changer\'s process while preparing, after the claim, after the switch, mid-reassignment, before completion: each change completes, the checker holds', async () => {
    const { db, provider, records, hosts, all } = f;
    // The first process migrates the fresh database; the stream, the second process and the seeding go on together.
    hosts.push(await start('kil1', KILL_ENV));
    const stream = new IntentStream(() => hosts, 27, { ratePerSec: 10, keyedRate: 0.35, keys: 4, tag: 'k' });
    stream.start();
    const [second, seeded] = await Promise.all([start('kil2', KILL_ENV), seed(server, db)]);
    hosts.push(second);
    await allLed(db, C, server.dbTimeSql());
    const seededSet = new Set(seeded);
    const kills: FaultRecord[] = [];
    try {
      for (const s of STEPS) {
        const t0 = Date.now();
        const { victims, change, killedAt } = await holdAndKill(server, db, hosts, s.step, s.to, s.state, seededSet);
        // The killed processes come back under the same HOLDER_ID (their changers' holder ids too).
        const restart = async () => {
          for (const v of victims) hosts.splice(hosts.indexOf(v), 1, await start(v.holderIds[0]!.replace(/-1$/, ''), KILL_ENV));
        };
        if (s.restart === 'at once') await restart();
        else for (const v of victims) hosts.splice(hosts.indexOf(v), 1);
        const done = await completed(db, change.changeId, 60_000);
        expect(done, `${s.step}: the change completed`).toMatchObject({ toCount: s.to, state: 'completed' });
        if (s.restart === 'after') {
          expect(done.changer, `${s.step}: the other process's changer completed it`).not.toBe(change.changer);
          for (const v of victims) hosts.push(await start(v.holderIds[0]!.replace(/-1$/, ''), KILL_ENV));
        }
        kills.push(...victims.map((v) => killRecord(v.holderIds[0]!, killedAt, Date.now(), `${s.step}: killed ${v.holderIds[0]}`)));
        console.log(`[partitionChangeKill ${server.name}] ${s.step}: killed ${victims.map((v) => v.holderIds[0]).join(', ')} (changer of ${change.fromCount} → ${change.toCount}, ` +
          `${change.state}, ${change.rowsMoved} rows moved); completed ${Date.now() - t0} ms after the request by ${done.changer}`);
      }
    } finally {
      await stream.stop();
    }
    await drained(db);
    hosts.splice(0);
    await killAll(all.splice(0));
    const history = await readHistory(db, records, stream.accepted, seededSet, kills);
    expect(history.partitionChanges!.map((c) => c.toCount)).toEqual(STEPS.map((s) => s.to));
    expectCleanRun(history);
    const rows = await db.sql<{ intent_id: string; partition_no: number | string }>(`SELECT intent_id, partition_no FROM submission_intents`);
    for (const r of rows.filter((x) => seededSet.has(x.intent_id))) {
      expect(Number(r.partition_no), `seeded ${r.intent_id}`).toBe(assignPartition({ intentId: r.intent_id, partitionKey: null }, C));
    }
  }, 420_000);
});
