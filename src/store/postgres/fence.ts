// The fence: every executor write runs in a transaction that first locks the lease row FOR SHARE
// (not FOR KEY SHARE: acquire/renew/release UPDATE non-key columns and must wait) and holds the lock
// to commit. 0 rows = lease lost; a competing acquire waits until we commit, so no write carrying
// our epoch can commit after a newer epoch exists (../shared/models/fence.pml).
import type { Fenced, LeaseToken } from '../ports.js';
import type { PgDatabase, PgQueryable } from './db.js';
import { runFenced } from '../fencedRun.js';

const FENCE = `SELECT 1 FROM submission_manager_leases
  WHERE lease_name = $1 AND holder_id = $2 AND lease_epoch = $3 AND expires_at > clock_timestamp()
  FOR SHARE`;

const AUDIT = `INSERT INTO submission_execution_audit (lease_name, lease_epoch, holder_id, action, rows_written, at)
  VALUES ($1, $2, $3, $4, $5, clock_timestamp())`;

/**
 * Run `fn` fenced by `token`. `fn` returns the value and how many rows it wrote; the write is recorded in
 * the audit log (numbered by the shared sequence) inside the same transaction. `timeoutMs`: SET LOCAL
 * statement_timeout for this transaction only (lock waits included; the pooled session keeps its own).
 */
export function fencedTransaction<T>(
  db: PgDatabase,
  token: LeaseToken,
  action: string,
  fn: (tx: PgQueryable) => Promise<{ value: T; rowsWritten: number }>,
  timeoutMs?: number,
): Promise<Fenced<T>> {
  return runFenced<PgQueryable, T>({
    transaction: (body) => db.transaction(async (tx) => {
      if (timeoutMs !== undefined) await tx.query(`SET LOCAL statement_timeout = ${Math.max(1, Math.ceil(timeoutMs))}`);
      return body(tx);
    }),
    fence: async (tx) => (await tx.query(FENCE, [token.leaseName, token.holderId, token.leaseEpoch])).rows.length > 0,
    audit: (tx, rows) => tx.query(AUDIT, [token.leaseName, token.leaseEpoch, token.holderId, action, rows]),
  }, fn);
}

/**
 * The same fence as one statement (one round trip, one commit): the `fence` CTE locks the lease row
 * FOR SHARE and every data-modifying CTE must join it (`FROM …, fence`), so no row is written unless the
 * fence row was produced — and locked — first; the lock is held until the statement's transaction
 * commits. The audit row is inserted by the same statement (its sequence number is taken under the lock).
 * Parameters $1..$3 are (lease_name, holder_id, lease_epoch); the statement's own from $4.
 */
export const FENCE_CTE = `fence AS MATERIALIZED (
  SELECT 1 AS ok FROM submission_manager_leases
   WHERE lease_name = $1 AND holder_id = $2 AND lease_epoch = $3 AND expires_at > clock_timestamp()
   FOR SHARE)`;

/** Audit CTE for a one-statement fenced write; `countExpr` counts the rows the statement wrote. */
export const auditCte = (action: string, countExpr: string) => `audit AS (
  INSERT INTO submission_execution_audit (lease_name, lease_epoch, holder_id, action, rows_written, at)
  SELECT $1, $3, $2, '${action}', c.n, clock_timestamp() FROM (SELECT (${countExpr}) AS n) c, fence WHERE c.n > 0)`;

/** Run a one-statement fenced write whose result rows carry `fenced` (rows of the fence CTE: 0 = lost). */
export async function fencedStatement<R>(db: PgQueryable, token: LeaseToken, sql: string, params: unknown[]): Promise<Fenced<R[]>> {
  const r = await db.query<R & { fenced: number }>(sql, [token.leaseName, token.holderId, token.leaseEpoch, ...params]);
  if (Number(r.rows[0]?.fenced ?? 0) === 0) return { kind: 'leaseLost' };
  return { kind: 'ok', value: r.rows };
}

/** The fence tokens as three parallel arrays: $1 names, $2 holders, $3 epochs (unnest(...) AS f(lease_name, holder_id, lease_epoch)). */
export const tokenArrays = (fence: LeaseToken[]): unknown[] =>
  [fence.map((t) => t.leaseName), fence.map((t) => t.holderId), fence.map((t) => t.leaseEpoch)];

const TOKENS = 'unnest($1::varchar[], $2::varchar[], $3::bigint[]) AS f(lease_name, holder_id, lease_epoch)';

// Every lease of the fence, locked in lease-name order (one order for every multi-lease locker: no deadlock among them).
const FENCE_ALL = (lock: 'SHARE' | 'NO KEY UPDATE') => `SELECT l.lease_name FROM submission_manager_leases l
  JOIN ${TOKENS} ON l.lease_name = f.lease_name AND l.holder_id = f.holder_id AND l.lease_epoch = f.lease_epoch
 WHERE l.expires_at > clock_timestamp()
 ORDER BY l.lease_name
 FOR ${lock} OF l`;

const AUDIT_ALL = `INSERT INTO submission_execution_audit (lease_name, lease_epoch, holder_id, action, rows_written, at)
  SELECT f.lease_name, f.lease_epoch, f.holder_id, $4, $5, clock_timestamp() FROM ${TOKENS}`;

/**
 * `fencedTransaction` for a write fenced by EVERY token of `fence` (the partition changer's, issue 26): each lease row
 * read by (name, holder, epoch, not expired) and locked to commit; fewer rows than tokens = leaseLost, nothing
 * written. The audit row is one per lease. `lock`: 'NO KEY UPDATE' when the transaction itself updates the lease rows
 * (a shared lock upgraded by two such transactions at once would deadlock).
 */
export function fencedByAll<T>(
  db: PgDatabase,
  fence: LeaseToken[],
  action: string,
  fn: (tx: PgQueryable) => Promise<{ value: T; rowsWritten: number }>,
  lock: 'SHARE' | 'NO KEY UPDATE' = 'SHARE',
): Promise<Fenced<T>> {
  if (fence.length === 0) throw new RangeError(`${action}: a fence needs at least one lease token`);
  const tokens = tokenArrays(fence);
  return runFenced<PgQueryable, T>({
    transaction: (body) => db.transaction(body),
    fence: async (tx) => (await tx.query(FENCE_ALL(lock), tokens)).rows.length === fence.length,
    audit: (tx, rows) => tx.query(AUDIT_ALL, [...tokens, action, rows]),
  }, fn);
}
