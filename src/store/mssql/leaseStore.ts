// SQL Server LeaseStore. Every decision uses SYSUTCDATETIME() taken once per batch into @now, so one
// operation sees one instant — read only after the row (or its key range) is locked (lockRowThenNow):
// SYSUTCDATETIME() is fixed when a statement starts, so a statement that waits for the lock (behind a fenced
// transaction's shared lock) would otherwise judge expiry by the time before the wait (PostgreSQL's
// clock_timestamp() is read after the row lock). Acquire is the UPDLOCK+SERIALIZABLE update-then-insert pattern in one
// transaction (no MERGE: its upsert races are documented); renew is one conditional UPDATE; release
// expires the row in place (never deletes it), so lease_epoch only grows.
import type { AcquireOutcome, LeaseEvent, LeaseRow, LeaseStore, LeaseToken } from '../ports.js';
import type { MssqlRunner } from './db.js';
import { BIN2, p, type SqlQuery } from './params.js';
import { LEASE_COLS, leaseCols, toLease, type LeaseDbRow } from './rows.js';

/** Lock the lease row (or its key range when missing) to commit, then read the time. Needs an open transaction and
 *  DECLARE @now datetime2(7), @locked bigint. XLOCK (renew, release: the holder's own statements) also waits for every
 *  fenced transaction on the row. UPDLOCK (acquire) serialises with other acquirers, renew and release but not with
 *  fenced transactions, so a follower's acquire never holds up the leader's writes; its UPDATE may still wait for
 *  them, which can only make "expired at @now" conservative (expiry only moves away with time). */
const lockRowThenNow = (hint: 'XLOCK' | 'UPDLOCK') => `SELECT @locked = lease_epoch FROM submission_manager_leases WITH (${hint}, HOLDLOCK, ROWLOCK)
 WHERE lease_name = @lease_name;
SET @now = SYSUTCDATETIME();`;

const tokenParams = (t: LeaseToken) => [
  p.varchar('lease_name', 64, t.leaseName), p.varchar('holder_id', 128, t.holderId), p.bigint('lease_epoch', t.leaseEpoch),
];

export const leaseQueries = {
  get(leaseName: string): SqlQuery {
    return {
      text: `SELECT ${LEASE_COLS}, SYSUTCDATETIME() AS db_now FROM submission_manager_leases WHERE lease_name = @lease_name;`,
      params: [p.varchar('lease_name', 64, leaseName)],
    };
  },

  /**
   * Take the row iff it is missing (epoch 1) or expired (epoch + 1), and log the `acquired` event, in one
   * transaction. UPDLOCK+SERIALIZABLE on the row (or, when missing, on its key range) serialises concurrent
   * acquirers: the second waits for the first to commit, then sees its unexpired row and fails. U locks are
   * compatible with the S locks of fenced transactions, but the X lock the UPDATE needs is not: an acquire
   * after expiry waits until every open fenced transaction of the old holder has committed.
   * When not acquired, the current row is read under the same lock so the follower learns expires_at.
   * Results are emitted after COMMIT, so no lock is ever held while the client reads.
   */
  tryAcquire(leaseName: string, holderId: string, durationMs: number): SqlQuery {
    return {
      text: `
SET XACT_ABORT ON;
SET NOCOUNT ON;
DECLARE @now datetime2(7);
DECLARE @locked bigint;
DECLARE @out TABLE (acquired bit NOT NULL, lease_name varchar(64) COLLATE ${BIN2} NOT NULL,
  holder_id varchar(128) COLLATE ${BIN2} NOT NULL, lease_epoch bigint NOT NULL,
  acquired_at datetime2(7) NOT NULL, renewed_at datetime2(7) NOT NULL, expires_at datetime2(7) NOT NULL);
BEGIN TRANSACTION;
${lockRowThenNow('UPDLOCK')}
UPDATE submission_manager_leases WITH (UPDLOCK, SERIALIZABLE)
   SET holder_id = @holder_id, lease_epoch = lease_epoch + 1, acquired_at = @now, renewed_at = @now,
       expires_at = DATEADD(millisecond, @duration_ms, @now)
OUTPUT CAST(1 AS bit), ${leaseCols('inserted.')} INTO @out
 WHERE lease_name = @lease_name AND expires_at <= @now;
IF @@ROWCOUNT = 0
  INSERT INTO submission_manager_leases (${LEASE_COLS})
  OUTPUT CAST(1 AS bit), ${leaseCols('inserted.')} INTO @out
  SELECT @lease_name, @holder_id, 1, @now, @now, DATEADD(millisecond, @duration_ms, @now)
   WHERE NOT EXISTS (SELECT 1 FROM submission_manager_leases WITH (UPDLOCK, SERIALIZABLE) WHERE lease_name = @lease_name);
INSERT INTO submission_manager_lease_events (lease_name, lease_epoch, holder_id, [event], [at])
SELECT lease_name, lease_epoch, holder_id, 'acquired', acquired_at FROM @out WHERE acquired = 1;
IF NOT EXISTS (SELECT 1 FROM @out)
  INSERT INTO @out SELECT CAST(0 AS bit), ${LEASE_COLS} FROM submission_manager_leases WHERE lease_name = @lease_name;
COMMIT TRANSACTION;
SELECT acquired, ${LEASE_COLS}, @now AS db_now FROM @out;`,
      params: [p.varchar('lease_name', 64, leaseName), p.varchar('holder_id', 128, holderId), p.int('duration_ms', durationMs)],
    };
  },

  /** Extend iff held by (holder, epoch) and not expired; epoch unchanged. One conditional UPDATE after the lock;
   *  the row is returned after COMMIT. */
  renew(token: LeaseToken, durationMs: number): SqlQuery {
    return {
      text: `
SET XACT_ABORT ON;
SET NOCOUNT ON;
DECLARE @now datetime2(7);
DECLARE @locked bigint;
DECLARE @out TABLE (lease_name varchar(64) COLLATE ${BIN2} NOT NULL, holder_id varchar(128) COLLATE ${BIN2} NOT NULL,
  lease_epoch bigint NOT NULL, acquired_at datetime2(7) NOT NULL, renewed_at datetime2(7) NOT NULL, expires_at datetime2(7) NOT NULL);
BEGIN TRANSACTION;
${lockRowThenNow('XLOCK')}
UPDATE submission_manager_leases
   SET renewed_at = @now, expires_at = DATEADD(millisecond, @duration_ms, @now)
OUTPUT ${leaseCols('inserted.')} INTO @out
 WHERE lease_name = @lease_name AND holder_id = @holder_id AND lease_epoch = @lease_epoch AND expires_at > @now;
COMMIT TRANSACTION;
SELECT ${LEASE_COLS}, @now AS db_now FROM @out;`,
      params: [...tokenParams(token), p.int('duration_ms', durationMs)],
    };
  },

  /** Expire in place iff held by the token and not expired, and log `released`, in one transaction. */
  release(token: LeaseToken): SqlQuery {
    return {
      text: `
SET XACT_ABORT ON;
SET NOCOUNT ON;
DECLARE @now datetime2(7);
DECLARE @locked bigint;
DECLARE @rel TABLE (lease_name varchar(64) COLLATE ${BIN2} NOT NULL, lease_epoch bigint NOT NULL,
  holder_id varchar(128) COLLATE ${BIN2} NOT NULL);
BEGIN TRANSACTION;
${lockRowThenNow('XLOCK')}
UPDATE submission_manager_leases
   SET expires_at = @now, renewed_at = @now
OUTPUT inserted.lease_name, inserted.lease_epoch, inserted.holder_id INTO @rel
 WHERE lease_name = @lease_name AND holder_id = @holder_id AND lease_epoch = @lease_epoch AND expires_at > @now;
INSERT INTO submission_manager_lease_events (lease_name, lease_epoch, holder_id, [event], [at])
SELECT lease_name, lease_epoch, holder_id, 'released', @now FROM @rel;
COMMIT TRANSACTION;
SELECT COUNT(*) AS released FROM @rel;`,
      params: tokenParams(token),
    };
  },

  listEvents(leaseName: string): SqlQuery {
    return {
      text: `SELECT seq, lease_name, lease_epoch, holder_id, [event], [at] FROM submission_manager_lease_events
 WHERE lease_name = @lease_name ORDER BY seq;`,
      params: [p.varchar('lease_name', 64, leaseName)],
    };
  },

  dbNow(): SqlQuery {
    return { text: 'SELECT SYSUTCDATETIME() AS db_now;', params: [] };
  },
};

