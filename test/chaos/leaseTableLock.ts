// The lease_lock fault's database side: the lease table locked ACCESS EXCLUSIVE from another connection for `ms`,
// and whether the leader's lease outlived the lock. The expiry is read under the lock (no renew can move it
// meanwhile) and compared with the lock's end in the database's clock, so the checker knows whether the lock
// cost the leader its lease (its renew waited behind the lock) — then the fence may refuse its results.
import type { ChaosDb } from './cluster.js';

export interface LeaseTableLock {
  /** The lease row was still valid when the lock ended (false: it expired under the lock, or no row). */
  leaseValid: boolean;
  /** The lease's time left when the lock began (null: no lease row). */
  leftMs: number | null;
}

export async function lockLeaseTable(db: ChaosDb, ms: number): Promise<LeaseTableLock> {
  // One text, several statements: one implicit transaction, so the lock is held until the sleep ends. With several
  // partitions (issue 25) the lock holds every lease row: the soonest expiry of the live ones decides (any of their
  // leaders may lose its lease); with none live, the latest expiry (one partition: its row, as before partitions).
  const [row] = await db.sql<{ expires_ms: number | null; locked_ms: number }>(
    `LOCK TABLE submission_manager_leases IN ACCESS EXCLUSIVE MODE;
     SELECT (extract(epoch FROM coalesce(min(expires_at) FILTER (WHERE expires_at > clock_timestamp()), max(expires_at))) * 1000)::float8 AS expires_ms,
            (extract(epoch FROM clock_timestamp()) * 1000)::float8 AS locked_ms FROM submission_manager_leases;
     SELECT pg_sleep(${ms / 1000})`);
  if (row === undefined || row.expires_ms === null) return { leaseValid: false, leftMs: null };
  return { leaseValid: row.expires_ms > row.locked_ms + ms, leftMs: Math.round(row.expires_ms - row.locked_ms) };
}
