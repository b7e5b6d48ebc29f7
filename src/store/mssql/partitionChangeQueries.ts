// SQL Server query builders for partition changes (issue 26; the port: ../partitionPorts.ts). Requests are serialized
// by UPDLOCK+HOLDLOCK on the count row; every changer write but the preparing pass (settled intents only, no lease) is
// one batch fenced by every lease token (fence.ts buildFencedBatchAll: each lease row read WITH (HOLDLOCK, ROWLOCK),
// shared locks held to commit), its results selected after COMMIT. Ids (change_id, the cursors, intent_id) are
// char(36) lower-case text in the binary collation, so every id comparison and ORDER BY here is done by SQL Server in
// byte order — the order of PostgreSQL's uuid and of JavaScript strings (m001, m013); the changer only hands back the
// last id it was given and never compares ids itself.
import type { PartitionMove, ReassignProgress } from '../partitionPorts.js';
import type { LeaseToken } from '../ports.js';
import { PARTITION_CHANGE_COLS, requestingRelease } from '../partitionMapping.js';
import { buildFencedBatchAll } from './fence.js';
import { NEXT_VERSION } from './executionQueries.js';
import { BIN2, p, type SqlQuery } from './params.js';
import { BUDGET } from './rows.js';
import { CHANGE_RESULT, CHANGES, changeParam, FORWARD, MOVE_JOIN, MOVES_IN_RANGE, movesParam } from './partitionReassignQueries.js';

const COLS = PARTITION_CHANGE_COLS;

/** M = max(from_count, to_count): the steps after the claim need every partition lease 0..M−1. */
const WIDEST = 'CASE WHEN from_count > to_count THEN from_count ELSE to_count END';
/** A fence short of M tokens is the caller's bug: fail the batch (XACT_ABORT rolls it back), as every dialect does. */
const WHOLE_FENCE = `IF @m IS NOT NULL AND @fence_n < @m
  THROW 51001, 'submission_manager_partition_changes: the fence must hold every partition lease 0..max(from, to)-1', 1;`;
