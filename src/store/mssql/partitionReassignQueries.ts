// SQL Server: the intents' side of a partition change (issue 26; port: ../partitionPorts.ts): the reassignment's read,
// the unfenced preparing pass, and the move pieces moveIntents shares (partitionChangeQueries.ts holds the change's
// other steps). Ids are char(36) lower-case text in the binary collation: every comparison and ORDER BY of ids is
// SQL Server's, in byte order (m001, m013). Each read and batch costs what its rows cost, never what the table holds;
// the plan shapes expected against the indexes (not run here: no SQL Server on the machine that wrote them) are
// docs/sqlserver.md's "Partition count change on a large table".
import type { PartitionMove, PrepareBatch, ReassignScope } from '../partitionPorts.js';
import { UNSETTLED_SQL_LIST } from '../intentPorts.js';
import { LEFT_TO_SCAN_SQL, PARTITION_CHANGE_COLS, PREPARABLE_SQL } from '../partitionMapping.js';
import { NEXT_VERSION } from './executionQueries.js';
import { BATCH_START, BIN2, p, uuidText, type SqlQuery } from './params.js';

export const CHANGES = 'submission_manager_partition_changes';
/** The change row as it is, after COMMIT (a batch's last result set). */
export const CHANGE_RESULT = `SELECT ${PARTITION_CHANGE_COLS} FROM ${CHANGES} WHERE change_id = @change_id;`;
export const changeParam = (changeId: string) => p.uuid('change_id', changeId);

/** A move outside the new count is the caller's bug: fail the batch (51002; XACT_ABORT rolls it back) before any write. */
export const MOVES_IN_RANGE = `IF @to IS NOT NULL AND EXISTS (SELECT 1 FROM OPENJSON(@moves) WITH (partition_no int '$.partition') WHERE partition_no < 0 OR partition_no >= @to)
  THROW 51002, 'submission_manager_partition_changes: a move names no partition of the new count', 1;`;
/** The moves as one JSON parameter ([{intentId, partition}], ids canonical), each value checked like its column. */
export const movesParam = (moves: PartitionMove[]) => p.nvarcharMax('moves', JSON.stringify(moves.map((m) => ({
  intentId: uuidText('moves.intentId', m.intentId), partition: p.smallint('moves.partition', m.partition).value }))));
/** Each move joined to its intent (BIN2 ids; `hint`: the intents' table hint), where the intent is not there yet: a
 *  retried batch moves nothing. */
const moveJoin = (hint = '') => `FROM submission_intents AS i${hint}
    JOIN OPENJSON(@moves) WITH (intent_id char(36) '$.intentId', partition_no smallint '$.partition') AS m
      ON i.intent_id = m.intent_id COLLATE ${BIN2}
   WHERE i.partition_no <> m.partition_no`;
export const MOVE_JOIN = moveJoin();
/** A cursor column moved to @param only forward, compared in BIN2 byte order (an older batch cannot move it back). */
export const FORWARD = (col: string, param: string) =>
  `CASE WHEN ${param} IS NOT NULL AND (${col} IS NULL OR ${param} > ${col}) THEN ${param} ELSE ${col} END`;

/** The partition rule of src/intents/partition.ts in SQL (docs/operations.md): the first 4 bytes of SHA-256 of the
 *  key's UTF-8 bytes (partition_key, else the id's lower-case text; nvarchar converted through a UTF-8 collation,
 *  SQL Server 2019+ / Azure SQL), as an unsigned 32-bit number (binary(4) to bigint pads with zero bytes on the
 *  left), mod `count`. */
export const PARTITION_RULE = (alias: string, count: string) =>
  `(CAST(CAST(HASHBYTES('SHA2_256', CAST(COALESCE(${alias}.partition_key, ${alias}.intent_id) COLLATE Latin1_General_100_BIN2_UTF8 AS varchar(512))) AS binary(4)) AS bigint) % ${count})`;

const COLS = 'intent_id, partition_key, partition_no';
// The open intents after @after: an ordered seek on the filtered index ix_intents_unsettled (m015; covering), TOP rows.
// The predicate is the index's filter as literal text, so the optimizer matches it.
const UNSETTLED = `SELECT TOP (@limit) ${COLS} FROM submission_intents WHERE status IN ${UNSETTLED_SQL_LIST} AND intent_id > @after ORDER BY intent_id`;
// The rows modified since @modified_since: per partition 0..MAX(partition_no) (@max_p: one probe of the first column of
// ix_intents_partition_modified), a seek of (partition_no, last_modified_at >= @modified_since) with intent_id >
// @after as its residual, then a TOP N sort of what they found (the recent rows only).
const MODIFIED = `SELECT TOP (@limit) m.intent_id, m.partition_key, m.partition_no FROM parts
  CROSS APPLY (SELECT ${COLS} FROM submission_intents
    WHERE partition_no = parts.p AND last_modified_at >= @modified_since AND intent_id > @after) AS m
  ORDER BY m.intent_id`;
const PARTS = `DECLARE @max_p smallint = (SELECT MAX(partition_no) FROM submission_intents);
WITH parts AS (SELECT CAST(0 AS smallint) AS p WHERE @max_p IS NOT NULL
  UNION ALL SELECT CAST(p + 1 AS smallint) FROM parts WHERE p < @max_p)`;

const LAST_ID = 'ffffffff-ffff-ffff-ffff-ffffffffffff';

