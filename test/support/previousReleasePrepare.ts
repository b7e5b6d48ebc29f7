// The previous release's preparing batch (test/support/previousRelease.json's commit: prepareIntents of its
// src/store/{postgres/partitionChangeStore,mysql/partitionChanges,mssql/partitionReassignQueries}.ts), per dialect:
// its statements as that commit issues them (its shared SQL fragments written out; SQL Server's parameters named $n,
// as the harness binds them), in its order and its transaction, so a suite can run them against this release's schema.
import type { DialectContext, DialectHarness, RawSql } from './dialects.js';
import type { PartitionMove } from '../../src/store/partitionPorts.js';

/** The previous release's change columns (its PARTITION_CHANGE_COLS). */
export const OLD_COLS = `change_id, from_count, to_count, state, requested_at, requested_by, prepare_cursor,
  prepared_at, changer, claimed_at, switched_at, scan_cursor, scan_done_at, rows_moved, completed_at`;

const SETTLED = "('succeeded', 'cancelled')";
const CALL_OUT = "EXISTS (SELECT 1 FROM submission_attempts AS a WHERE a.intent_id = i.intent_id AND a.outcome = 'started')";
const PREPARABLE = `i.status IN ${SETTLED}
     AND NOT ${CALL_OUT}`;
const LEFT_TO_SCAN = `i.status IN ${SETTLED}
     AND ${CALL_OUT}`;

/** One batch: `moves` (intent → partition under to_count), the cursor it records, and whether it ends the pass. */
export interface OldBatch { moves: PartitionMove[]; cursor: string | null; done: boolean }
type Run = (ctx: DialectContext, changeId: string, b: OldBatch) => Promise<unknown>;

const PG_LOCK_CHANGE = `SELECT ${OLD_COLS} FROM submission_manager_partition_changes WHERE change_id = $1 FOR UPDATE`;
const PG_PREPARE_LOCK = `SELECT intent_id FROM submission_intents
  WHERE intent_id = ANY($1::uuid[]) AND status IN ${SETTLED} ORDER BY intent_id FOR UPDATE`;
const PG_PREPARE = `/* sm:partition_prepare */
WITH moved AS (
  UPDATE submission_intents i SET partition_no = m.partition_no
    FROM unnest($2::uuid[], $3::int[]) AS m(intent_id, partition_no)
   WHERE i.intent_id = m.intent_id AND i.intent_id = ANY($6::uuid[]) AND i.partition_no <> m.partition_no AND ${PREPARABLE}
  RETURNING 1
),
left_to_scan AS (
  UPDATE submission_intents i SET last_modified_at = GREATEST(clock_timestamp(), i.last_modified_at + interval '1 microsecond')
   WHERE i.intent_id = ANY($6::uuid[]) AND ${LEFT_TO_SCAN}
  RETURNING 1
)
UPDATE submission_manager_partition_changes
   SET rows_moved = rows_moved + (SELECT count(*) FROM moved), prepare_cursor = GREATEST(prepare_cursor, $4::uuid),
       state = CASE WHEN $5::boolean THEN 'pending' ELSE state END,
       prepared_at = CASE WHEN $5::boolean THEN clock_timestamp() ELSE prepared_at END
 WHERE change_id = $1
RETURNING ${OLD_COLS}`;

const pg: Run = (ctx, changeId, b) => ctx.transaction!(async (sql) => {
  const c = (await sql<{ state: string }>(PG_LOCK_CHANGE, [changeId]))[0];
  if (!c || c.state !== 'preparing') return c;
  const ids = b.moves.map((m) => m.intentId);
  const settled = ids.length === 0 ? [] : (await sql<{ intent_id: string }>(PG_PREPARE_LOCK, [ids])).map((r) => r.intent_id);
  return (await sql(PG_PREPARE, [changeId, ids, b.moves.map((m) => m.partition), b.cursor, b.done, settled]))[0];
});

const MY_ID = 'CHAR(36) CHARACTER SET ascii COLLATE ascii_bin';
const MY_NEXT_MODIFIED = 'GREATEST(UTC_TIMESTAMP(6), i.last_modified_at + INTERVAL 1 MICROSECOND)';
const MY_CHANGE = `SELECT ${OLD_COLS} FROM submission_manager_partition_changes WHERE change_id = ?`;
const MY_MOVES = `(SELECT * FROM JSON_TABLE(?, '$[*]' COLUMNS (intent_id ${MY_ID} PATH '$.id', partition_no INT PATH '$.p')) AS jt)`;
const MY_PREPARE_PICK = `SELECT i.intent_id FROM submission_intents AS i JOIN ${MY_MOVES} AS m ON m.intent_id = i.intent_id
 WHERE i.intent_id IN (?) AND i.partition_no <> m.partition_no AND ${PREPARABLE} ORDER BY i.intent_id FOR UPDATE`;
const MY_PREPARE_MOVE = `UPDATE submission_intents AS i JOIN ${MY_MOVES} AS m ON m.intent_id = i.intent_id
   SET i.partition_no = m.partition_no WHERE i.intent_id IN (?) AND ${PREPARABLE}`;
const MY_PREPARE_LOCK = `SELECT intent_id FROM submission_intents WHERE intent_id IN (?) AND status IN ${SETTLED}
 ORDER BY intent_id FOR UPDATE`;
