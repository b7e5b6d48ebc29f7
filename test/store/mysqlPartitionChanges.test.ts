// What is particular to the MySQL / MariaDB dialect in partition changes (issue 26; the shared contract suite runs on
// it too): intake reads the recorded count with a shared lock, so an insert begun while a switch holds the count row
// waits for its commit and takes the new count (the contract suite checks the other half: the switch waits for an
// insert in flight); the table itself admits one active change (unique index on `active`); the preparing pass's range
// with no call out moves its rows in one guarded UPDATE, and takes the careful path (bump, then move) when a call is
// out, or when one starts between its probe and its move.
import { randomBytes, randomUUID } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { openMysqlPool, type MyDatabase, type MyQueryable } from '../../src/store/mysql/db.js';
import { prepareBatch } from '../../src/store/mysql/partitionReassign.js';
import type { Stores } from '../../src/store/stores.js';
import { partitionLeaseName } from '../../src/limits.js';
import { acquireToken, LEASE_NAME } from '../support/instances.js';
import { partitionOf } from '../../src/intents/partition.js';
import { createMysqlStores } from '../../src/store/mysql/index.js';
import { partitionHash } from '../../src/intents/partition.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { MYSQL_TEST_URL } from '../support/mysqlServer.js';

const open = (database?: string) => openMysqlPool({ url: MYSQL_TEST_URL, max: 2, statementTimeoutMs: 10_000, database });

/** A fresh migrated database for `fn`, dropped after. */
async function withDatabase(fn: (db: MyDatabase, s: Stores) => Promise<void>): Promise<void> {
  const name = `m_${randomBytes(6).toString('hex')}`;
  const admin = open();
  await admin.query(`CREATE DATABASE ${name}`);
  const db = open(name);
  const s = createMysqlStores(db);
  try {
    await s.migrate();
    await fn(db, s);
  } finally {
    await s.close();
    await admin.query(`DROP DATABASE IF EXISTS ${name}`);
    await admin.close();
  }
}
const contract = { provider: { url: null }, payload: {}, retry: { maxAttempts: 1, baseDelayMs: 10, maxDelayMs: 10 } };

describe('mysql dialect: partition changes', () => {
  it('an insert begun while a transaction updates the count row waits for its commit and takes the new count; one active change at most', async (t) => {
    const skip = inject('mysqlUnavailable');
    if (skip) return t.skip(skip);
    await withDatabase(async (db, s) => {
      await s.partitions.recordPartitionCount(4, 'host');
      let release!: () => void;
      const held = new Promise<void>((r) => (release = r));
      let locked!: () => void;
      const isLocked = new Promise<void>((r) => (locked = r));
      const holder = db.transaction(async (tx) => { // as a switch: the count row updated, not yet committed
        await tx.query('UPDATE submission_manager_partition_count SET partition_count = 6 WHERE id = 1');
        locked();
        await held;
      });
      await isLocked;
      const key = 'tenant-7';
      const inserted = s.intents.insert({ intentId: uuidv7(), idempotencyKey: null, requestHash: '0'.repeat(64), maxAttempts: 1,
        contract, notBefore: null, partitionHash: partitionHash(key), partitionKey: key });
      const settled = await Promise.race([inserted.then(() => 'inserted'), new Promise((r) => setTimeout(() => r('waiting'), 500))]);
      release();
      await holder;
      expect(settled).toBe('waiting');
      expect((await inserted).intent.partition).toBe(partitionHash(key) % 6);

      const row = (id: string, state: string) => [id, 4, 8, state, 'op'];
      const insert = `INSERT INTO submission_manager_partition_changes (change_id, from_count, to_count, state, requested_at, requested_by)
        VALUES (?, ?, ?, ?, UTC_TIMESTAMP(6), ?)`;
      await db.query(insert, row(randomUUID(), 'preparing')); // active too
      await expect(db.query(insert, row(randomUUID(), 'pending'))).rejects.toMatchObject({ name: 'StoreError', kind: 'conflict' });
    });
  });

  it.for([
    ['no call out: the guarded move alone', 'none', ['ANY_OUT', 'MOVE_RANGE']],
    ['a call out: the bump, then the move', 'before', ['ANY_OUT', 'LEAVE', 'MOVE']],
    ['a call started after the probe: the guarded move moves nothing, then the bump and the move', 'after', ['ANY_OUT', 'MOVE_RANGE', 'LEAVE', 'MOVE']],
  ] as const)('the preparing pass\'s range, %s; the same settled rows move', async ([, started, path], t) => {
    const skip = inject('mysqlUnavailable');
    if (skip) return t.skip(skip);
    await withDatabase(async (db, s) => {
      await s.partitions.recordPartitionCount(1, 'host');
      const put = async (key: string) => (await s.intents.insert({ intentId: uuidv7(), idempotencyKey: null, requestHash: '0'.repeat(64),
        maxAttempts: 1, contract, notBefore: null, partitionHash: partitionHash(key), partitionKey: key })).intent;
      const keys = Array.from({ length: 40 }, (_, k) => `key-${k}`).filter((k) => partitionOf(k, 2) === 1).slice(0, 3);
      const done = [await put(keys[0]!), await put(keys[1]!)];
      const open = await put(keys[2]!);
      await db.query(`UPDATE submission_intents SET status = 'succeeded' WHERE intent_id IN (?)`, [done.map((i) => i.intentId)]);
      const exec = await acquireToken(s, 'host-x', 60_000, partitionLeaseName(LEASE_NAME, 0));
      const start = async () => (await s.executionFor(0).fencedStartAttempts(exec, [{ intentId: open.intentId, expectedAttemptCount: 0 }])).kind;
      if (started === 'before') expect(await start()).toBe('ok');
      await new Promise((r) => setTimeout(r, 5));
      const req = await s.partitions.requestChange(2, 'ops', uuidv7());
      if (req.kind !== 'created') throw new Error(req.kind);
      const ran: string[] = [];
      const named = (text: string) => (/^SELECT EXISTS/.test(text) ? 'ANY_OUT' : /SET i.last_modified_at/.test(text) ? 'LEAVE'
        : /NOT EXISTS \(SELECT 1 FROM submission_attempts FORCE INDEX \(ix_attempts_open\)/.test(text) ? 'MOVE_RANGE'
          : /SET i.partition_no/.test(text) ? 'MOVE' : null);
      await db.transaction(async (tx) => {
        const watched: MyQueryable = { query: async (text, params) => {
          const out = await tx.query(text, params);
          const name = named(text);
          if (name) ran.push(name);
          if (name === 'ANY_OUT' && started === 'after') expect(await start()).toBe('ok'); // on the pool's other connection
          return out as never;
        } };
        await prepareBatch(watched, req.change, { limit: 10, horizon: new Date(Date.now() + 60_000) });
      });
      expect(ran).toEqual(path);
      expect((await s.partitions.listChanges(1))[0]).toMatchObject({ rowsMoved: 2, state: 'pending' });
      const rows = await Promise.all([...done, open].map(async (i) => (await s.intents.get(i.intentId))!.partition));
      expect(rows).toEqual([1, 1, 0]);
    });
  });
});