export class MssqlLeaseStore implements LeaseStore {
  constructor(private readonly db: MssqlRunner) {}

  async get(leaseName: string): Promise<LeaseRow | null> {
    const [rows = []] = await this.db.run<LeaseDbRow>(leaseQueries.get(leaseName));
    return rows[0] ? toLease(rows[0]) : null;
  }

  async tryAcquire(leaseName: string, holderId: string, durationMs: number): Promise<AcquireOutcome> {
    const sets = await this.db.run<LeaseDbRow & { acquired: boolean }>(leaseQueries.tryAcquire(leaseName, holderId, durationMs));
    const row = sets[sets.length - 1]?.[0];
    if (row?.acquired) return { acquired: true, lease: toLease(row) };
    if (row) return { acquired: false, current: toLease(row), dbNow: row.db_now };
    // Unreachable in practice (a failed acquire always sees the row it lost to), kept for the port's contract.
    const [now = []] = await this.db.run<{ db_now: Date }>(leaseQueries.dbNow());
    return { acquired: false, current: null, dbNow: now[0]!.db_now };
  }

  async renew(token: LeaseToken, durationMs: number): Promise<LeaseRow | null> {
    const [rows = []] = await this.db.run<LeaseDbRow>(leaseQueries.renew(token, durationMs));
    return rows[0] ? toLease(rows[0]) : null;
  }

  async release(token: LeaseToken): Promise<boolean> {
    const sets = await this.db.run<{ released: number }>(leaseQueries.release(token));
    return Number(sets[sets.length - 1]?.[0]?.released ?? 0) > 0;
  }

  async listEvents(leaseName: string): Promise<LeaseEvent[]> {
    const [rows = []] = await this.db.run<{ seq: string; lease_name: string; lease_epoch: string; holder_id: string; event: LeaseEvent['event']; at: Date }>(
      leaseQueries.listEvents(leaseName));
    return rows.map((e) => ({
      seq: Number(e.seq), leaseName: e.lease_name, leaseEpoch: Number(e.lease_epoch),
      holderId: e.holder_id, event: e.event, at: e.at,
    }));
  }
}
