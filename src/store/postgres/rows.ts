// Column lists and time text for the PostgreSQL dialect; the row mappers are shared (../rowMapping.ts).
import { attemptBudgetSql } from '../attemptBudget.js';

/** A timestamptz as full-precision database text (microseconds, UTC, fixed width): cursors and versions. */
export const utcText = (expr: string) => `to_char((${expr}) AT TIME ZONE 'UTC', 'YYYY-MM-DD HH24:MI:SS.US')`;

/** last_modified_at as database text: the refresh cursor / row version. */
export const MODIFIED_TEXT = utcText('last_modified_at');

export const INTENT_COLS = `intent_id, idempotency_key, request_hash, contract, status, attempt_count, max_attempts,
  next_attempt_at, created_at, last_modified_at, last_error, last_epoch, partition_no, partition_key`;

/**
 * `parts(p)`: the partition numbers that hold intents, found by a loose index scan of ix_intents_partition_modified
 * (partition_no leading, migration 010): one probe per partition, P + 1 in all, the last row NULL (readers filter
 * `parts.p IS NOT NULL`). For cluster-wide readers with no partition filter whose order needs a partition-first
 * index: they read each partition's range (LATERAL) and merge, instead of scanning every row of a status. Needs
 * `WITH RECURSIVE` at the head of the statement. (No dependence on the recorded count: rows of any partition count.)
 */
export const PARTITIONS_CTE = `parts(p) AS (
  SELECT min(partition_no) FROM submission_intents
  UNION ALL
  SELECT (SELECT min(i.partition_no) FROM submission_intents i WHERE i.partition_no > parts.p) FROM parts WHERE parts.p IS NOT NULL)`;

/** The attempt budget's SQL (the rule is defined once, in ../attemptBudget.ts). */
export const BUDGET = attemptBudgetSql('count(*)::int');

const scheduleCols = (status: string) => `intent_id, ${status} AS status, next_attempt_at, attempt_count, max_attempts, ${MODIFIED_TEXT} AS version`;
export const SCHEDULE_COLS = scheduleCols('status');
/** The same columns for a query that reads only `status = 'scheduled'` rows: status as a constant, so the rebuild's
 *  pages are index-only scans of ix_intents_partition_scheduled (migration 010 covers every other column; a status column
 *  read from the row would fetch the heap for each row — 1 M random heap reads in a 1 M-intent rebuild). */
export const SCHEDULED_ONLY_COLS = scheduleCols("'scheduled'::varchar");

export {
  NIL_UUID, parseContract, toAttempt, toCompletedAttempt, toIntent, toLease, toScheduleRow, toStartedAttempt,
  type AttemptDbRow, type CompletedDbRow, type IntentDbRow, type LeaseDbRow, type ScheduleDbRow, type StartedDbRow,
} from '../rowMapping.js';

/** A row's next last_modified_at: `now`, but strictly after `prev`, so a newer state always has a newer version for the
 *  leader's refresh, even within one clock tick (PGlite's clock has millisecond resolution). */
export const nextModified = (prev: string, now = 'clock_timestamp()') => `GREATEST(${now}, ${prev} + interval '1 microsecond')`;
