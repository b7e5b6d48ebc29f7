// Killing the process that runs a change of the partition count between two of its steps (issue 26), for
// test/system/partitionChange.test.ts: the steps, the lock that holds a change before each (taken by the test on a
// connection of its own, on a row the next step's statement needs), and the rows seeded so a scan takes batches.
import { expect } from 'vitest';
import { partitionHash, assignPartition } from '../../src/intents/partition.js';
import { partitionChangerHolderId, REASSIGN_BATCH_ROWS } from '../../src/limits.js';
import { uuidv7 } from '../../src/intents/ids.js';
import type { ServerDatabase } from './dialects.js';
import type { HeldLock } from './heldLock.js';
import { waitFor, type HostProcess, type PgTestDatabase } from './localHostProcess.js';
import { changeRow, LEASE_NAMES, requestCount, type ChangeRow } from './changeCluster.js';

/** The process tests' settings as they are (the steps are held by locks, not by timings). */
export const KILL_ENV: Record<string, string> = {};
export const SEEDED = 2_500;

export type Step = 'preparing' | 'claimed' | 'switched' | 'mid-reassignment' | 'before-complete';
/** Each step, the count it changes to (from the one before: 6 → 4 → 3 → 5 → 2 → 6), the state the SQL shows, and when
 *  the killed process restarts: at once (the restarted changer, same holder id, adopts the leases its predecessor held), or after the
 *  change completed (the other process's changer takes the leases once they expire, and carries the change on). */
export const STEPS: { step: Step; to: number; restart: 'at once' | 'after'; state: (c: ChangeRow) => boolean }[] = [
  // Every process's changer runs the preparing pass (no lease, idempotent batches): all of them are killed.
  { step: 'preparing', to: 4, restart: 'at once', state: (c) => c.state === 'preparing' && c.changer === null },
  { step: 'claimed', to: 3, restart: 'at once', state: (c) => c.state === 'pending' && c.changer !== null && c.switchedAtMs === null },
  { step: 'switched', to: 5, restart: 'after', state: (c) => c.state === 'reassigning' && c.scanCursor === null },
  { step: 'mid-reassignment', to: 2, restart: 'after', state: (c) => c.state === 'reassigning' && c.scanCursor !== null && c.scanDoneAtMs === null },
  { step: 'before-complete', to: 6, restart: 'at once', state: (c) => c.state === 'reassigning' && c.scanDoneAtMs !== null && c.completedAtMs === null },
];

/** 2 500 intents not due for an hour (no executor touches them), inserted through the product's store. */
export async function seed(server: ServerDatabase, db: PgTestDatabase): Promise<string[]> {
  const stores = await server.openStores(db.url, 10_000);
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

/** Request the change to `to`, hold it at `step` (see the header), kill the process whose changer claimed it (every
 *  process while preparing), release. */
export async function holdAndKill(server: ServerDatabase, db: PgTestDatabase, hosts: HostProcess[], step: Step, to: number, state: (c: ChangeRow) => boolean,
  seeded: ReadonlySet<string>) {
  let lock: HeldLock | null = null;
  if (step === 'preparing') {
    // A finished row this change moves: the preparing pass moves finished rows while execution goes on.
    const rows = await waitFor('finished intents', async () => {
      const r = await db.sql<{ intent_id: string; partition_no: number | string }>(
        `SELECT intent_id, partition_no, partition_key FROM submission_intents WHERE status = 'succeeded' AND partition_key IS NULL ORDER BY intent_id`);
      return r.length >= 20 ? r : null;
    }, 30_000, 250);
    const target = rows.find((r) => assignPartition({ intentId: r.intent_id, partitionKey: null }, to) !== Number(r.partition_no));
    expect(target, `${step}: a finished row that moves`).toBeDefined();
    lock = await server.holdRowLock(db, 'submission_intents', 'intent_id', [target!.intent_id]);
  }
  if (step === 'switched' || step === 'mid-reassignment' || step === 'before-complete') {
    // A seeded row this change moves, in the first batch of the scan, past the first batch, or in the last (third) one.
    // The scan reads the open intents (and those finished since the request): rank among the open ones, with a margin.
    const rows = await db.sql<{ intent_id: string; partition_no: number | string }>(
      `SELECT intent_id, partition_no FROM submission_intents WHERE status IN ('scheduled', 'in_flight') ORDER BY intent_id`);
    const ranked = { switched: (rank: number) => rank < REASSIGN_BATCH_ROWS - 200, 'mid-reassignment': (rank: number) => rank > REASSIGN_BATCH_ROWS + 200,
      'before-complete': (rank: number) => rank > 2 * REASSIGN_BATCH_ROWS + 200 }[step];
    const target = rows.find((r, rank) => seeded.has(r.intent_id) && ranked(rank)
      && assignPartition({ intentId: r.intent_id, partitionKey: null }, to) !== Number(r.partition_no));
    expect(target, `${step}: a seeded row that moves`).toBeDefined();
    lock = await server.holdRowLock(db, 'submission_intents', 'intent_id', [target!.intent_id]);
  }
  let leaseLock: HeldLock | null = null;
  try {
    const asked = await requestCount(hosts[to % hosts.length]!.api, to);
    expect(asked, `${step}: POST count ${to}`).toMatchObject({ status: 202, change: { toCount: to } });
    const changeId = asked.change!.changeId;
    // (After the request: it locks the count row itself. The leaders' drain leaves time before the switch.)
    if (step === 'claimed') lock = await server.holdRowLock(db, 'submission_manager_partition_count', 'id', [1]);
    // Every 250 ms: MariaDB refreshes its INNODB_TRX / INNODB_LOCK_WAITS cache only when no one read it for 100 ms.
    // Someone waits on the lock and the change is at the step (on MySQL intake waits on the count row too, earlier).
    const atStep = step === 'before-complete' ? (c: ChangeRow) => c.state === 'reassigning' && c.scanDoneAtMs === null : state;
    let change = await waitFor(`${step}: the changer waits on the test's lock`, async () => {
      if ((await lock!.waiters()) === 0) return null;
      const c = await changeRow(db, changeId);
      return c && atStep(c) ? c : null;
    }, 60_000, 250);
    if (step === 'before-complete') {
      // The last batch of the scan waits on the row lock, its transaction holding the leases' rows for share. Hold one
      // lease row for share too (the last batch goes on; completing, which updates the lease rows, waits), then let
      // the batch go: the change rests with its scan done, not completed, until the kill.
      leaseLock = await server.holdRowLock(db, 'submission_manager_leases', 'lease_name', [LEASE_NAMES[0]!], 'shared');
      await lock!.release();
      lock = null;
      change = await waitFor(`${step}: scan done, not completed`, async () => {
        const c = await changeRow(db, changeId);
        return c && state(c) ? c : null;
      }, 60_000, 50);
    }
    expect(state(change), `${step}: state in SQL ${JSON.stringify(change)}`).toBe(true);
    const victims = step === 'preparing' ? [...hosts] : hosts.filter((h) => partitionChangerHolderId(h.holderIds[0]!) === change.changer);
    expect(victims.length, `${step}: the process of changer ${change.changer}`).toBeGreaterThan(0);
    const killedAt = Date.now();
    for (const v of victims) v.signal('SIGKILL');
    await Promise.all(victims.map((v) => v.exited));
    return { victims, change, killedAt };
  } finally {
    await lock?.release();
    await leaseLock?.release();
  }
}
