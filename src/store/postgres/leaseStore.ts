// PostgreSQL LeaseStore. Each operation is one statement decided by clock_timestamp() (never now(), which
// is the transaction start). The `now` CTE is materialised once, so one statement sees one instant.
// A leading `/* sm:<kind> */` names a write on the wire (pg_stat_activity; the chaos proxy loses its reply).
import type { AcquireOutcome, LeaseEvent, LeaseRow, LeaseStore, LeaseToken } from '../ports.js';
import type { PgQueryable } from './db.js';
import { toLease, type LeaseDbRow } from './rows.js';

const COLS = 'lease_name, holder_id, lease_epoch, acquired_at, renewed_at, expires_at';

// Insert when missing (epoch 1); otherwise take over only an expired row (epoch + 1), in one statement.
// The acquire event is written by the same statement. When not acquired, the blocking row is returned
// from the statement snapshot so the follower learns expires_at without a second round trip.
const TRY_ACQUIRE = `/* sm:acquire */
WITH now AS MATERIALIZED (SELECT clock_timestamp() AS t),
attempt AS (
  INSERT INTO submission_manager_leases AS l (${COLS})
  SELECT $1, $2, 1, now.t, now.t, now.t + $3 * interval '1 millisecond' FROM now
  ON CONFLICT (lease_name) DO UPDATE
    SET holder_id = EXCLUDED.holder_id, lease_epoch = l.lease_epoch + 1, acquired_at = EXCLUDED.acquired_at,
        renewed_at = EXCLUDED.renewed_at, expires_at = EXCLUDED.expires_at
    WHERE l.expires_at <= EXCLUDED.acquired_at
  RETURNING l.*
),
ev AS (
  INSERT INTO submission_manager_lease_events (lease_name, lease_epoch, holder_id, event, at)
  SELECT lease_name, lease_epoch, holder_id, 'acquired', acquired_at FROM attempt
)
SELECT true AS acquired, a.*, (SELECT t FROM now) AS db_now FROM attempt a
UNION ALL
SELECT false AS acquired, c.*, (SELECT t FROM now) AS db_now
  FROM submission_manager_leases c
 WHERE c.lease_name = $1 AND NOT EXISTS (SELECT 1 FROM attempt)`;

const RENEW = `/* sm:renew */
WITH now AS MATERIALIZED (SELECT clock_timestamp() AS t)
UPDATE submission_manager_leases l
   SET renewed_at = now.t, expires_at = now.t + $4 * interval '1 millisecond'
  FROM now
 WHERE l.lease_name = $1 AND l.holder_id = $2 AND l.lease_epoch = $3 AND l.expires_at > now.t
RETURNING l.*, now.t AS db_now`;

// Release expires the row in place (never deletes it), so the epoch only grows.
const RELEASE = `/* sm:release */
WITH now AS MATERIALIZED (SELECT clock_timestamp() AS t),
rel AS (
  UPDATE submission_manager_leases l SET expires_at = now.t, renewed_at = now.t
    FROM now
   WHERE l.lease_name = $1 AND l.holder_id = $2 AND l.lease_epoch = $3 AND l.expires_at > now.t
  RETURNING l.lease_name, l.lease_epoch, l.holder_id, now.t AS at
),
ev AS (
  INSERT INTO submission_manager_lease_events (lease_name, lease_epoch, holder_id, event, at)
  SELECT lease_name, lease_epoch, holder_id, 'released', at FROM rel
)
SELECT count(*)::int AS released FROM rel`;

export class PgLeaseStore implements LeaseStore {
  constructor(private readonly db: PgQueryable) {}

  async get(leaseName: string): Promise<LeaseRow | null> {
    const r = await this.db.query<LeaseDbRow>(
      `SELECT ${COLS}, clock_timestamp() AS db_now FROM submission_manager_leases WHERE lease_name = $1`,
      [leaseName],
    );
    return r.rows[0] ? toLease(r.rows[0]) : null;
  }

  async tryAcquire(leaseName: string, holderId: string, durationMs: number): Promise<AcquireOutcome> {
    const r = await this.db.query<LeaseDbRow & { acquired: boolean }>(TRY_ACQUIRE, [leaseName, holderId, durationMs]);
    const row = r.rows[0];
    if (row?.acquired) return { acquired: true, lease: toLease(row) };
    if (row) return { acquired: false, current: toLease(row), dbNow: row.db_now };
    const now = await this.db.query<{ db_now: Date }>('SELECT clock_timestamp() AS db_now');
    return { acquired: false, current: null, dbNow: now.rows[0]!.db_now };
  }

  async renew(token: LeaseToken, durationMs: number): Promise<LeaseRow | null> {
    const r = await this.db.query<LeaseDbRow>(RENEW, [token.leaseName, token.holderId, token.leaseEpoch, durationMs]);
    return r.rows[0] ? toLease(r.rows[0]) : null;
  }

  async release(token: LeaseToken): Promise<boolean> {
    const r = await this.db.query<{ released: number }>(RELEASE, [token.leaseName, token.holderId, token.leaseEpoch]);
    return Number(r.rows[0]?.released ?? 0) > 0;
  }

  async listEvents(leaseName: string): Promise<LeaseEvent[]> {
    const r = await this.db.query<{ seq: string; lease_name: string; lease_epoch: string; holder_id: string; event: LeaseEvent['event']; at: Date }>(
      `SELECT seq, lease_name, lease_epoch, holder_id, event, at FROM submission_manager_lease_events
        WHERE lease_name = $1 ORDER BY seq`,
      [leaseName],
    );
    return r.rows.map((e) => ({
      seq: Number(e.seq), leaseName: e.lease_name, leaseEpoch: Number(e.lease_epoch),
      holderId: e.holder_id, event: e.event, at: e.at,
    }));
  }
}
