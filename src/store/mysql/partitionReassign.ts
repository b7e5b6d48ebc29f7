// MySQL / MariaDB: the intents' side of a partition change (port: ../partitionPorts.ts): the reassignment's reads and
// the preparing pass's batch. Each costs what its rows cost, never what the table holds:
// - the open intents after a cursor: for each partition present (0..MAX(partition_no), read from the first column of
//   an index) and each unsettled status, one range of ix_intents_partition_scheduled (partition_no, status,
//   intent_id, …), which orders a (partition, status) by id, LIMIT rows each; merged, LIMIT rows in all. A page
//   examines at most (partitions × 3 + 1) × limit index entries (and the recent rows below), however many finished
//   rows lie between the open ones;
// - the rows modified since a time: each partition's range of ix_intents_partition_modified from that time, sorted;
// - the preparing pass's key range: the next `limit` ids of the primary key, then set-based UPDATEs inside it, the
//   partition computed by the rule in SQL (PARTITION_RULE), no row sent either way; a range with no call out (one
//   probe of the started attempts) moves its rows in one UPDATE, without a probe per row.
import type { PartitionChange, PrepareBatch, ReassignRow, ReassignScope } from '../partitionPorts.js';
import { SETTLED_SQL_LIST, UNSETTLED_STATUSES } from '../intentPorts.js';
import { dbTime, type MyQueryable } from './db.js';
import { NEXT_MODIFIED, NOW } from './rows.js';

/** The partition rule of src/intents/partition.ts in SQL (docs/operations.md): the first 4 bytes of SHA-256 of the
 *  key's UTF-8 (utf8mb4) bytes (partition_key, else the id's lower-case text), unsigned big-endian, mod the count
 *  (`?`). Pinned against the TypeScript rule by the contract tests (keys of every width of UTF-8). */
export const PARTITION_RULE = (alias: string) =>
  `(CAST(CONV(LEFT(SHA2(COALESCE(${alias}.partition_key, ${alias}.intent_id), 256), 8), 16, 10) AS UNSIGNED) % ?)`;

const COLS = 'intent_id, partition_key, partition_no';
const SINCE = 'CAST(? AS DATETIME(6))';

/** The partitions that hold rows: 0..MAX(partition_no) (one probe of the index's first column); none if no row. */
async function partitionsPresent(db: MyQueryable): Promise<number[]> {
  const max = (await db.query<{ m: number | null }>('SELECT MAX(partition_no) AS m FROM submission_intents')).rows[0]?.m;
  return max === null || max === undefined ? [] : Array.from({ length: Number(max) + 1 }, (_, p) => p);
}

type Branch = { text: string; params: unknown[] };

const unsettled = (partition: number, status: string, after: string, limit: number): Branch => ({
  text: `(SELECT ${COLS} FROM submission_intents FORCE INDEX (ix_intents_partition_scheduled)
    WHERE partition_no = ? AND status = ? AND intent_id > ? ORDER BY intent_id LIMIT ?)`,
  params: [partition, status, after, limit],
});

const modified = (partitions: number[], since: Date, after: string, limit: number): Branch => ({
  text: `(SELECT ${COLS} FROM submission_intents FORCE INDEX (ix_intents_partition_modified)
    WHERE partition_no IN (?) AND last_modified_at >= ${SINCE} AND intent_id > ? ORDER BY intent_id LIMIT ?)`,
  params: [partitions, dbTime(since), after, limit],
});

export async function listForReassign(db: MyQueryable, q: { after: string | null; limit: number; modifiedSince: Date | null; scope: ReassignScope }):
Promise<ReassignRow[]> {
  const after = q.after ?? '';
  let branches: Branch[];
  if (q.scope === 'all' && q.modifiedSince === null) {
    // Tests and tools only (the changer always names modifiedSince): the primary key from the cursor.
    branches = [{ text: `(SELECT ${COLS} FROM submission_intents WHERE intent_id > ? ORDER BY intent_id LIMIT ?)`, params: [after, q.limit] }];
  } else {
    const partitions = await partitionsPresent(db);
    if (partitions.length === 0) return [];
    branches = [
      ...(q.scope === 'open' ? partitions.flatMap((p) => UNSETTLED_STATUSES.map((st) => unsettled(p, st, after, q.limit))) : []),
      ...(q.modifiedSince === null ? [] : [modified(partitions, q.modifiedSince, after, q.limit)]),
    ];
  }
  // UNION (not ALL): a row both unsettled and recently modified comes once.
  const text = `SELECT ${COLS} FROM (${branches.map((b) => b.text).join('\n UNION ')}) AS u ORDER BY intent_id LIMIT ?`;
  const r = await db.query<{ intent_id: string; partition_key: string | null; partition_no: number }>(text,
    [...branches.flatMap((b) => b.params), q.limit]);
  return r.rows.map((x) => ({ intentId: x.intent_id, partitionKey: x.partition_key, partition: Number(x.partition_no) }));
}

