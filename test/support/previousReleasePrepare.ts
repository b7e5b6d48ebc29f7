// The previous release's preparing batch (test/support/previousRelease.json's commit, 0.2.0: prepareBatch of its
// src/store/{postgres/partitionChangeStore + postgres/partitionReassign, mysql/partitionChanges + mysql/
// partitionReassign, mssql/partitionReassignQueries}.ts), per dialect: its statements as that commit issues them (its
// shared SQL fragments written out; SQL Server's parameters named $n, as the harness binds them), in its order and its
// transaction, so a suite can run them against this release's schema. Its batch is a key range of `limit` ids after
// the recorded cursor: it moves the finished intents there to their partition under to_count (the rule in SQL),
// records the cursor and, for a range that reaches the last id, ends the pass.
import type { DialectContext, DialectHarness, RawSql } from './dialects.js';

/** The previous release's change columns (its PARTITION_CHANGE_COLS). */
export const OLD_COLS = `change_id, from_count, to_count, state, requested_at, requested_by, prepare_cursor,
  prepared_at, changer, claimed_at, switched_at, scan_cursor, scan_done_at, catch_up_cursor, rows_moved, completed_at, failed_steps,
  last_step_error, last_failed_at, cancelled_at, cancelled_by`;

const SETTLED = "('succeeded', 'cancelled')";
const CALL_OUT = "EXISTS (SELECT 1 FROM submission_attempts AS a WHERE a.intent_id = i.intent_id AND a.outcome = 'started')";
const PREPARABLE = `i.status IN ${SETTLED}
     AND NOT ${CALL_OUT}`;
const LEFT_TO_SCAN = `i.status IN ${SETTLED}
     AND ${CALL_OUT}`;
const NIL_UUID = '00000000-0000-0000-0000-000000000000';
const LAST_ID = 'ffffffff-ffff-ffff-ffff-ffffffffffff';

/** One batch as its changer asks for it: the key range's size and the horizon (rows modified before it move). */
export interface OldBatch { limit: number; horizon: Date }
type Run = (ctx: DialectContext, changeId: string, b: OldBatch) => Promise<unknown>;

const PG_LOCK_CHANGE = `SELECT ${OLD_COLS} FROM submission_manager_partition_changes WHERE change_id = $1 FOR UPDATE`;
const PG_RULE = (alias: string, count: string) =>
  `(('x' || left(encode(sha256(convert_to(COALESCE(${alias}.partition_key, ${alias}.intent_id::text), 'UTF8')), 'hex'), 8))::bit(32)::bigint % ${count})::smallint`;
const PG_EDGE = 'SELECT intent_id::text AS hi FROM submission_intents WHERE intent_id > $1::uuid ORDER BY intent_id OFFSET $2 - 1 LIMIT 1';
const pgInRange = (alias: string) => `${alias}.intent_id > $2::uuid AND ${alias}.intent_id <= $3::uuid AND ${alias}.last_modified_at < $6`;
const PG_PREPARE = `/* sm:partition_prepare */
WITH moved AS (
  UPDATE submission_intents i SET partition_no = ${PG_RULE('i', '$5::int')}
   WHERE ${pgInRange('i')} AND ${PREPARABLE} AND i.partition_no <> ${PG_RULE('i', '$5::int')}
  RETURNING 1
),
left_to_scan AS (
  UPDATE submission_intents i SET last_modified_at = GREATEST(clock_timestamp(), i.last_modified_at + interval '1 microsecond')
   WHERE ${pgInRange('i')} AND ${LEFT_TO_SCAN}
  RETURNING 1
)
UPDATE submission_manager_partition_changes
   SET rows_moved = rows_moved + (SELECT count(*) FROM moved),
       prepare_cursor = CASE WHEN $4::boolean THEN prepare_cursor ELSE GREATEST(prepare_cursor, $3::uuid) END,
       state = CASE WHEN NOT $4::boolean THEN state WHEN cancelled_at IS NULL THEN 'pending' ELSE 'completed' END,
       prepared_at = CASE WHEN $4::boolean THEN clock_timestamp() ELSE prepared_at END,
       completed_at = CASE WHEN $4::boolean AND cancelled_at IS NOT NULL THEN clock_timestamp() ELSE completed_at END
 WHERE change_id = $1
RETURNING ${OLD_COLS}`;

