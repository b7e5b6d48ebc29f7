// The fence: every executor write runs in a READ COMMITTED transaction that first reads the lease row by
// (name, holder, epoch, not expired) with LOCK IN SHARE MODE (MariaDB 10.11 has no FOR SHARE; both servers
// accept this spelling) and keeps that S lock to commit. 0 rows = lease lost. Acquire/renew/release take the
// row's X lock, so a newer acquire waits until every fenced transaction of the old holder has committed, and a
// fenced transaction that starts after it waits for the acquire and then finds the new epoch
// (../shared/models/fence.pml). READ COMMITTED: no gap locks, and a locking read sees the latest committed row.
// The audit row takes its number from the shared sequence while the lock is held.
// fencedBatch is the same protocol in two round trips (the executor's start and completion).
import type { Fenced, LeaseToken } from '../ports.js';
import type { MyDatabase, MyQueryable, MyResult, MyStatement, Row } from './db.js';
import { NOW } from './rows.js';
import { runFenced } from '../fencedRun.js';

const FENCE = `SELECT 1 AS fenced FROM submission_manager_leases
 WHERE lease_name = ? AND holder_id = ? AND lease_epoch = ? AND expires_at > ${NOW}
 LOCK IN SHARE MODE`;

const NEXT_SEQ = 'INSERT INTO submission_manager_seq () VALUES ()';

/** The next number of the sequence shared by lease events and fenced writes (taken inside the caller's transaction). */
export async function nextSeq(tx: MyQueryable): Promise<number> {
  const r = await tx.query(NEXT_SEQ);
  return r.insertId;
}

/** The audit row of a fenced write, numbered by `seq` (SQL: a placeholder, or LAST_INSERT_ID()); only when `when`
 *  (an SQL condition) holds, if given. */
const auditInsert = (seq: string, when?: string) => `INSERT INTO submission_execution_audit (seq, lease_name, lease_epoch, holder_id, action, rows_written, at)
  ${when === undefined ? 'VALUES (' : 'SELECT '}${seq}, ?, ?, ?, ?, ?, ${NOW}${when === undefined ? ')' : ` FROM DUAL WHERE ${when}`}`;

/** Append the audit row of a fenced write (inside the fenced transaction); returns its sequence number. */
export async function writeAudit(tx: MyQueryable, token: LeaseToken, action: string, rowsWritten: number): Promise<number> {
  const seq = await nextSeq(tx);
  await tx.query(auditInsert('?'), [seq, token.leaseName, token.leaseEpoch, token.holderId, action, rowsWritten]);
  return seq;
}

/** `tx` with every statement capped at `timeoutMs` (lock waits included) on MariaDB (SET STATEMENT … FOR: that
 *  statement only, the pooled session keeps its own). MySQL has no such per-statement form: its session
 *  timeout (max_execution_time, SELECTs only) and innodb_lock_wait_timeout stay in force (docs/mysql.md). */
function capped(tx: MyQueryable, timeoutMs: number): MyQueryable {
  const prefix = `SET STATEMENT max_statement_time = ${Math.max(1, Math.ceil(timeoutMs)) / 1000} FOR `;
  return { query: (text, params) => tx.query(prefix + text, params) };
}

/**
 * Run `fn` fenced by `token`. `fn` returns the value and how many rows it wrote; the write is recorded in
 * the audit log (numbered by the shared sequence) inside the same transaction. `timeoutMs`: see `capped`.
 */
export function fencedTransaction<T>(
  db: MyDatabase,
  token: LeaseToken,
  action: string,
  fn: (tx: MyQueryable) => Promise<{ value: T; rowsWritten: number }>,
  timeoutMs?: number,
): Promise<Fenced<T>> {
  return runFenced<MyQueryable, T>({
    transaction: async (body) => {
      // The flavour before the transaction takes its connection: db.server() checks one out of the pool, so asked
      // inside, a pool with no other free connection waits for the one this transaction holds (until its deadline).
      const cap = timeoutMs !== undefined && (await db.server()).flavor === 'mariadb' ? timeoutMs : null;
      return db.transaction(async (tx) => body(cap === null ? tx : capped(tx, cap)));
    },
    fence: async (tx) => (await tx.query(FENCE, [token.leaseName, token.holderId, token.leaseEpoch])).rows.length > 0,
    audit: (tx, rows) => writeAudit(tx, token, action, rows),
  }, fn);
}

// Every token's row in one statement (the redundant `lease_name IN` finds them by primary key), each locked for share
// to commit as FENCE does; fewer rows than tokens = some lease lost.
const FENCE_ALL = `SELECT lease_name FROM submission_manager_leases
 WHERE lease_name IN (?) AND (lease_name, holder_id, lease_epoch) IN (?) AND expires_at > ${NOW}
 LOCK IN SHARE MODE`;

