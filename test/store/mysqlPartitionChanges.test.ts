// What is particular to the MySQL / MariaDB dialect in partition changes (issue 26; the shared contract suite runs on
// it too): intake reads the recorded count with a shared lock, so an insert begun while a switch holds the count row
// waits for its commit and takes the new count (the contract suite checks the other half: the switch waits for an
// insert in flight); the table itself admits one active change (unique index on `active`).
import { randomBytes, randomUUID } from 'node:crypto';
import { describe, expect, inject, it } from 'vitest';
import { openMysqlPool } from '../../src/store/mysql/db.js';
import { createMysqlStores } from '../../src/store/mysql/index.js';
import { partitionHash } from '../../src/intents/partition.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { MYSQL_TEST_URL } from '../support/mysqlServer.js';

const open = (database?: string) => openMysqlPool({ url: MYSQL_TEST_URL, max: 2, statementTimeoutMs: 10_000, database });

describe('mysql dialect: partition changes', () => {
  it('an insert begun while a transaction updates the count row waits for its commit and takes the new count; one active change at most', async (t) => {
    const skip = inject('mysqlUnavailable');
    if (skip) return t.skip(skip);
    const name = `m_${randomBytes(6).toString('hex')}`;
    const admin = open();
    await admin.query(`CREATE DATABASE ${name}`);
    const db = open(name);
    const s = createMysqlStores(db);
    try {
      await s.migrate();
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
        contract: { provider: { url: null }, payload: {}, retry: { maxAttempts: 1, baseDelayMs: 10, maxDelayMs: 10 } },
        notBefore: null, partitionHash: partitionHash(key), partitionKey: key });
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
    } finally {
      await s.close();
      await admin.query(`DROP DATABASE IF EXISTS ${name}`);
      await admin.close();
    }
  });
});
