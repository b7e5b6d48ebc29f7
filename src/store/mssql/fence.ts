// The fence: every executor write runs in a transaction that first reads the lease row by
// (name, holder, epoch) WITH (HOLDLOCK, ROWLOCK), keeps that shared lock to commit, and only then checks that
// it has not expired (the time is read after the lock is granted, not before a wait for it).
//
// Why HOLDLOCK: HOLDLOCK = SERIALIZABLE for this one table reference, so the read takes a real S lock on
// the key and holds it until COMMIT — also when the database runs READ_COMMITTED_SNAPSHOT (the Azure SQL
// default), where a plain SELECT would read a row version, take no lock at all, and let a competing acquire
// commit a newer epoch between our check and our commit. ../shared/models/fence.pml model-checks exactly
// this: with the lock held to commit no stale-epoch write commits; with the lock released after the check
// (-DNOLOCK, i.e. a plain read under RCSI or READ COMMITTED) spin finds a stale write. The acquire/renew/
// release UPDATEs need an X lock on the row, so they wait for our commit; our audit row takes its number
// from the shared sequence while we hold the lock, so a checker can order fenced writes against acquires.
//
// Two shapes:
//  - fencedBatch: fence + work + audit + COMMIT in ONE batch (one round trip). Used by the executor's
//    writes: no lock is ever held across a client round trip, so a frozen client cannot pin the lease row
//    (SQL Server has no idle-in-transaction timeout). Results are selected after COMMIT from table variables.
//  - fencedTransaction: the same protocol over several requests (for callers that must run JS in between).
import type { Fenced, LeaseToken } from '../ports.js';
import type { MssqlDatabase, MssqlRunner, Row } from './db.js';
import { p, type SqlParam, type SqlQuery } from './params.js';
import { runFenced } from '../fencedRun.js';

/** The fence: the lease row of the token, read by its primary key WITH (HOLDLOCK, ROWLOCK) into @fence_expires. */
const FENCE_READ = `SELECT @fence_expires = expires_at FROM submission_manager_leases WITH (HOLDLOCK, ROWLOCK)
 WHERE lease_name = @fence_lease_name AND holder_id = @fence_holder_id AND lease_epoch = @fence_lease_epoch;`;
/** Its time check, in a later statement: SYSUTCDATETIME() is fixed when a statement starts, so inside the locking
 *  read it would be the time before a lock wait (a release of our own row in progress); read after the lock is granted,
 *  it is the time the lock is held from (as PostgreSQL's clock_timestamp() after the row lock). */
const FENCE_VALID = '@fence_expires > SYSUTCDATETIME()';

const fenceParams = (t: LeaseToken): SqlParam[] => [
  p.varchar('fence_lease_name', 64, t.leaseName),
  p.varchar('fence_holder_id', 128, t.holderId),
  p.bigint('fence_lease_epoch', t.leaseEpoch),
];

export const fenceQueries = {
  /** First statement of a multi-request fenced transaction. */
  fence(token: LeaseToken): SqlQuery {
    return {
      text: `SET XACT_ABORT ON;
DECLARE @fence_expires datetime2(7);
${FENCE_READ}
SELECT 1 AS fenced WHERE ${FENCE_VALID};`,
      params: fenceParams(token),
    };
  },

  audit(token: LeaseToken, action: string, rowsWritten: number): SqlQuery {
    return {
      text: `INSERT INTO submission_execution_audit (lease_name, lease_epoch, holder_id, [action], rows_written, [at])
VALUES (@fence_lease_name, @fence_lease_epoch, @fence_holder_id, @fence_action, @rows_written, SYSUTCDATETIME());`,
      params: [...fenceParams(token), p.varchar('fence_action', 32, action), p.int('rows_written', rowsWritten)],
    };
  },
};

/** The work inside a fenced batch. `body` runs after the fence held and must SET @rows_written. */
export interface FencedWork {
  /** DECLAREs (table variables, locals) — run before BEGIN TRANSACTION. */
  declare: string;
  body: string;
  /** SELECTs emitted after COMMIT (from table variables / locals). */
  results: string;
  params: SqlParam[];
  /** SET LOCK_TIMEOUT for this batch (sp_executesql scope: the pooled session keeps its own): a lock wait past it
   *  fails the batch (1222; XACT_ABORT rolls it back). Absent: waits are bounded by the request timeout only. */
  lockTimeoutMs?: number;
}

/**
 * One batch: fence → work → audit → COMMIT → results. Result set 0 is `fenced` (0 = lease lost, nothing
 * written, nothing else follows); the work's result sets follow it. Params named fence_* and the locals
 * @fence_expires / @rows_written are reserved.
 */
export function buildFencedBatch(token: LeaseToken, action: string, work: FencedWork): SqlQuery {
  return {
    text: `
SET XACT_ABORT ON;
SET NOCOUNT ON;${work.lockTimeoutMs === undefined ? '' : `\nSET LOCK_TIMEOUT ${Math.max(1, Math.ceil(work.lockTimeoutMs))};`}
DECLARE @fence_expires datetime2(7);
DECLARE @rows_written int = 0;
${work.declare.trim()}
BEGIN TRANSACTION;
${FENCE_READ}
IF @fence_expires IS NULL OR NOT (${FENCE_VALID})
BEGIN
  ROLLBACK TRANSACTION;
  SELECT CAST(0 AS bit) AS fenced;
  RETURN;
END;
${work.body.trim()}
IF @rows_written > 0
  INSERT INTO submission_execution_audit (lease_name, lease_epoch, holder_id, [action], rows_written, [at])
  VALUES (@fence_lease_name, @fence_lease_epoch, @fence_holder_id, @fence_action, @rows_written, SYSUTCDATETIME());
COMMIT TRANSACTION;
SELECT CAST(1 AS bit) AS fenced;
${work.results.trim()}`,
    params: [...fenceParams(token), p.varchar('fence_action', 32, action), ...work.params],
  };
}

/** Run a fenced batch: leaseLost, or the work's result sets (after the `fenced` one), typed as `T` rows. */
export async function runFencedBatch<T = Row>(db: MssqlRunner, q: SqlQuery): Promise<Fenced<T[][]>> {
  const sets = await db.run<Row>(q);
  const fenced = sets[0]?.[0]?.fenced;
  if (fenced !== true && fenced !== 1) return { kind: 'leaseLost' };
  return { kind: 'ok', value: sets.slice(1) as unknown as T[][] };
}

/**
 * The fence over several requests on one connection: BEGIN; fence SELECT (0 rows → ROLLBACK, leaseLost);
 * fn; audit row (when fn wrote rows); COMMIT. `fn` returns its value and how many rows it wrote.
 */
export function fencedTransaction<T>(
  db: MssqlDatabase,
  token: LeaseToken,
  action: string,
  fn: (tx: MssqlRunner) => Promise<{ value: T; rowsWritten: number }>,
): Promise<Fenced<T>> {
  return runFenced<MssqlRunner, T>({
    transaction: (body) => db.transaction(body),
    fence: async (tx) => ((await tx.run(fenceQueries.fence(token)))[0] ?? []).length > 0,
    audit: (tx, rows) => tx.run(fenceQueries.audit(token, action, rows)),
  }, fn);
}