export const partitionChangeQueries = {
  /** One statement: the count row (absent: all NULL) and the active change (absent: all NULL), with database time.
   *  Under READ_COMMITTED_SNAPSHOT both come from one statement snapshot. */
  readLayout(): SqlQuery {
    return {
      text: `SELECT SYSUTCDATETIME() AS db_now, c.partition_count, c.recorded_at, c.recorded_by, c.layout_generation, a.*
  FROM (VALUES (1)) AS one (id)
  LEFT JOIN submission_manager_partition_count AS c ON c.id = one.id
  OUTER APPLY (SELECT TOP (1) ${COLS} FROM ${CHANGES}
                WHERE state <> 'completed' ORDER BY requested_at DESC, change_id DESC) AS a;`,
      params: [],
    };
  },

  /**
   * One transaction: the count row under UPDLOCK+HOLDLOCK (a missing row: its key range), held to commit, so requests
   * run one at a time and at most one change is active (ux_partition_changes_active enforces it too); then the
   * decision (as decideChangeRequest in ../partitionMapping.ts). Result set 0: outcome with the count as read (no row:
   * 1, recorded by `none`); 1: the change (if any). A retry after a lost reply finds its own change by its id (`existing`).
   */
  requestChange(toCount: number, requestedBy: string, changeId: string): SqlQuery {
    return {
      text: `
SET XACT_ABORT ON;
SET NOCOUNT ON;
DECLARE @now datetime2(7);
DECLARE @count smallint;
DECLARE @recorded_at datetime2(7);
DECLARE @recorded_by varchar(128);
DECLARE @same char(36);
DECLARE @active char(36);
DECLARE @active_to smallint;
DECLARE @outcome varchar(16);
BEGIN TRANSACTION;
SELECT @count = partition_count, @recorded_at = recorded_at, @recorded_by = recorded_by
  FROM submission_manager_partition_count WITH (UPDLOCK, HOLDLOCK) WHERE id = 1;
SET @now = SYSUTCDATETIME();
SELECT @same = change_id FROM ${CHANGES} WHERE change_id = @change_id;
SELECT TOP (1) @active = change_id, @active_to = to_count FROM ${CHANGES}
 WHERE state <> 'completed' ORDER BY requested_at DESC, change_id DESC;
IF @same IS NOT NULL
BEGIN
  SET @active = @same;
  SET @outcome = 'existing';
END
ELSE IF @active IS NOT NULL
BEGIN
  SET @outcome = CASE WHEN @active_to = @to_count THEN 'existing' ELSE 'conflict' END;
END
ELSE IF ISNULL(@count, 1) = @to_count
BEGIN
  SET @outcome = 'unchanged';
END
ELSE
BEGIN
  INSERT INTO ${CHANGES} (change_id, from_count, to_count, state, requested_at, requested_by, rows_moved, requested_release, release_rows_moved)
  VALUES (@change_id, ISNULL(@count, 1), @to_count, 'preparing', @now, @requested_by, 0, @requested_release, 0);
  SET @active = @change_id;
  SET @outcome = 'created';
END;
COMMIT TRANSACTION;
SELECT @outcome AS outcome, ISNULL(@count, 1) AS partition_count, ISNULL(@recorded_at, @now) AS recorded_at,
       ISNULL(@recorded_by, 'none') AS recorded_by;
SELECT ${COLS} FROM ${CHANGES} WHERE change_id = @active;`,
      params: [p.smallint('to_count', toCount), p.varchar('requested_by', 128, requestedBy.slice(0, 128)), changeParam(changeId),
        p.varchar('requested_release', 64, requestingRelease())],
    };
  },

  listChanges(limit: number): SqlQuery {
    return {
      text: `SELECT TOP (@limit) ${COLS} FROM ${CHANGES} ORDER BY requested_at DESC, change_id DESC;`,
      params: [p.int('limit', limit)],
    };
  },

  getChange(changeId: string): SqlQuery {
    return { text: CHANGE_RESULT, params: [changeParam(changeId)] };
  },

  /** Fenced: changer := the fence's holder, claimed_at := now, unless completed (a retry only moves claimed_at). */
  claimChange(fence: LeaseToken[], changeId: string): SqlQuery {
    return buildFencedBatchAll(fence, 'partition_claim', {
      declare: '',
      body: `UPDATE ${CHANGES} SET changer = @changer, release_changer = @changer, claimed_at = SYSUTCDATETIME()
 WHERE change_id = @change_id AND state <> 'completed';
SET @rows_written = @@ROWCOUNT;`,
      results: CHANGE_RESULT,
      params: [changeParam(changeId), p.varchar('changer', 128, changerOf(fence))],
    });
  },

  /**
   * Fenced: pending → reassigning, once (the state is re-read under UPDLOCK+HOLDLOCK: a retry finds reassigning, and a
   * change still preparing stays so; either writes nothing). The changer holds every partition's lease, so no attempt
   * is in progress: every attempt still `started` is abandoned (finished now; it may have been sent), every in_flight
   * intent is scheduled due now (failed once its attempts are spent: the budget rule of recovery, ../attemptBudget.ts);
   * every intent whose attempt is abandoned gets its last_modified_at bumped as every intent write does (any other
   * status first, before its attempt is abandoned: a call cancelled in flight, which the preparing pass left, so the
   * scan of rows modified since the horizon moves it); the count row becomes to_count (inserted if missing, as the
   * lease acquire does), first: no insert commits with the old count after the switch (intentStore.ts).
   */
  switchCount(fence: LeaseToken[], changeId: string): SqlQuery {
    return buildFencedBatchAll(fence, 'partition_switch', {
      declare: `DECLARE @now datetime2(7);
DECLARE @to smallint;
DECLARE @m smallint;
DECLARE @bumped int;
DECLARE @settled int;
DECLARE @recovered int;
DECLARE @switched int;`,
      body: `SET @now = SYSUTCDATETIME();
SELECT @to = to_count, @m = ${WIDEST} FROM ${CHANGES} WITH (UPDLOCK, HOLDLOCK) WHERE change_id = @change_id AND state = 'pending';
${WHOLE_FENCE}
IF @to IS NOT NULL
BEGIN
  -- The count row first: its update waits for inserts in flight (they hold a shared lock on it to their commit) before
  -- this batch locks any intent, and inserts begun meanwhile wait for this commit and read the new count. The layout
  -- generation is raised with it (a row inserted here: 1, one above the default).
  UPDATE submission_manager_partition_count WITH (UPDLOCK, SERIALIZABLE)
     SET partition_count = @to, recorded_at = @now, recorded_by = @changer, layout_generation = layout_generation + 1
   WHERE id = 1;
  IF @@ROWCOUNT = 0
    INSERT INTO submission_manager_partition_count (id, partition_count, recorded_at, recorded_by, layout_generation)
    SELECT 1, @to, @now, @changer, 1
     WHERE NOT EXISTS (SELECT 1 FROM submission_manager_partition_count WITH (UPDLOCK, SERIALIZABLE) WHERE id = 1);
  UPDATE i
     SET last_modified_at = ${NEXT_VERSION('i.last_modified_at', '@now')}
    FROM submission_intents AS i
   WHERE i.status <> 'in_flight'
     AND EXISTS (SELECT 1 FROM submission_attempts AS a WHERE a.intent_id = i.intent_id AND a.outcome = 'started');
  SET @bumped = @@ROWCOUNT;
  UPDATE submission_attempts
     SET outcome = 'abandoned', finished_at = @now,
         error = CONCAT(N'abandoned: leader epoch ', lease_epoch, N' did not complete the attempt before the partition count changed; it may have been sent')
   WHERE outcome = 'started';
  SET @settled = @@ROWCOUNT;
  UPDATE i
     SET status = CASE WHEN ${BUDGET.exhausted('i')} THEN 'failed' ELSE 'scheduled' END,
         next_attempt_at = @now, last_modified_at = ${NEXT_VERSION('i.last_modified_at', '@now')},
         last_error = CONCAT(N'attempt ', i.attempt_count, N' abandoned by a partition count change; it may have been sent',
                             CASE WHEN ${BUDGET.exhausted('i')} THEN N'; attempts exhausted' ELSE N'' END)
    FROM submission_intents AS i
   WHERE i.status = 'in_flight';
  SET @recovered = @@ROWCOUNT;
  UPDATE ${CHANGES} SET state = 'reassigning', switched_at = @now, switched_by = @changer WHERE change_id = @change_id AND state = 'pending';
  SET @switched = @@ROWCOUNT;
  SET @rows_written = @bumped + @settled + @recovered + @switched;
END;`,
      results: CHANGE_RESULT,
      params: [changeParam(changeId), p.varchar('changer', 128, changerOf(fence))],
    });
  },

  /**
   * Fenced, only while reassigning: each intent's partition_no := its move (last_modified_at untouched: the port),
   * rows_moved += the rows whose partition this call changed (a retry after a lost reply changes none and adds 0;
   * its release_ copy with it: m020's guard),
   * scan_cursor and catch_up_cursor only forward (compared in BIN2 byte order with the column: a repeated older batch
   * cannot move one back; NULL leaves it), scan_done_at set once.
   */
  moveIntents(fence: LeaseToken[], changeId: string, moves: PartitionMove[], progress: ReassignProgress): SqlQuery {
    return buildFencedBatchAll(fence, 'partition_move', {
      declare: `DECLARE @to smallint;
DECLARE @m smallint;
DECLARE @moved int = 0;
DECLARE @progressed int = 0;`,
      body: `SELECT @to = to_count, @m = ${WIDEST} FROM ${CHANGES} WITH (UPDLOCK, HOLDLOCK) WHERE change_id = @change_id AND state = 'reassigning';
${WHOLE_FENCE}
${MOVES_IN_RANGE}
IF @to IS NOT NULL
BEGIN
  UPDATE i SET partition_no = m.partition_no
    ${MOVE_JOIN};
  SET @moved = @@ROWCOUNT;
  UPDATE ${CHANGES}
     SET rows_moved = rows_moved + @moved,
         release_rows_moved = release_rows_moved + @moved,
         scan_cursor = ${FORWARD('scan_cursor', '@scan_cursor')},
         scan_done_at = CASE WHEN @scan_done = 1 AND scan_done_at IS NULL THEN SYSUTCDATETIME() ELSE scan_done_at END,
         catch_up_cursor = ${FORWARD('catch_up_cursor', '@catch_up_cursor')}
   WHERE change_id = @change_id AND state = 'reassigning';
  SET @progressed = @@ROWCOUNT;
  SET @rows_written = @moved + @progressed;
END;`,
      results: CHANGE_RESULT,
      params: [
        changeParam(changeId),
        movesParam(moves),
        p.uuid('scan_cursor', progress.scanCursor),
        p.int('scan_done', progress.scanDone ? 1 : 0),
        p.uuid('catch_up_cursor', progress.catchUpCursor ?? null),
      ],
    });
  },

  /**
   * Fenced: reassigning → completed, and in the same transaction every fenced lease released as MssqlLeaseStore.release
   * does: expired in place (never deleted) iff still held by that holder and epoch and unexpired at @now, read after the
   * fence's locks, with a `released` event each; pending handover requests of those leases completed (the change met
   * them). Nothing else (pending, or already completed) is written.
   */
  completeChange(fence: LeaseToken[], changeId: string): SqlQuery {
    return buildFencedBatchAll(fence, 'partition_complete', {
      declare: `DECLARE @now datetime2(7);
DECLARE @m smallint;
DECLARE @completed int;
DECLARE @rel TABLE (lease_name varchar(64) COLLATE ${BIN2} NOT NULL, lease_epoch bigint NOT NULL,
  holder_id varchar(128) COLLATE ${BIN2} NOT NULL);`,
      body: `SELECT @m = ${WIDEST} FROM ${CHANGES} WITH (UPDLOCK, HOLDLOCK) WHERE change_id = @change_id AND state = 'reassigning';
${WHOLE_FENCE}
SET @now = SYSUTCDATETIME();
UPDATE ${CHANGES} SET state = 'completed', completed_at = @now WHERE change_id = @change_id AND state = 'reassigning';
SET @completed = @@ROWCOUNT;
IF @completed > 0
BEGIN
  -- A drain asked while the change ran is met by it (every lease is released below): its pending rows completed.
  UPDATE h SET status = 'completed', completed_at = @now, completed_epoch = f.lease_epoch, completed_by = f.holder_id
    FROM submission_manager_handover_requests AS h JOIN @fence AS f ON h.lease_name = f.lease_name
   WHERE h.status = 'pending';
  UPDATE l
     SET expires_at = @now, renewed_at = @now
  OUTPUT inserted.lease_name, inserted.lease_epoch, inserted.holder_id INTO @rel
    FROM submission_manager_leases AS l
    JOIN @fence AS f ON l.lease_name = f.lease_name AND l.holder_id = f.holder_id AND l.lease_epoch = f.lease_epoch
   WHERE l.expires_at > @now;
  INSERT INTO submission_manager_lease_events (lease_name, lease_epoch, holder_id, [event], [at])
  SELECT lease_name, lease_epoch, holder_id, 'released', @now FROM @rel;
  SET @rows_written = @completed + @@ROWCOUNT;
END;`,
      results: CHANGE_RESULT,
      params: [changeParam(changeId)],
    });
  },
};

/** The changer's holder id: the first token's (every token is the changer's). */
const changerOf = (fence: LeaseToken[]): string => fence[0]?.holderId ?? '';
