// Kill the process running a change of the partition count at each step (issue 26), on each server dialect: two
// local-host processes (EXECUTOR_PARTITIONS=6, every-instance mode) under a steady stream of intents, with 2 500 more
// intents seeded not yet due (so a scan takes three batches of REASSIGN_BATCH_ROWS). Four changes in a row, each held
// between two of its steps by a lock the next step's statement needs, taken by the test on a connection of its own:
//  - after the claim (pending, the changer holds the leases): the count row, which the switch updates;
//  - after the switch (reassigning, nothing moved): a seeded row the first batch moves;
//  - mid-reassignment (a batch done, the scan not): a seeded row of a later batch;
//  - before completion (the scan done, the catch-up not): the change row, which the catch-up and completion lock.
// Once the changer blocks on it (the lock has a waiter), the state is read in SQL, the process whose changer claimed
// the change (its holder id is partitionChangerHolderId of the process's) is killed with SIGKILL, the lock released,
// and the process restarted under the same HOLDER_ID. The change completes (the restarted changer adopts its leases,
// or the other process's changer takes them when they expire), and afterwards every rule of the campaign's checker
// holds over the whole run (test/support/changeCluster.ts), and every seeded row is in its final partition.
import { afterEach, beforeAll, beforeEach, describe, expect, it } from 'vitest';
import { partitionHash, assignPartition } from '../../src/intents/partition.js';
import { partitionChangerHolderId, REASSIGN_BATCH_ROWS } from '../../src/limits.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { serverDatabases, type ServerDatabase } from '../support/dialects.js';
import type { HeldLock } from '../support/heldLock.js';
import { ensureBuilt, killAll, waitFor, type HostProcess, type PgTestDatabase } from '../support/localHostProcess.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import type { ProviderRecord } from '../chaos/providerProcess.js';
import {
  allLed, C, changeRow, completed, drained, expectCleanRun, IntentStream, readHistory, requestCount, startChangeHost, startFlakyProvider, type ChangeRow,
} from '../support/changeCluster.js';

/** A longer commit grace than the process tests' 1.5 s: the window in which the test takes the change row's lock
 *  between the end of the scan and the catch-up (the changer waits for it). */
const EXTRA = { COMMIT_GRACE_MS: '3000' };
const SEEDED = 2_500;

type Step = 'claimed' | 'switched' | 'mid-reassignment' | 'before-complete';
/** Each step, the count it changes to (from the one before: 6 → 3 → 5 → 2 → 6), and the state the SQL shows. */
/** `restart`: at once (the restarted changer, same holder id, adopts the leases its predecessor held), or after the
 *  change completed (the other process's changer takes the leases once they expire, and carries the change on). */
const STEPS: { step: Step; to: number; restart: 'at once' | 'after'; state: (c: ChangeRow) => boolean }[] = [
  { step: 'claimed', to: 3, restart: 'at once', state: (c) => c.state === 'pending' && c.changer !== null && c.switchedAtMs === null },
  { step: 'switched', to: 5, restart: 'after', state: (c) => c.state === 'reassigning' && c.scanCursor === null && c.rowsMoved === 0 },
  { step: 'mid-reassignment', to: 2, restart: 'after', state: (c) => c.state === 'reassigning' && c.scanCursor !== null && c.scanDoneAtMs === null && c.rowsMoved > 0 },
  { step: 'before-complete', to: 6, restart: 'at once', state: (c) => c.state === 'reassigning' && c.scanDoneAtMs !== null && c.completedAtMs === null },
];

describe.each(serverDatabases)('kill the process running a partition change at each step ($name server)', (server) => {
  const skip = server.unavailable();
  let db: PgTestDatabase;
  let provider: RecordingProvider;
  let records: ProviderRecord[];
  const hosts: HostProcess[] = [];
  const all: HostProcess[] = [];

  beforeAll(() => ensureBuilt(), 120_000);
  beforeEach(async (t) => {
    if (skip) return t.skip(skip);
    db = await server.create();
    ({ provider, records } = await startFlakyProvider(2727));
  });
  afterEach(async () => {
    hosts.splice(0);
    await killAll(all.splice(0));
    await provider?.close();
    await db?.drop();
  });

  const start = async (holder: string) => {
    const h = await startChangeHost(db, provider.url, holder, EXTRA);
    all.push(h);
    return h;
  };

  it('after the claim, after the switch, mid-reassignment, before completion: each change completes, the checker holds', async () => {
    hosts.push(await start('kil1'), await start('kil2'));
    await allLed(db, C, server.dbTimeSql());
    const stream = new IntentStream(() => hosts, 27, { ratePerSec: 10, keyedRate: 0.35, keys: 4, tag: 'k' });
    stream.start();
    const seeded = await seed(server, db);
    const seededSet = new Set(seeded);
    try {
      for (const s of STEPS) {
        const t0 = Date.now();
        const { victim, change } = await holdAndKill(server, db, hosts, s.step, s.to, s.state, seededSet);
        // The killed process comes back under the same HOLDER_ID (its changer's holder id too).
        const restart = async () => hosts.splice(hosts.indexOf(victim), 1, await start(victim.holderIds[0]!.replace(/-1$/, '')));
        if (s.restart === 'at once') await restart();
        else hosts.splice(hosts.indexOf(victim), 1);
        const done = await completed(db, change.changeId, 60_000);
        expect(done, `${s.step}: the change completed`).toMatchObject({ toCount: s.to, state: 'completed' });
        if (s.restart === 'after') {
          expect(done.changer, `${s.step}: the other process's changer completed it`).not.toBe(change.changer);
          hosts.push(await start(victim.holderIds[0]!.replace(/-1$/, '')));
        }
        console.log(`[partitionChangeKill ${server.name}] ${s.step}: killed ${victim.holderIds[0]} (changer of ${change.fromCount} → ${change.toCount}, ` +
          `${change.state}, ${change.rowsMoved} rows moved); completed ${Date.now() - t0} ms after the request by ${done.changer}`);
      }
    } finally {
      await stream.stop();
    }
    await drained(db);
    hosts.splice(0);
    await killAll(all.splice(0));
    const history = await readHistory(db, records, stream.accepted, seededSet);
    expect(history.partitionChanges!.map((c) => c.toCount)).toEqual(STEPS.map((s) => s.to));
    expectCleanRun(history);
    const rows = await db.sql<{ intent_id: string; partition_no: number | string }>(`SELECT intent_id, partition_no FROM submission_intents`);
    for (const r of rows.filter((x) => seededSet.has(x.intent_id))) {
      expect(Number(r.partition_no), `seeded ${r.intent_id}`).toBe(assignPartition({ intentId: r.intent_id, partitionKey: null }, C));
    }
  }, 420_000);
});