const MY_PREPARE_LEAVE = `UPDATE submission_intents AS i SET i.last_modified_at = ${MY_NEXT_MODIFIED}
 WHERE i.intent_id IN (?) AND ${LEFT_TO_SCAN}`;
const MY_PREPARED = `UPDATE submission_manager_partition_changes
   SET rows_moved = rows_moved + ?,
       prepare_cursor = CASE WHEN ? IS NULL OR (prepare_cursor IS NOT NULL AND prepare_cursor >= ?) THEN prepare_cursor ELSE ? END,
       state = CASE WHEN ? THEN 'pending' ELSE state END,
       prepared_at = CASE WHEN ? THEN UTC_TIMESTAMP(6) ELSE prepared_at END
 WHERE change_id = ?`;

const mysql: Run = (ctx, changeId, b) => ctx.transaction!(async (sql: RawSql) => {
  const c = (await sql<{ state: string }>(`${MY_CHANGE} FOR UPDATE`, [changeId]))[0];
  if (!c || c.state !== 'preparing') return c;
  const ids = b.moves.map((m) => m.intentId.toLowerCase());
  const json = JSON.stringify(b.moves.map((m, k) => ({ id: ids[k], p: m.partition })));
  const cursor = b.cursor === null ? null : b.cursor.toLowerCase();
  const locked = ids.length === 0 ? [] : (await sql<{ intent_id: string }>(MY_PREPARE_LOCK, [ids])).map((r) => r.intent_id);
  if (locked.length > 0) await sql(MY_PREPARE_LEAVE, [locked]);
  const picked = locked.length === 0 ? [] : (await sql<{ intent_id: string }>(MY_PREPARE_PICK, [json, locked])).map((r) => r.intent_id);
  if (picked.length > 0) await sql(MY_PREPARE_MOVE, [json, picked]);
  await sql(MY_PREPARED, [picked.length, cursor, cursor, cursor, b.done, b.done, changeId]);
  return (await sql(MY_CHANGE, [changeId]))[0];
});

const MS_MOVE_JOIN = (hint: string) => `FROM submission_intents AS i${hint}
    JOIN OPENJSON(@moves) WITH (intent_id char(36) '$.intentId', partition_no smallint '$.partition') AS m
      ON i.intent_id = m.intent_id COLLATE Latin1_General_100_BIN2
   WHERE i.partition_no <> m.partition_no`;
const MS_PREPARE = `
SET XACT_ABORT ON;
SET NOCOUNT ON;
DECLARE @change_id char(36) = $1;
DECLARE @moves nvarchar(max) = $2;
DECLARE @prepare_cursor char(36) = $3;
DECLARE @prepare_done int = $4;
DECLARE @to smallint;
DECLARE @moved int = 0;
DECLARE @locked int = 0;
BEGIN TRANSACTION;
SELECT @to = to_count FROM submission_manager_partition_changes WITH (UPDLOCK, HOLDLOCK) WHERE change_id = @change_id AND state = 'preparing';
IF @to IS NOT NULL AND EXISTS (SELECT 1 FROM OPENJSON(@moves) WITH (partition_no int '$.partition') WHERE partition_no < 0 OR partition_no >= @to)
  THROW 51002, 'submission_manager_partition_changes: a move names no partition of the new count', 1;
IF @to IS NOT NULL
BEGIN
  SELECT @locked = COUNT(*)
    ${MS_MOVE_JOIN(' WITH (UPDLOCK, ROWLOCK)')} AND i.status IN ${SETTLED};
  UPDATE i SET last_modified_at = CASE WHEN SYSUTCDATETIME() > i.last_modified_at THEN SYSUTCDATETIME() ELSE DATEADD(nanosecond, 100, i.last_modified_at) END
    ${MS_MOVE_JOIN('')} AND ${LEFT_TO_SCAN};
  UPDATE i SET partition_no = m.partition_no
    ${MS_MOVE_JOIN('')} AND ${PREPARABLE};
  SET @moved = @@ROWCOUNT;
  UPDATE submission_manager_partition_changes
     SET rows_moved = rows_moved + @moved,
         prepare_cursor = CASE WHEN @prepare_cursor IS NOT NULL AND (prepare_cursor IS NULL OR @prepare_cursor > prepare_cursor) THEN @prepare_cursor ELSE prepare_cursor END,
         state = CASE WHEN @prepare_done = 1 THEN 'pending' ELSE state END,
         prepared_at = CASE WHEN @prepare_done = 1 THEN SYSUTCDATETIME() ELSE prepared_at END
   WHERE change_id = @change_id AND state = 'preparing';
END;
COMMIT TRANSACTION;
SELECT ${OLD_COLS} FROM submission_manager_partition_changes WHERE change_id = @change_id;`;

const mssql: Run = (ctx, changeId, b) => ctx.sql(MS_PREPARE, [changeId,
  JSON.stringify(b.moves.map((m) => ({ intentId: m.intentId.toLowerCase(), partition: m.partition }))), b.cursor, b.done ? 1 : 0]);

/** The previous release's preparing batch of `changeId` on `ctx`'s database; rejects with the database's error. */
export const oldPrepare: Record<DialectHarness['name'], Run> = { pglite: pg, postgres: pg, mysql, mssql };