interface OldChange { state: string; to_count: number | string; prepare_cursor: string | null }

const pg: Run = (ctx, changeId, b) => ctx.transaction!(async (sql) => {
  const c = (await sql<OldChange>(PG_LOCK_CHANGE, [changeId]))[0];
  if (!c || c.state !== 'preparing') return c;
  const from = c.prepare_cursor ?? NIL_UUID;
  const hi = (await sql<{ hi: string }>(PG_EDGE, [from, b.limit]))[0]?.hi ?? null;
  return (await sql(PG_PREPARE, [changeId, from, hi ?? LAST_ID, hi === null, Number(c.to_count), b.horizon]))[0];
});

const MY_NOW = 'UTC_TIMESTAMP(6)';
const MY_SINCE = 'CAST(? AS DATETIME(6))';
const MY_CHANGE = `SELECT ${OLD_COLS} FROM submission_manager_partition_changes WHERE change_id = ?`;
const MY_RULE = (alias: string) => `(CAST(CONV(LEFT(SHA2(COALESCE(${alias}.partition_key, ${alias}.intent_id), 256), 8), 16, 10) AS UNSIGNED) % ?)`;
const MY_EDGE = 'SELECT intent_id AS hi FROM submission_intents WHERE intent_id > ? ORDER BY intent_id LIMIT 1 OFFSET ?';
const MY_IN_RANGE = `i.intent_id > ? AND i.intent_id <= ? AND i.last_modified_at < ${MY_SINCE}`;
const MY_CALL_OUT = "EXISTS (SELECT 1 FROM submission_attempts AS a FORCE INDEX (PRIMARY) WHERE a.intent_id = i.intent_id AND a.outcome = 'started')";
const MY_LEAVE = `UPDATE submission_intents AS i SET i.last_modified_at = GREATEST(${MY_NOW}, i.last_modified_at + INTERVAL 1 MICROSECOND)
 WHERE ${MY_IN_RANGE} AND i.status IN ${SETTLED} AND ${MY_CALL_OUT}`;
const MY_MOVE = `UPDATE submission_intents AS i SET i.partition_no = ${MY_RULE('i')}
 WHERE ${MY_IN_RANGE} AND i.status IN ${SETTLED} AND NOT ${MY_CALL_OUT} AND i.partition_no <> ${MY_RULE('i')}`;
/** Its affected-row count, read in the same transaction as the UPDATE (the harness returns rows only). */
const MY_MOVED = 'SELECT ROW_COUNT() AS moved';
const MY_PREPARED = `UPDATE submission_manager_partition_changes
   SET rows_moved = rows_moved + ?,
       prepare_cursor = CASE WHEN ? OR (prepare_cursor IS NOT NULL AND prepare_cursor >= ?) THEN prepare_cursor ELSE ? END,
       state = CASE WHEN NOT ? THEN state WHEN cancelled_at IS NULL THEN 'pending' ELSE 'completed' END,
       prepared_at = CASE WHEN ? THEN ${MY_NOW} ELSE prepared_at END,
       completed_at = CASE WHEN ? AND cancelled_at IS NOT NULL THEN ${MY_NOW} ELSE completed_at END
 WHERE change_id = ?`;
/** Its dbTime: UTC text to the millisecond. */
const myTime = (d: Date) => d.toISOString().slice(0, 23).replace('T', ' ');

