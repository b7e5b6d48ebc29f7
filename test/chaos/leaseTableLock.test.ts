// The lease_lock fault says whether the lock outlasted the leader's lease (campaign on 2620eb3, seed 400005: a
// 1 166-ms lock with 652 ms of lease left was recorded as "lease valid", and the checker refused to excuse the
// fence refusal it caused). PostgreSQL server.
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createChaosDb, type ChaosDb } from './cluster.js';
import { lockLeaseTable } from './leaseTableLock.js';

describe('lockLeaseTable', () => {
  let db: ChaosDb;
  beforeAll(async () => {
    db = await createChaosDb();
    await db.sql('CREATE TABLE submission_manager_leases (lease_name varchar(64) PRIMARY KEY, expires_at timestamptz NOT NULL)');
  });
  afterAll(async () => db?.drop());
  const leaseLeft = (ms: number) => db.sql(`INSERT INTO submission_manager_leases VALUES ('executor', clock_timestamp() + make_interval(secs => $1::float8 / 1000))
    ON CONFLICT (lease_name) DO UPDATE SET expires_at = EXCLUDED.expires_at`, [ms]);

  it('a lock that outlasts the lease → leaseValid false; one the lease outlives → true', async () => {
    await leaseLeft(150);
    const short = await lockLeaseTable(db, 400);
    expect(short.leaseValid).toBe(false);
    expect(short.leftMs).toBeLessThanOrEqual(150);
    await leaseLeft(60_000); // (a minute: however slow the runner, the lease outlives the lock)
    expect((await lockLeaseTable(db, 400)).leaseValid).toBe(true);
  });

  it('holds the lock for its whole length (a write waits for it)', async () => {
    // Judged by database times, not by the runner's sleeps: a write sent once the lock is granted (pg_locks) runs
    // only after it ended, so its own clock_timestamp() is at least the lock's start (expiry − leftMs) + its length.
    await leaseLeft(60_000);
    const expiresMs = (await db.sql<{ expires_ms: number }>(
      'SELECT (extract(epoch FROM expires_at) * 1000)::float8 AS expires_ms FROM submission_manager_leases'))[0]!.expires_ms;
    const LOCK_MS = 1_000;
    let settled = false;
    const locking = lockLeaseTable(db, LOCK_MS).finally(() => (settled = true));
    let granted = false;
    while (!granted && !settled) {
      granted = (await db.sql<{ n: number }>(`SELECT count(*)::int AS n FROM pg_locks l JOIN pg_class c ON c.oid = l.relation
        WHERE c.relname = 'submission_manager_leases' AND l.mode = 'AccessExclusiveLock' AND l.granted`))[0]!.n > 0;
    }
    expect(granted, 'the lock was seen held before it ended').toBe(true);
    const write = db.sql<{ at_ms: number }>(`UPDATE submission_manager_leases SET expires_at = expires_at
      RETURNING (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS at_ms`);
    const lock = await locking;
    const writtenAt = (await write)[0]!.at_ms;
    expect(lock.leaseValid).toBe(true);
    expect(writtenAt).toBeGreaterThanOrEqual(expiresMs - lock.leftMs! + LOCK_MS - 1); // (leftMs is rounded)
  });
});
