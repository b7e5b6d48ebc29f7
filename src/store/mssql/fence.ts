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
import { BIN2, p, type SqlParam, type SqlQuery } from './params.js';
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

/** How a batch fences: its declarations, the locking read after BEGIN, the condition that means "lost", and where the
 *  audit rows' lease name, epoch and holder come from (one row per lease). */
interface FenceShape {
  declare: string;
  read: string;
  lost: string;
  auditSource: string;
  params: SqlParam[];
}

/** fence → work → audit → COMMIT → results (see buildFencedBatch). */
function fencedBatchOf(fence: FenceShape, action: string, work: FencedWork): SqlQuery {
  return {
    text: `
SET XACT_ABORT ON;
SET NOCOUNT ON;${work.lockTimeoutMs === undefined ? '' : `\nSET LOCK_TIMEOUT ${Math.max(1, Math.ceil(work.lockTimeoutMs))};`}
${fence.declare}
DECLARE @rows_written int = 0;
${work.declare.trim()}
BEGIN TRANSACTION;
${fence.read}
IF ${fence.lost}
BEGIN
  ROLLBACK TRANSACTION;
  SELECT CAST(0 AS bit) AS fenced;
  RETURN;
END;
${work.body.trim()}
IF @rows_written > 0
  INSERT INTO submission_execution_audit (lease_name, lease_epoch, holder_id, [action], rows_written, [at])
  ${fence.auditSource};
COMMIT TRANSACTION;
SELECT CAST(1 AS bit) AS fenced;
${work.results.trim()}`,
    params: [...fence.params, p.varchar('fence_action', 32, action), ...work.params],
  };
}

/**
 * One batch: fence → work → audit → COMMIT → results. Result set 0 is `fenced` (0 = lease lost, nothing
 * written, nothing else follows); the work's result sets follow it. Params named fence_* and the locals
 * @fence_expires / @rows_written are reserved.
 */
export function buildFencedBatch(token: LeaseToken, action: string, work: FencedWork): SqlQuery {
  return fencedBatchOf({
    declare: 'DECLARE @fence_expires datetime2(7);',
    read: FENCE_READ,
    lost: `@fence_expires IS NULL OR NOT (${FENCE_VALID})`,
    auditSource: 'VALUES (@fence_lease_name, @fence_lease_epoch, @fence_holder_id, @fence_action, @rows_written, SYSUTCDATETIME())',
    params: fenceParams(token),
  }, action, work);
}

/**
 * The same batch fenced by EVERY token (issue 26: a changer holds every partition's lease): the tokens travel as one
 * JSON parameter into @fence, then each lease row is read by (name, holder, epoch) WITH (HOLDLOCK, ROWLOCK), one
 * primary-key seek per token in token order (the order the changer took them in), and its expiry checked in the next
 * statement, as FENCE_READ does. Every shared lock is held to commit; any token without its unexpired row, or no
 * token at all, = lease lost. One audit row per token. Reserved: @fence, @fence_* locals and params, @rows_written.
 */
export function buildFencedBatchAll(tokens: LeaseToken[], action: string, work: FencedWork): SqlQuery {
  return fencedBatchOf({
    declare: `DECLARE @fence TABLE (ord int NOT NULL PRIMARY KEY, lease_name varchar(64) COLLATE ${BIN2} NOT NULL,
  holder_id varchar(128) COLLATE ${BIN2} NOT NULL, lease_epoch bigint NOT NULL);
DECLARE @fence_n int;
DECLARE @fence_i int = 0;
DECLARE @fence_name varchar(64);
DECLARE @fence_holder varchar(128);
DECLARE @fence_epoch bigint;
DECLARE @fence_expires datetime2(7);
INSERT INTO @fence (ord, lease_name, holder_id, lease_epoch)
SELECT ord, lease_name, holder_id, lease_epoch
  FROM OPENJSON(@fence_tokens) WITH (ord int '$.ord', lease_name varchar(64) '$.leaseName', holder_id varchar(128) '$.holderId',
                                     lease_epoch bigint '$.leaseEpoch');
SET @fence_n = @@ROWCOUNT;`,
    read: `WHILE @fence_i < @fence_n
BEGIN
  SELECT @fence_name = lease_name, @fence_holder = holder_id, @fence_epoch = lease_epoch FROM @fence WHERE ord = @fence_i;
  SET @fence_expires = NULL;
  SELECT @fence_expires = expires_at FROM submission_manager_leases WITH (HOLDLOCK, ROWLOCK)
   WHERE lease_name = @fence_name AND holder_id = @fence_holder AND lease_epoch = @fence_epoch;
  IF @fence_expires IS NULL OR NOT (${FENCE_VALID}) BREAK;
  SET @fence_i = @fence_i + 1;
END;`,
    lost: '@fence_n = 0 OR @fence_i < @fence_n',
    auditSource: 'SELECT lease_name, lease_epoch, holder_id, @fence_action, @rows_written, SYSUTCDATETIME() FROM @fence',
    params: [p.nvarcharMax('fence_tokens', JSON.stringify(uniqueTokens(tokens).map((t, ord) => ({
      ord, leaseName: fenceText('leaseName', t.leaseName, 64), holderId: fenceText('holderId', t.holderId, 128),
      leaseEpoch: p.bigint('fence_lease_epoch', t.leaseEpoch).value,
    }))))],
  }, action, work);
}

/** The tokens without exact repeats, in their order (a repeat would only be checked twice). */
function uniqueTokens(tokens: LeaseToken[]): LeaseToken[] {
  const seen = new Set<string>();
  return tokens.filter((t) => {
    const k = JSON.stringify([t.leaseName, t.holderId, t.leaseEpoch]);
    return seen.has(k) ? false : (seen.add(k), true);
  });
}

/** A token's text, checked like its column (OPENJSON would truncate silently). */
const fenceText = (name: string, value: string, max: number) => p.varchar(`fence.${name}`, max, value).value;

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
