// SQL Server: the intents' side of a partition change (issue 26; port: ../partitionPorts.ts): the reassignment's read,
// the unfenced preparing pass, and the move pieces moveIntents shares (partitionChangeQueries.ts holds the change's
// other steps). Ids are char(36) lower-case text in the binary collation: every comparison and ORDER BY of ids is
// SQL Server's, in byte order (m001, m013).
import type { PartitionMove, ReassignScope } from '../partitionPorts.js';
import { SETTLED_SQL_LIST, UNSETTLED_SQL_LIST } from '../intentPorts.js';
import { LEFT_TO_SCAN_SQL, PARTITION_CHANGE_COLS, PREPARABLE_SQL } from '../partitionMapping.js';
import { NEXT_VERSION } from './executionQueries.js';
import { BIN2, p, uuidText, type SqlQuery } from './params.js';

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

export const partitionReassignQueries = {
  /** Up to `limit` intents of `scope` in intent_id order (BIN2: byte order, decided here in SQL) after `after`: the
   *  primary key walked and filtered (one read of the table per pass). With modifiedSince, `finished` keeps the rows
   *  modified before it, `open` adds those modified since it (so the two split the settled rows exactly), `all` keeps
   *  only those. Absent predicates are left out rather than OR-ed with NULL, so the plan never carries a dead branch. */
  listForReassign(q: { after: string | null; limit: number; modifiedSince: Date | null; scope: ReassignScope }): SqlQuery {
    const since = q.modifiedSince === null ? null : `last_modified_at ${q.scope === 'finished' ? '<' : '>='} @modified_since`;
    const scope = q.scope === 'finished' ? [`status IN ${SETTLED_SQL_LIST}`, ...(since === null ? [] : [since])]
      : q.scope === 'open' ? [since === null ? `status IN ${UNSETTLED_SQL_LIST}` : `(status IN ${UNSETTLED_SQL_LIST} OR ${since})`]
        : since === null ? [] : [since];
    const where = [...(q.after === null ? [] : ['intent_id > @after']), ...scope];
    return {
      text: `SELECT TOP (@limit) intent_id, partition_key, partition_no FROM submission_intents${where.length ? `\n WHERE ${where.join(' AND ')}` : ''}
 ORDER BY intent_id;`,
      params: [
        p.int('limit', q.limit),
        ...(q.after === null ? [] : [p.uuid('after', q.after)]),
        ...(since === null ? [] : [p.datetime2('modified_since', q.modifiedSince)]),
      ],
    };
  },

  /**
   * The preparing pass, unfenced (only settled intents with no attempt started move: nothing executes one, and no
   * completion is still to be written in its partition). One transaction: the change row under UPDLOCK+HOLDLOCK (two
   * changers' batches run one at a time), nothing unless it is preparing; then the settled intents among the moves
   * locked (UPDLOCK: the committed row, also under RCSI, held to commit); then each move applied where the intent is
   * settled with no attempt started as the UPDATE reads it (its statement snapshot, taken after those locks, holds
   * every start of those rows: a start changes the intent row) and not there yet; last_modified_at untouched. Before
   * that, those whose call is still out get last_modified_at bumped, for the scan: an attempt closes and never
   * reopens, so of two statements (two snapshots) a row meets the bump's test or, later, the move's (both: harmless).
   * rows_moved += the rows moved (a retry adds 0), prepare_cursor only forward, done → pending with prepared_at. The
   * row after COMMIT (none: no id).
   */
  prepareIntents(changeId: string, moves: PartitionMove[], progress: { cursor: string | null; done: boolean }): SqlQuery {
    return {
      text: `
SET XACT_ABORT ON;
SET NOCOUNT ON;
DECLARE @to smallint;
DECLARE @moved int = 0;
DECLARE @locked int = 0;
BEGIN TRANSACTION;
SELECT @to = to_count FROM ${CHANGES} WITH (UPDLOCK, HOLDLOCK) WHERE change_id = @change_id AND state = 'preparing';
${MOVES_IN_RANGE}
IF @to IS NOT NULL
BEGIN
  SELECT @locked = COUNT(*)
    ${moveJoin(' WITH (UPDLOCK, ROWLOCK)')} AND i.status IN ${SETTLED_SQL_LIST};
  UPDATE i SET last_modified_at = ${NEXT_VERSION('i.last_modified_at', 'SYSUTCDATETIME()')}
    ${MOVE_JOIN} AND ${LEFT_TO_SCAN_SQL('i')};
  UPDATE i SET partition_no = m.partition_no
    ${MOVE_JOIN} AND ${PREPARABLE_SQL('i')};
  SET @moved = @@ROWCOUNT;
  UPDATE ${CHANGES}
     SET rows_moved = rows_moved + @moved,
         prepare_cursor = ${FORWARD('prepare_cursor', '@prepare_cursor')},
         state = CASE WHEN @prepare_done = 1 THEN 'pending' ELSE state END,
         prepared_at = CASE WHEN @prepare_done = 1 THEN SYSUTCDATETIME() ELSE prepared_at END
   WHERE change_id = @change_id AND state = 'preparing';
END;
COMMIT TRANSACTION;
${CHANGE_RESULT}`,
      params: [
        changeParam(changeId),
        movesParam(moves),
        p.uuid('prepare_cursor', progress.cursor),
        p.int('prepare_done', progress.done ? 1 : 0),
      ],
    };
  },
};
