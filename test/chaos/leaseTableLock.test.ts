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
    await leaseLeft(5_000);
    expect((await lockLeaseTable(db, 400)).leaseValid).toBe(true);
  });

  it('holds the lock for its whole length (a write waits for it)', async () => {
    await leaseLeft(5_000);
    const locking = lockLeaseTable(db, 500);
    await new Promise((r) => setTimeout(r, 100));
    let written = false;
    const write = db.sql(`UPDATE submission_manager_leases SET expires_at = expires_at`).then(() => (written = true));
    await new Promise((r) => setTimeout(r, 200));
    expect(written).toBe(false);
    await locking;
    await write;
    expect(written).toBe(true);
  });
});
