// Query builders for the SQL Server ExecutionStore (leader reads and fenced batched writes). Batches travel
// as one JSON parameter read with OPENJSON(@batch) WITH (…), so K starts (or completions) are one statement.
// The refresh cursor travels as CONVERT(char(27), last_modified_at, 121) text and is cast back server-side
// with CONVERT(datetime2(7), @cursor_modified_at, 121): no JS Date (milliseconds) ever touches it.
// Partitions (issue 25): every builder takes the store's executor partition (@partition_no, smallint like the
// column); each read and write is limited to that partition's intents and their attempts.
import type { AttemptCompletion, RefreshCursor, StartRequest } from '../intentPorts.js';
import type { LeaseToken } from '../ports.js';
import { clusterControlName, leaseBaseName } from '../../limits.js';
import { buildFencedBatch } from './fence.js';
import { BIN2, NIL_UUID, p, uuidText, type SqlQuery } from './params.js';
import { BUDGET, modifiedText, scheduleCols } from './rows.js';

/** DATEADD takes an int: add a bigint number of milliseconds as seconds + remainder. */
const addMs = (ms: string, base: string) =>
  `DATEADD(millisecond, CAST(${ms} % 1000 AS int), DATEADD(second, CAST(${ms} / 1000 AS int), ${base}))`;

/** Strictly newer than the previous value even if the clock has not advanced (newer state wins in the
 *  leader's schedule; mirrors PostgreSQL's GREATEST(now, previous + 1 µs)). */
export const NEXT_VERSION = (prev: string, now: string) =>
  `CASE WHEN ${now} > ${prev} THEN ${now} ELSE DATEADD(nanosecond, 100, ${prev}) END`;