/** True when every token's lease row is held by it and not expired (and now locked for share to commit). */
async function fenceAll(tx: MyQueryable, tokens: LeaseToken[]): Promise<boolean> {
  const rows = (await tx.query(FENCE_ALL, [tokens.map((t) => t.leaseName), tokens.map((t) => [t.leaseName, t.holderId, t.leaseEpoch])])).rows;
  return rows.length === tokens.length;
}

/** Run `fn` fenced by EVERY token (the partition changer's writes): one audit row per lease, each under its own epoch. */
export async function fencedTransactionAll<T>(
  db: MyDatabase,
  tokens: LeaseToken[],
  action: string,
  fn: (tx: MyQueryable) => Promise<{ value: T; rowsWritten: number }>,
): Promise<Fenced<T>> {
  if (tokens.length === 0) throw new RangeError(`${action}: a fence needs at least one lease token`);
  return runFenced<MyQueryable, T>({
    transaction: (body) => db.transaction(body),
    fence: (tx) => fenceAll(tx, tokens),
    audit: async (tx, rows) => {
      for (const t of tokens) await writeAudit(tx, t, action, rows);
    },
  }, fn);
}

/** The guard every locking read of a fencedBatch ends its WHERE with (params: `heldParams`): the token's lease row, read
 *  by primary key without a lock (a subquery of a locking read locks nothing; MariaDB has no FOR UPDATE OF). When the
 *  fence found no row because another epoch holds the lease, the guard is false before any row is read, so a deposed
 *  leader's first round trip locks nothing. No expiry test: the fence's S lock keeps the row as it is (no renew) to
 *  COMMIT, and a lease that expires while the reads wait must not make them find nothing after the fence held. */
export const HELD = 'EXISTS (SELECT 1 FROM submission_manager_leases AS f WHERE f.lease_name = ? AND f.holder_id = ? AND f.lease_epoch = ?)';
export const heldParams = (token: LeaseToken): unknown[] => [token.leaseName, token.holderId, token.leaseEpoch];

/** A fenced write in two round trips: what it reads (locks) after the fence, and what it writes from what it read. */
export interface FencedPlan<T> {
  /** Locking reads (SELECTs, each guarded by HELD), sent with the fence in its round trip and run after it. */
  reads: MyStatement[];
  /** The fence held: from the reads' rows, the writes, how many rows they write (the audit's count; 0 = no audit
   *  row) and the value from the writes' results. The writes change only rows the reads locked (they wait for no lock).
   *  `writesIf`: an SQL condition the writes themselves test in the commit trip (they write nothing when it is false):
   *  the audit row is written only when it holds. */
  decide(reads: Row[][]): { writes: MyStatement[]; rowsWritten: number; writesIf?: string; value(results: MyResult[]): T };
}

/**
 * runFenced's protocol (fencedTransaction) pipelined, on one connection: round trip 1 is START TRANSACTION, the
 * fence and `plan.reads`; round trip 2, only when the fence found the row (now S-locked to commit), is the writes
 * `plan.decide` chose, the audit row (the shared sequence, then the row numbered by LAST_INSERT_ID()) and COMMIT. No
 * fence row: ROLLBACK, leaseLost, nothing written (no write was sent). A failing statement stops its batch and the
 * transaction rolls back, so the writes and their audit row commit together or not at all.
 */
export function fencedBatch<T>(db: MyDatabase, token: LeaseToken, action: string, plan: FencedPlan<T>): Promise<Fenced<T>> {
  for (const r of plan.reads) {
    if (!/^\s*SELECT\b/i.test(r.text) || !r.text.includes(HELD)) throw new Error(`${action}: a fenced read must be a SELECT guarded by HELD`);
  }
  return db.pipelined(async (tx): Promise<Fenced<T>> => {
    const [fence, ...reads] = await tx.send([
      { text: FENCE, params: [token.leaseName, token.holderId, token.leaseEpoch], waits: true },
      ...plan.reads.map((r) => ({ ...r, waits: true })),
    ]);
    if (fence!.rows.length === 0) return { kind: 'leaseLost' }; // returned without COMMIT: rolled back
    const out = plan.decide(reads.map((r) => r.rows));
    const audit: MyStatement[] = out.rowsWritten === 0 ? [] : [
      { text: NEXT_SEQ },
      { text: auditInsert('LAST_INSERT_ID()', out.writesIf), params: [token.leaseName, token.leaseEpoch, token.holderId, action, out.rowsWritten] },
    ];
    const results = await tx.commit([...out.writes, ...audit]);
    return { kind: 'ok', value: out.value(results.slice(0, out.writes.length)) };
  });
}