// The preparing pass's key range: the id `limit` entries after the cursor, none when fewer remain.
const EDGE = 'SELECT intent_id AS hi FROM submission_intents WHERE intent_id > ? ORDER BY intent_id LIMIT 1 OFFSET ?';
const IN_RANGE = `i.intent_id > ? AND i.intent_id <= ? AND i.last_modified_at < ${SINCE}`;
// The tests of PREPARABLE_SQL and LEFT_TO_SCAN_SQL (partitionMapping.ts) with the attempts probed by their primary key
// (intent_id, attempt_no): MariaDB runs EXISTS in an UPDATE as a dependent subquery and would otherwise pick
// ix_attempts_open (outcome, …), every started attempt per row. Single-table UPDATEs on purpose: under READ COMMITTED
// InnoDB reads a row another transaction holds as last committed and skips it when it does not match (an open intent
// a leader is writing never matches), where a multi-table UPDATE would wait for its lock.
const callOut = `EXISTS (SELECT 1 FROM submission_attempts AS a FORCE INDEX (PRIMARY) WHERE a.intent_id = i.intent_id AND a.outcome = 'started')`;
// Those whose call is still out get last_modified_at bumped (for the scan), BEFORE the move, each statement its own
// snapshot: an attempt closes and never reopens, so a row the bump saw closed is one the move sees closed too (a row
// bumped and then moved is harmless).
const LEAVE = `UPDATE submission_intents AS i SET i.last_modified_at = ${NEXT_MODIFIED('i.last_modified_at')}
 WHERE ${IN_RANGE} AND i.status IN ${SETTLED_SQL_LIST} AND ${callOut}`;
// A settled row modified before the horizon changes only by a purge (a deleted row is skipped). Only rows not in their
// partition yet match, so the rows matched are the rows moved.
const MOVE = `UPDATE submission_intents AS i SET i.partition_no = ${PARTITION_RULE('i')}
 WHERE ${IN_RANGE} AND i.status IN ${SETTLED_SQL_LIST} AND NOT ${callOut} AND i.partition_no <> ${PARTITION_RULE('i')}`;
// Any attempt of the range still started: the started attempts' entries of ix_attempts_open (outcome, lease_epoch, then
// the primary key), their ids tested in the index: as many entries as calls out, however many rows the range holds.
const OUT_IN_RANGE = `SELECT 1 FROM submission_attempts FORCE INDEX (ix_attempts_open) WHERE outcome = 'started' AND intent_id > ? AND intent_id <= ?`;
const ANY_OUT = `SELECT EXISTS (${OUT_IN_RANGE}) AS out_`;
// The common case, no call out in the range (a finished row's attempt is closed): MOVE with its test made once for the
// whole range, in its own statement (an uncorrelated subquery, read once): when it holds, no row of the range has a
// started attempt in the statement's snapshot, so it moves exactly the rows MOVE would and leaves none for LEAVE to
// bump. A call started since the probe makes it move nothing; a range that moved nothing takes the careful path.
const MOVE_RANGE = `UPDATE submission_intents AS i SET i.partition_no = ${PARTITION_RULE('i')}
 WHERE ${IN_RANGE} AND i.status IN ${SETTLED_SQL_LIST} AND NOT EXISTS (${OUT_IN_RANGE}) AND i.partition_no <> ${PARTITION_RULE('i')}`;
// The cursor only moves forward; a range that reached the last id ends the pass: pending, or, for a change cancelled
// after rows moved (its pass moving them back under to_count := from_count), cancelled (completed). rows_moved,
// prepare_cursor and prepared_at are written with their release_ copies (m014's guard), each copy by the same
// expression of its own old value (equal to the original's), whatever order the server assigns in; UTC_TIMESTAMP is
// one value per statement.
const cursorTo = (col: string) => `CASE WHEN ? OR (${col} IS NOT NULL AND ${col} >= ?) THEN ${col} ELSE ? END`;
const PREPARED = `UPDATE submission_manager_partition_changes
   SET rows_moved = rows_moved + ?, release_rows_moved = release_rows_moved + ?,
       prepare_cursor = ${cursorTo('prepare_cursor')}, release_prepare_cursor = ${cursorTo('release_prepare_cursor')},
       state = CASE WHEN NOT ? THEN state WHEN cancelled_at IS NULL THEN 'pending' ELSE 'completed' END,
       prepared_at = CASE WHEN ? THEN ${NOW} ELSE prepared_at END,
       release_prepared_at = CASE WHEN ? THEN ${NOW} ELSE release_prepared_at END,
       completed_at = CASE WHEN ? AND cancelled_at IS NOT NULL THEN ${NOW} ELSE completed_at END
 WHERE change_id = ?`;

const LAST_ID = 'ffffffff-ffff-ffff-ffff-ffffffffffff';

/** One batch of the preparing pass, in `tx` after the change row `c` (state preparing) was locked FOR UPDATE. The
 *  caller reads the change back. */
export async function prepareBatch(tx: MyQueryable, c: PartitionChange, batch: PrepareBatch): Promise<void> {
  if (!Number.isInteger(batch.limit) || batch.limit < 1) throw new RangeError(`prepareBatch: limit ${batch.limit} is not a positive integer`);
  const from = c.prepareCursor ?? '';
  const hi = (await tx.query<{ hi: string }>(EDGE, [from, batch.limit - 1])).rows[0]?.hi ?? null;
  const upTo = hi ?? LAST_ID;
  const range = [from, upTo, dbTime(batch.horizon)];
  const anyOut = Number((await tx.query<{ out_: number }>(ANY_OUT, [from, upTo])).rows[0]!.out_) !== 0;
  let moved = anyOut ? 0 : (await tx.query(MOVE_RANGE, [c.toCount, ...range, from, upTo, c.toCount])).affectedRows;
  if (moved === 0) {
    await tx.query(LEAVE, range);
    moved = (await tx.query(MOVE, [c.toCount, ...range, c.toCount])).affectedRows;
  }
  const done = hi === null;
  await tx.query(PREPARED, [moved, moved, done, hi, hi, done, hi, hi, done, done, done, done, c.changeId]);
}