export const executionQueries = {
  rebuildStart(commitGraceMs: number): SqlQuery {
    return {
      text: `DECLARE @now datetime2(7) = SYSUTCDATETIME();
SELECT @now AS db_now, ${modifiedText('DATEADD(millisecond, -@commit_grace_ms, @now)')} AS cursor_text;`,
      params: [p.int('commit_grace_ms', commitGraceMs)],
    };
  },

  loadScheduled(afterId: string | null, limit: number, partition = 0): SqlQuery {
    return {
      text: `SELECT TOP (@limit) ${scheduleCols()} FROM submission_intents
 WHERE partition_no = @partition_no AND status = 'scheduled' AND intent_id > @after_id ORDER BY intent_id;`,
      params: [p.uuid('after_id', afterId ?? NIL_UUID), p.int('limit', limit), p.smallint('partition_no', partition)],
    };
  },

  /**
   * Rows after (t, id) in (last_modified_at, intent_id) order. `last_modified_at >= @t AND (… > @t OR id > @id)`
   * is the spec's `(m > t) OR (m = t AND id > id0)` written so the (partition_no, last_modified_at, intent_id)
   * index seeks.
   * Result set 0: db_now (also when no row follows); result set 1: the page.
   */
  refreshPage(cursor: RefreshCursor, limit: number, commitGraceMs: number, partition = 0): SqlQuery {
    return {
      text: `SET NOCOUNT ON;
DECLARE @now datetime2(7) = SYSUTCDATETIME();
DECLARE @t datetime2(7) = CONVERT(datetime2(7), @cursor_modified_at, 121);
SELECT @now AS db_now;
SELECT TOP (@limit) ${scheduleCols()},
       CASE WHEN last_modified_at < DATEADD(millisecond, -@commit_grace_ms, @now) THEN CAST(1 AS bit) ELSE CAST(0 AS bit) END AS settled
  FROM submission_intents
 WHERE partition_no = @partition_no AND last_modified_at >= @t AND (last_modified_at > @t OR intent_id > @cursor_intent_id)
 ORDER BY last_modified_at, intent_id;`,
      params: [
        p.cursorText('cursor_modified_at', cursor.modifiedAt),
        p.uuid('cursor_intent_id', cursor.intentId),
        p.int('limit', limit),
        p.int('commit_grace_ms', commitGraceMs),
        p.smallint('partition_no', partition),
      ],
    };
  },

  /** in_flight intents whose current attempt was started by an older epoch: attempt → abandoned,
   *  intent → scheduled now (failed when attempts are exhausted). Result: recovered (intents updated). */
  recoverOrphans(token: LeaseToken, partition = 0): SqlQuery {
    return buildFencedBatch(token, 'recover_orphans', {
      declare: `DECLARE @now datetime2(7);
DECLARE @settled int;
DECLARE @recovered int;
DECLARE @orphan TABLE (intent_id char(36) COLLATE ${BIN2} NOT NULL, attempt_no int NOT NULL, lease_epoch bigint NOT NULL);`,
      body: `SET @now = SYSUTCDATETIME();
INSERT INTO @orphan (intent_id, attempt_no, lease_epoch)
SELECT a.intent_id, a.attempt_no, a.lease_epoch
  FROM submission_intents AS i
  JOIN submission_attempts AS a ON a.intent_id = i.intent_id AND a.attempt_no = i.attempt_count
 WHERE i.partition_no = @partition_no AND i.status = 'in_flight' AND a.outcome = 'started' AND a.lease_epoch < @fence_lease_epoch;
-- Older-epoch attempts left 'started' on intents that moved on (cancelled mid-call, then the leader died).
UPDATE a
   SET outcome = 'abandoned', finished_at = @now,
       error = CONCAT(N'abandoned: leader epoch ', a.lease_epoch, N' lost its lease before completing the attempt; it may have been sent')
  FROM submission_attempts AS a
  JOIN submission_intents AS i ON i.intent_id = a.intent_id
 WHERE i.partition_no = @partition_no AND a.outcome = 'started' AND a.lease_epoch < @fence_lease_epoch AND i.status <> 'in_flight';
SET @settled = @@ROWCOUNT;
UPDATE a
   SET outcome = 'abandoned', finished_at = @now,
       error = CONCAT(N'abandoned: leader epoch ', o.lease_epoch, N' lost its lease before completing the attempt; it may have been sent')
  FROM submission_attempts AS a
  JOIN @orphan AS o ON a.intent_id = o.intent_id AND a.attempt_no = o.attempt_no
 WHERE a.outcome = 'started';
UPDATE i
   SET status = CASE WHEN ${BUDGET.exhausted('i')} THEN 'failed' ELSE 'scheduled' END,
       next_attempt_at = @now, last_modified_at = ${NEXT_VERSION('i.last_modified_at', '@now')}, last_epoch = @fence_lease_epoch,
       last_error = CONCAT(N'attempt ', i.attempt_count, N' abandoned after a leader change; it may have been sent',
                           CASE WHEN ${BUDGET.exhausted('i')} THEN N'; attempts exhausted' ELSE N'' END)
  FROM submission_intents AS i
  JOIN @orphan AS o ON i.intent_id = o.intent_id
 WHERE i.status = 'in_flight';
SET @recovered = @@ROWCOUNT;
-- Both kinds are writes of this epoch: the settled ones alone still leave an audit row.
SET @rows_written = @recovered + @settled;`,
      results: 'SELECT @recovered AS recovered;',
      params: [p.smallint('partition_no', partition)],
    });
  },

  /** Optimistic predicate per intent (still scheduled, same attempt_count, due in database time, within the attempt
   *  budget). The hold: the leader's own rules (ExecutionOps: a pending handover request for the lease drains it; the
   *  partition's or the cluster's pause holds it), read as the batch runs, after the fence: a START that waited for a
   *  connection or a lock starts nothing once a pause or a drain committed before it. First result set: the started
   *  attempts; second: the hold (NULL: none). */
  startAttempts(token: LeaseToken, requests: StartRequest[], partition = 0): SqlQuery {
    const batch = requests.map((r) => ({ intentId: uuidText('batch.intentId', r.intentId), expected: r.expectedAttemptCount }));
    const cluster = clusterControlName(leaseBaseName(token.leaseName, partition));
    return buildFencedBatch(token, 'start_attempts', {
      declare: `DECLARE @now datetime2(7);
DECLARE @held varchar(16);
DECLARE @started TABLE (intent_id char(36) COLLATE ${BIN2} NOT NULL, attempt_count int NOT NULL, max_attempts int NOT NULL,
  contract nvarchar(max) NOT NULL, version char(27) NOT NULL);`,
      body: `SET @now = SYSUTCDATETIME();
SET @held = CASE
  WHEN EXISTS (SELECT 1 FROM submission_manager_handover_requests AS h WHERE h.lease_name = @fence_lease_name AND h.status = 'pending')
  THEN 'draining'
  WHEN EXISTS (SELECT 1 FROM submission_manager_execution_control AS c WHERE c.lease_name IN (@fence_lease_name, @cluster_control) AND c.paused = 1)
  THEN 'paused' END;
IF @held IS NULL
BEGIN
UPDATE i
   SET status = 'in_flight', attempt_count = i.attempt_count + 1, last_modified_at = ${NEXT_VERSION('i.last_modified_at', '@now')}, last_epoch = @fence_lease_epoch
OUTPUT inserted.intent_id, inserted.attempt_count, inserted.max_attempts, inserted.contract,
       ${modifiedText('inserted.last_modified_at')} INTO @started
  FROM submission_intents AS i
  JOIN OPENJSON(@batch) WITH (intent_id char(36) '$.intentId', expected int '$.expected') AS r
    ON i.intent_id = r.intent_id COLLATE ${BIN2}
 WHERE i.attempt_count = r.expected AND i.status = 'scheduled'
   AND i.next_attempt_at <= @now AND i.partition_no = @partition_no
   AND ${BUDGET.mayStart('i')};
INSERT INTO submission_attempts (intent_id, attempt_no, lease_epoch, holder_id, started_at, outcome)
SELECT intent_id, attempt_count, @fence_lease_epoch, @fence_holder_id, @now, 'started' FROM @started;
SET @rows_written = @@ROWCOUNT;
END;`,
      // (OUTPUT cannot hold subqueries, so the aborted count is read here.)
      results: `SELECT s.intent_id, s.attempt_count, s.max_attempts, s.contract, s.version,
       ${BUDGET.abortedBefore('s.attempt_count', 's.intent_id')} AS aborted_before
  FROM @started AS s;
SELECT @held AS held;`,
      params: [p.nvarcharMax('batch', JSON.stringify(batch)), p.smallint('partition_no', partition),
        p.varchar('cluster_control', 64, cluster)],
    });
  },

  /** The attempt row is closed (outcome set once, by its own holder, under its own or a later epoch of that
   *  holder: a completion carried across a step-down); the intent moves on only if it did not change
   *  meanwhile and this batch closed its attempt (an aborted record of a START whose reply was lost may name an
   *  attempt another epoch started). Only attempts of this partition's intents are closed. Result: one row per
   *  completion, in request order. */
  completeAttempts(token: LeaseToken, completions: AttemptCompletion[], partition = 0): SqlQuery {
    const batch = completions.map((c, ord) => ({
      ord,
      intentId: uuidText('batch.intentId', c.intentId),
      attemptNo: c.attemptNo,
      outcome: c.outcome,
      httpStatus: c.httpStatus,
      error: c.error,
      durationMs: Math.round(c.durationMs),
      nextStatus: c.next.status,
      delayMs: c.next.status === 'scheduled' ? Math.round(c.next.retryDelayMs) : null,
      attemptEpoch: c.attemptEpoch ?? token.leaseEpoch,
    }));
    return buildFencedBatch(token, 'complete_attempts', {
      declare: `DECLARE @now datetime2(7);
DECLARE @closed TABLE (intent_id char(36) COLLATE ${BIN2} NOT NULL, attempt_no int NOT NULL);
DECLARE @c TABLE (ord int NOT NULL, intent_id char(36) COLLATE ${BIN2} NOT NULL, attempt_no int NOT NULL,
  outcome varchar(16) NOT NULL, http_status int NULL, error nvarchar(max) NULL, duration_ms int NULL,
  next_status varchar(16) NOT NULL, delay_ms bigint NULL, attempt_epoch bigint NOT NULL);
DECLARE @upd TABLE (intent_id char(36) COLLATE ${BIN2} NOT NULL, status varchar(16) NOT NULL, next_attempt_at datetime2(7) NOT NULL,
  attempt_count int NOT NULL, max_attempts int NOT NULL, version char(27) NOT NULL);`,
      body: `SET @now = SYSUTCDATETIME();
INSERT INTO @c (ord, intent_id, attempt_no, outcome, http_status, error, duration_ms, next_status, delay_ms, attempt_epoch)
SELECT ord, intent_id, attempt_no, outcome, http_status, error, duration_ms, next_status, delay_ms, attempt_epoch
  FROM OPENJSON(@batch) WITH (ord int '$.ord', intent_id char(36) '$.intentId', attempt_no int '$.attemptNo',
       outcome varchar(16) '$.outcome', http_status int '$.httpStatus', error nvarchar(max) '$.error',
       duration_ms int '$.durationMs', next_status varchar(16) '$.nextStatus', delay_ms bigint '$.delayMs',
       attempt_epoch bigint '$.attemptEpoch');
UPDATE a
   SET outcome = c.outcome, finished_at = @now, http_status = c.http_status, error = c.error, duration_ms = c.duration_ms
OUTPUT inserted.intent_id, inserted.attempt_no INTO @closed
  FROM submission_attempts AS a
  JOIN @c AS c ON a.intent_id = c.intent_id AND a.attempt_no = c.attempt_no
  JOIN submission_intents AS pi ON pi.intent_id = a.intent_id AND pi.partition_no = @partition_no
 WHERE a.outcome = 'started' AND a.lease_epoch = c.attempt_epoch AND c.attempt_epoch <= @fence_lease_epoch
   AND a.holder_id = @fence_holder_id;
SET @rows_written = @@ROWCOUNT;
UPDATE i
   SET status = c.next_status,
       next_attempt_at = CASE WHEN c.next_status = 'scheduled' THEN ${addMs('c.delay_ms', '@now')} ELSE i.next_attempt_at END,
       last_error = CASE WHEN c.outcome = 'succeeded' THEN NULL ELSE c.error END,
       last_modified_at = ${NEXT_VERSION('i.last_modified_at', '@now')}, last_epoch = @fence_lease_epoch
OUTPUT inserted.intent_id, inserted.status, inserted.next_attempt_at, inserted.attempt_count, inserted.max_attempts,
       ${modifiedText('inserted.last_modified_at')} INTO @upd
  FROM submission_intents AS i
  JOIN @c AS c ON i.intent_id = c.intent_id
  JOIN @closed AS k ON k.intent_id = c.intent_id AND k.attempt_no = c.attempt_no
 WHERE i.status = 'in_flight' AND i.attempt_count = c.attempt_no;
SET @rows_written = @rows_written + @@ROWCOUNT;`,
      results: `SELECT c.intent_id AS req_id, u.intent_id, u.status, u.next_attempt_at, u.attempt_count, u.max_attempts, u.version
  FROM @c AS c LEFT JOIN @upd AS u ON u.intent_id = c.intent_id
 ORDER BY c.ord;`,
      params: [p.nvarcharMax('batch', JSON.stringify(batch)), p.smallint('partition_no', partition)],
    });
  },
};