export const partitionReassignQueries = {
  /** Up to `limit` intents of `scope` in intent_id order (BIN2: byte order, decided here in SQL) after `after`:
   *  `open` the unsettled ones (ix_intents_unsettled), with modifiedSince UNION the rows modified since (each
   *  partition's range of ix_intents_partition_modified); `all` with modifiedSince those only; `all` without it the
   *  primary key from the cursor (tests and tools only). */
  listForReassign(q: { after: string | null; limit: number; modifiedSince: Date | null; scope: ReassignScope }): SqlQuery {
    const since = q.modifiedSince !== null;
    const text = q.scope === 'open'
      ? (since ? `${PARTS}
SELECT TOP (@limit) ${COLS} FROM (SELECT ${COLS} FROM (${UNSETTLED}) AS a UNION SELECT ${COLS} FROM (${MODIFIED}) AS b) AS u
 ORDER BY intent_id OPTION (MAXRECURSION 32767);` : `${UNSETTLED};`)
      : (since ? `${PARTS}
${MODIFIED} OPTION (MAXRECURSION 32767);` : `SELECT TOP (@limit) ${COLS} FROM submission_intents WHERE intent_id > @after ORDER BY intent_id;`);
    return {
      text,
      params: [
        p.int('limit', q.limit),
        p.varchar('after', 36, q.after === null ? '' : uuidText('after', q.after)),
        ...(since ? [p.datetime2('modified_since', q.modifiedSince)] : []),
      ],
    };
  },

  /**
   * The preparing pass's batch, unfenced (only settled intents with no attempt started move: nothing executes one, and
   * no completion is still to be written in its partition). One transaction: the change row under UPDLOCK+HOLDLOCK
   * (two changers' batches run one at a time, and the range follows its recorded cursor), nothing unless it is
   * preparing; the key range (cursor, @hi], @hi the id `limit` entries on (an ordered seek of the primary key, OFFSET:
   * index entries only; none: the range runs to the last id and ends the pass). In it: the settled rows modified
   * before the horizon whose call is still out get last_modified_at bumped, for the scan; then those with no attempt
   * started (as the UPDATE reads them: under RCSI its statement snapshot, taken after the bump) move to the rule's
   * partition under to_count where it differs, last_modified_at untouched. An attempt closes and never reopens, so of
   * the two statements a row meets the bump's test or, later, the move's (both: harmless). rows_moved += the rows
   * moved (a retry adds 0), prepare_cursor := @hi only forward, a range to the last id → pending with prepared_at;
   * each of the three with its release_ copy, the same value (m020's guard). The row after COMMIT (none: no id).
   */
  prepareBatch(changeId: string, batch: PrepareBatch): SqlQuery {
    const range = `i.intent_id > @from AND i.intent_id <= ISNULL(@hi, '${LAST_ID}') AND i.last_modified_at < @horizon`;
    return {
      text: `
${BATCH_START}
DECLARE @to smallint;
DECLARE @from char(36);
DECLARE @hi char(36);
DECLARE @moved int = 0;
BEGIN TRANSACTION;
SELECT @to = to_count, @from = ISNULL(prepare_cursor, '') FROM ${CHANGES} WITH (UPDLOCK, HOLDLOCK) WHERE change_id = @change_id AND state = 'preparing';
IF @to IS NOT NULL
BEGIN
  SELECT @hi = intent_id FROM submission_intents WHERE intent_id > @from ORDER BY intent_id OFFSET @limit - 1 ROWS FETCH NEXT 1 ROWS ONLY;
  UPDATE i SET last_modified_at = ${NEXT_VERSION('i.last_modified_at', 'SYSUTCDATETIME()')}
    FROM submission_intents AS i WHERE ${range} AND ${LEFT_TO_SCAN_SQL('i')};
  UPDATE i SET partition_no = ${PARTITION_RULE('i', '@to')}
    FROM submission_intents AS i WHERE ${range} AND ${PREPARABLE_SQL('i')} AND i.partition_no <> ${PARTITION_RULE('i', '@to')};
  SET @moved = @@ROWCOUNT;
  SET @now = SYSUTCDATETIME(); -- read after the lock wait on the change row: no earlier than a cancel committed meanwhile
  UPDATE ${CHANGES}
     SET rows_moved = rows_moved + @moved,
         release_rows_moved = release_rows_moved + @moved,
         prepare_cursor = ${FORWARD('prepare_cursor', '@hi')},
         release_prepare_cursor = ${FORWARD('release_prepare_cursor', '@hi')},
         state = CASE WHEN @hi IS NOT NULL THEN state WHEN cancelled_at IS NULL THEN 'pending' ELSE 'completed' END,
         prepared_at = CASE WHEN @hi IS NULL THEN @now ELSE prepared_at END,
         release_prepared_at = CASE WHEN @hi IS NULL THEN @now ELSE release_prepared_at END,
         completed_at = CASE WHEN @hi IS NULL AND cancelled_at IS NOT NULL THEN @now ELSE completed_at END
   WHERE change_id = @change_id AND state = 'preparing';
END;
COMMIT TRANSACTION;
${CHANGE_RESULT}`,
      params: [changeParam(changeId), p.int('limit', positive(batch.limit)), p.datetime2('horizon', batch.horizon)],
    };
  },
};

function positive(limit: number): number {
  if (!Number.isInteger(limit) || limit < 1) throw new RangeError(`prepareBatch: limit ${limit} is not a positive integer`);
  return limit;
}
