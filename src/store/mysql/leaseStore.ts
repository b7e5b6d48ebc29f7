// MySQL / MariaDB LeaseStore. Each operation is one short READ COMMITTED transaction decided by database time:
// a locking read takes the lease row's X lock and, in the same statement, reads UTC_TIMESTAMP(6) and whether
// the row is held; the UPDATE that follows assigns only constants and its own columns (so the order of the SET
// list never matters: MySQL evaluates single-table assignments left to right, MariaDB's SIMULTANEOUS_ASSIGNMENT
// does not), and the outcome comes from that read, never from affectedRows (CLIENT_FOUND_ROWS reports found
// rows, ON DUPLICATE KEY UPDATE 0/1/2). The X lock waits for every open fenced transaction (S lock) to commit.
// The row is never deleted, so lease_epoch only grows.
import type { AcquireOutcome, LeaseEvent, LeaseRow, LeaseStore, LeaseToken } from '../ports.js';
import type { MyDatabase, MyQueryable } from './db.js';
import { nextSeq } from './fence.js';
import { NOW, plusMs, toLease, utcText, type LeaseDbRow } from './rows.js';

const COLS = 'lease_name, holder_id, lease_epoch, acquired_at, renewed_at, expires_at';

/** The row with database now, locked for update. `held`: not expired at that instant. */
const LOCK_ROW = `SELECT ${COLS}, ${NOW} AS db_now, ${utcText(NOW)} AS now_text, expires_at > ${NOW} AS held
  FROM submission_manager_leases WHERE lease_name = ? FOR UPDATE`;

// The row created when missing: epoch 0, expired long ago, so the same path takes it (epoch 1). It is
// never visible: the acquire that inserted it updates it in the same transaction.
const ENSURE_ROW = `INSERT INTO submission_manager_leases (${COLS})
  VALUES (?, '', 0, '1970-01-01 00:00:00', '1970-01-01 00:00:00', '1970-01-01 00:00:00')
  ON DUPLICATE KEY UPDATE lease_name = lease_name`;

export type Locked = LeaseDbRow & { now_text: string; held: number | string };

async function event(tx: MyQueryable, row: { lease_name: string; lease_epoch: number; holder_id: string }, kind: LeaseEvent['event'], at: string) {
  const seq = await nextSeq(tx);
  await tx.query(`INSERT INTO submission_manager_lease_events (seq, lease_name, lease_epoch, holder_id, event, at) VALUES (?, ?, ?, ?, ?, ?)`,
    [seq, row.lease_name, row.lease_epoch, row.holder_id, kind, at]);
}

/** The lease row locked (FOR UPDATE) if it is held by `token` and not expired; null otherwise. */
export async function lockHeld(tx: MyQueryable, token: LeaseToken): Promise<Locked | null> {
  const row = (await tx.query<Locked>(LOCK_ROW, [token.leaseName])).rows[0];
  if (!row || Number(row.held) !== 1 || row.holder_id !== token.holderId || Number(row.lease_epoch) !== token.leaseEpoch) return null;
  return row;
}

/** Expires the row `lockHeld` returned in place (never deletes it) and logs `released`, in the caller's transaction. */
export async function expireHeld(tx: MyQueryable, token: LeaseToken, cur: Locked): Promise<void> {
  await tx.query('UPDATE submission_manager_leases SET expires_at = ?, renewed_at = ? WHERE lease_name = ?',
    [cur.now_text, cur.now_text, token.leaseName]);
  await event(tx, { lease_name: token.leaseName, lease_epoch: token.leaseEpoch, holder_id: token.holderId }, 'released', cur.now_text);
}

export class MysqlLeaseStore implements LeaseStore {
  constructor(private readonly db: MyDatabase) {}

  async get(leaseName: string): Promise<LeaseRow | null> {
    const r = await this.db.query<LeaseDbRow>(`SELECT ${COLS}, ${NOW} AS db_now FROM submission_manager_leases WHERE lease_name = ?`, [leaseName]);
    return r.rows[0] ? toLease(r.rows[0]) : null;
  }

  /** Missing or expired → taken (epoch + 1) with its `acquired` event; otherwise the row that blocked us. */
  async tryAcquire(leaseName: string, holderId: string, durationMs: number): Promise<AcquireOutcome> {
    // A held row needs no lock to say so (the common follower case): a consistent read at one database instant.
    const seen = (await this.db.query<Locked>(`SELECT ${COLS}, ${NOW} AS db_now, expires_at > ${NOW} AS held
      FROM submission_manager_leases WHERE lease_name = ?`, [leaseName])).rows[0];
    if (seen && Number(seen.held) === 1) return { acquired: false, current: toLease(seen), dbNow: seen.db_now };
    return this.db.transaction(async (tx) => {
      await tx.query(ENSURE_ROW, [leaseName]);
      const cur = (await tx.query<Locked>(LOCK_ROW, [leaseName])).rows[0]!;
      if (Number(cur.held) === 1) return { acquired: false, current: toLease(cur), dbNow: cur.db_now };
      const epoch = Number(cur.lease_epoch) + 1;
      await tx.query(
        `UPDATE submission_manager_leases
            SET holder_id = ?, lease_epoch = ?, acquired_at = ?, renewed_at = ?, expires_at = ${plusMs('CAST(? AS DATETIME(6))', '?')}
          WHERE lease_name = ?`,
        [holderId, epoch, cur.now_text, cur.now_text, cur.now_text, durationMs, leaseName]);
      await event(tx, { lease_name: leaseName, lease_epoch: epoch, holder_id: holderId }, 'acquired', cur.now_text);
      // Read back in the same transaction: the lease as stored (expires_at computed by the database).
      const row = (await tx.query<LeaseDbRow>(`SELECT ${COLS}, ? AS db_now FROM submission_manager_leases WHERE lease_name = ?`,
        [cur.now_text, leaseName])).rows[0]!;
      return { acquired: true, lease: { ...toLease(row), dbNow: cur.db_now } };
    });
  }

  renew(token: LeaseToken, durationMs: number): Promise<LeaseRow | null> {
    return this.db.transaction(async (tx) => {
      const cur = await lockHeld(tx, token);
      if (!cur) return null;
      await tx.query(
        `UPDATE submission_manager_leases SET renewed_at = ?, expires_at = ${plusMs('CAST(? AS DATETIME(6))', '?')} WHERE lease_name = ?`,
        [cur.now_text, cur.now_text, durationMs, token.leaseName]);
      const row = (await tx.query<LeaseDbRow>(`SELECT ${COLS} FROM submission_manager_leases WHERE lease_name = ?`, [token.leaseName])).rows[0]!;
      return { ...toLease(row), dbNow: cur.db_now };
    });
  }

  /** Expires the row in place (never deletes it) and logs `released`. */
  release(token: LeaseToken): Promise<boolean> {
    return this.db.transaction(async (tx) => {
      const cur = await lockHeld(tx, token);
      if (!cur) return false;
      await expireHeld(tx, token, cur);
      return true;
    });
  }

  async listEvents(leaseName: string): Promise<LeaseEvent[]> {
    const r = await this.db.query<{ seq: string; lease_name: string; lease_epoch: string; holder_id: string; event: LeaseEvent['event']; at: Date }>(
      'SELECT seq, lease_name, lease_epoch, holder_id, event, at FROM submission_manager_lease_events WHERE lease_name = ? ORDER BY seq',
      [leaseName]);
    return r.rows.map((e) => ({
      seq: Number(e.seq), leaseName: e.lease_name, leaseEpoch: Number(e.lease_epoch),
      holderId: e.holder_id, event: e.event, at: e.at,
    }));
  }
}
