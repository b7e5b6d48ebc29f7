// A change of the partition count on a large table, with separate OS processes on each server dialect: three
// `node dist/src/local/main.js` processes (EXECUTOR_PARTITIONS=6, every-instance mode, the process tests' short timings,
// test/support/changeCluster.ts), 200 000 settled intents inserted in SQL (test/support/largeTable.ts: ids before
// every id the stream makes, so a walk of the primary key from the start meets all of them before the first open
// intent), a stream of intents, then 6 → 4. The change completes; every intent of the stream succeeds once (the
// campaign checker's rules); every settled row ends in its partition under 4; and execution pauses around the change
// at most the drain plus one tick, and resumes within one tick of the switch, as on an empty table (counted in the
// ticks the processes ran, between the attempts' database start times): the pause follows the open intents, not the
// settled ones.
import { describe, expect, it } from 'vitest';
import { assignPartition } from '../../src/intents/partition.js';
import { serverDatabases } from '../support/dialects.js';
import { killAll } from '../support/localHostProcess.js';
import {
  allLed, C, completed, drained, expectCleanRun, IntentStream, readHistory, requestCount, startChangeHost, useChangeFixture,
} from '../support/changeCluster.js';
import { expectPausesWithinBounds } from '../support/changePause.js';
import { settledId } from '../support/largeTable.js';
import { timerInvocations } from '../support/timerLog.js';

const SETTLED = 200_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(serverDatabases)('partition count change on a large table, separate OS processes ($name server)', (server) => {
  const f = useChangeFixture(server, 3131);

  it('6 → 4 under a stream with 200 000 settled intents before the open ones: completes, every intent once, the pause within the drain + one tick', async () => {
    const { db, provider, records, hosts } = f;
    hosts.push(...await Promise.all([1, 2, 3].map((i) => startChangeHost(db, provider.url, `big${i}`))));
    await allLed(db, C, server.dbTimeSql());
    for (const text of server.seedSettledSql(SETTLED)) await db.sql(text);
    const stream = new IntentStream(() => hosts, 31);
    stream.start();
    let changeId = '';
    try {
      await sleep(3_000);
      const asked = await requestCount(hosts[1]!.api, 4);
      expect(asked).toMatchObject({ status: 202, created: true, change: { fromCount: C, toCount: 4 } });
      changeId = asked.change!.changeId;
      expect(await completed(db, changeId, 120_000)).toMatchObject({ state: 'completed' });
      await sleep(3_000);
    } finally {
      await stream.stop();
    }
    await drained(db);
    const ticks = timerInvocations(hosts.map((h) => h.logFile)); // (read before the processes stop: their logs go)
    await killAll(hosts.splice(0)); // a quiescent database and provider record for the checker

    const seeded = new Set(Array.from({ length: SETTLED }, (_, i) => settledId(i + 1)));
    const history = await readHistory(db, records, stream.accepted, seeded);
    expectCleanRun(history);
    // The pause in the ticks the processes ran between the attempts' start times (test/support/changePause.ts).
    const [pause] = expectPausesWithinBounds(`partitionChangeLarge ${server.name}`, history, ticks, records.map((r) => r.arrivedAt), [changeId]);
    console.log(`[partitionChangeLarge ${server.name}] ${pause!.rowsMoved} rows moved`);
    // Every settled row is in its partition under 4 (moved by the preparing pass, or by the scan if it settled late).
    const wrong = await db.sql<{ intent_id: string; partition_no: number | string }>(
      `SELECT intent_id, partition_no FROM submission_intents WHERE intent_id <= '${settledId(SETTLED)}'`);
    expect(wrong).toHaveLength(SETTLED);
    expect(wrong.filter((r) => Number(r.partition_no) !== assignPartition({ intentId: r.intent_id, partitionKey: null }, 4)).length).toBe(0);
  }, 300_000);
});