const mysql: Run = (ctx, changeId, b) => ctx.transaction!(async (sql: RawSql) => {
  const c = (await sql<OldChange>(`${MY_CHANGE} FOR UPDATE`, [changeId]))[0];
  if (!c || c.state !== 'preparing') return c;
  const from = c.prepare_cursor ?? '';
  const hi = (await sql<{ hi: string }>(MY_EDGE, [from, b.limit - 1]))[0]?.hi ?? null;
  const range = [from, hi ?? LAST_ID, myTime(b.horizon)];
  await sql(MY_LEAVE, range);
  await sql(MY_MOVE, [Number(c.to_count), ...range, Number(c.to_count)]);
  const moved = Number((await sql<{ moved: number | string }>(MY_MOVED))[0]!.moved);
  const done = hi === null;
  await sql(MY_PREPARED, [moved, done, hi, hi, done, done, done, changeId]);
  return (await sql(MY_CHANGE, [changeId]))[0];
});

const MS_RULE = (alias: string, count: string) =>
  `(CAST(CAST(HASHBYTES('SHA2_256', CAST(COALESCE(${alias}.partition_key, ${alias}.intent_id) COLLATE Latin1_General_100_BIN2_UTF8 AS varchar(512))) AS binary(4)) AS bigint) % ${count})`;
const MS_RANGE = `i.intent_id > @from AND i.intent_id <= ISNULL(@hi, '${LAST_ID}') AND i.last_modified_at < @horizon`;
const MS_PREPARE = `
SET XACT_ABORT ON;
SET NOCOUNT ON;
DECLARE @change_id char(36) = $1;
DECLARE @limit int = $2;
DECLARE @horizon datetime2(7) = $3;
DECLARE @to smallint;
DECLARE @from char(36);
DECLARE @hi char(36);
DECLARE @moved int = 0;
BEGIN TRANSACTION;
SELECT @to = to_count, @from = ISNULL(prepare_cursor, '') FROM submission_manager_partition_changes WITH (UPDLOCK, HOLDLOCK) WHERE change_id = @change_id AND state = 'preparing';
IF @to IS NOT NULL
BEGIN
  SELECT @hi = intent_id FROM submission_intents WHERE intent_id > @from ORDER BY intent_id OFFSET @limit - 1 ROWS FETCH NEXT 1 ROWS ONLY;
  UPDATE i SET last_modified_at = CASE WHEN SYSUTCDATETIME() > i.last_modified_at THEN SYSUTCDATETIME() ELSE DATEADD(nanosecond, 100, i.last_modified_at) END
    FROM submission_intents AS i WHERE ${MS_RANGE} AND ${LEFT_TO_SCAN};
  UPDATE i SET partition_no = ${MS_RULE('i', '@to')}
    FROM submission_intents AS i WHERE ${MS_RANGE} AND ${PREPARABLE} AND i.partition_no <> ${MS_RULE('i', '@to')};
  SET @moved = @@ROWCOUNT;
  UPDATE submission_manager_partition_changes
     SET rows_moved = rows_moved + @moved,
         prepare_cursor = CASE WHEN @hi IS NOT NULL AND (prepare_cursor IS NULL OR @hi > prepare_cursor) THEN @hi ELSE prepare_cursor END,
         state = CASE WHEN @hi IS NOT NULL THEN state WHEN cancelled_at IS NULL THEN 'pending' ELSE 'completed' END,
         prepared_at = CASE WHEN @hi IS NULL THEN SYSUTCDATETIME() ELSE prepared_at END,
         completed_at = CASE WHEN @hi IS NULL AND cancelled_at IS NOT NULL THEN SYSUTCDATETIME() ELSE completed_at END
   WHERE change_id = @change_id AND state = 'preparing';
END;
COMMIT TRANSACTION;
SELECT ${OLD_COLS} FROM submission_manager_partition_changes WHERE change_id = @change_id;`;

const mssql: Run = (ctx, changeId, b) => ctx.sql(MS_PREPARE, [changeId.toLowerCase(), b.limit, b.horizon]);

/** The previous release's preparing batch of `changeId` on `ctx`'s database; rejects with the database's error. */
export const oldPrepare: Record<DialectHarness['name'], Run> = { pglite: pg, postgres: pg, mysql, mssql };