/** 2 500 intents not due for an hour (no executor touches them), inserted through the product's store. */
async function seed(server: ServerDatabase, db: PgTestDatabase): Promise<string[]> {
  const stores = server.openStores(db.url, 10_000);
  const ids: string[] = [];
  try {
    for (let i = 0; i < SEEDED; i += 25) {
      await Promise.all(Array.from({ length: 25 }, async () => {
        const intentId = uuidv7();
        ids.push(intentId);
        await stores.intents.insert({ intentId, idempotencyKey: null, requestHash: 'seed', maxAttempts: 1, notBefore: new Date(Date.now() + 3_600_000),
          contract: { provider: { url: null }, payload: { seed: true }, retry: { maxAttempts: 1, baseDelayMs: 100, maxDelayMs: 500 } },
          partitionHash: partitionHash(intentId), partitionKey: null });
      }));
    }
  } finally {
    await stores.close();
  }
  return ids;
}

/** Request the change to `to`, hold it at `step` (see the header), kill the process whose changer claimed it, release. */
async function holdAndKill(server: ServerDatabase, db: PgTestDatabase, hosts: HostProcess[], step: Step, to: number, state: (c: ChangeRow) => boolean,
  seeded: ReadonlySet<string>) {
  let lock: HeldLock | null = null;
  if (step === 'switched' || step === 'mid-reassignment') {
    // A seeded row this change moves, in the first batch of the scan, or past the first batch.
    const rows = await db.sql<{ intent_id: string; partition_no: number | string }>('SELECT intent_id, partition_no FROM submission_intents ORDER BY intent_id');
    const target = rows.find((r, rank) => seeded.has(r.intent_id) && (step === 'switched' ? rank < REASSIGN_BATCH_ROWS : rank > REASSIGN_BATCH_ROWS + 100)
      && assignPartition({ intentId: r.intent_id, partitionKey: null }, to) !== Number(r.partition_no));
    expect(target, `${step}: a seeded row that moves`).toBeDefined();
    lock = await server.holdRowLock(db, 'submission_intents', 'intent_id', [target!.intent_id]);
  }
  try {
    const asked = await requestCount(hosts[to % hosts.length]!.api, to);
    expect(asked, `${step}: POST count ${to}`).toMatchObject({ status: 202, change: { toCount: to } });
    const changeId = asked.change!.changeId;
    // (After the request: it locks the count row itself. The leaders' drain leaves time before the switch.)
    if (step === 'claimed') lock = await server.holdRowLock(db, 'submission_manager_partition_count', 'id', [1]);
    if (step === 'before-complete') {
      // The scan is done and the catch-up waits for the commit grace: take the change row's lock in that window.
      await waitFor(`${step}: scan done`, async () => (await changeRow(db, changeId))?.scanDoneAtMs != null, 60_000, 10);
      lock = await server.holdRowLock(db, 'submission_manager_partition_changes', 'change_id', [changeId]);
    }
    await waitFor(`${step}: the changer waits on the test's lock`, async () => (await lock!.waiters()) > 0, 60_000, 50);
    const change = (await changeRow(db, changeId))!;
    expect(state(change), `${step}: state in SQL ${JSON.stringify(change)}`).toBe(true);
    const victim = hosts.find((h) => partitionChangerHolderId(h.holderIds[0]!) === change.changer);
    expect(victim, `${step}: the process of changer ${change.changer}`).toBeDefined();
    victim!.signal('SIGKILL');
    await victim!.exited;
    return { victim: victim!, change };
  } finally {
    await lock?.release();
  }
}
