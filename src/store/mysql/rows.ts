// Column lists and time text for the MySQL / MariaDB dialect; the row mappers are shared (../rowMapping.ts).
import { attemptBudgetSql } from '../attemptBudget.js';

/** A DATETIME(6) as full-precision database text (microseconds, UTC, fixed width 26): cursors and versions. */
export const utcText = (expr: string) => `DATE_FORMAT(${expr}, '%Y-%m-%d %H:%i:%s.%f')`;

/** Database now, microseconds. UTC_TIMESTAMP(6) is fixed for the duration of one statement (one instant). */
export const NOW = 'UTC_TIMESTAMP(6)';

/**
 * `parts(p)`: 0 … the highest partition_no in use (MAX of ix_intents_partition_modified's first column: one index
 * probe), for cluster-wide readers that read each partition's range of a partition-first index and merge. A
 * recursive CTE (`WITH RECURSIVE` at the head of the statement); a partition without intents costs one empty probe.
 * (Not a loose index scan by `MIN(partition_no) > p`: MariaDB 10.11 runs that correlated probe as a full index scan.)
 */
export const PARTITIONS_CTE = `parts(p) AS (
  SELECT 0 UNION ALL SELECT p + 1 FROM parts WHERE p < (SELECT MAX(partition_no) FROM submission_intents))`;

/** `base` plus `ms` milliseconds (an SQL expression). Never `NOW() + n`, which is numeric addition. */
export const plusMs = (base: string, ms: string) => `DATE_ADD(${base}, INTERVAL (${ms}) * 1000 MICROSECOND)`;
export const minusMs = (base: string, ms: string) => `DATE_SUB(${base}, INTERVAL (${ms}) * 1000 MICROSECOND)`;

/** last_modified_at's next value: database now, but strictly after the row's previous value (newer state
 *  wins in the leader's schedule). Only its own column is read, so the order of a SET list never matters. */
export const NEXT_MODIFIED = (col = 'last_modified_at') => `GREATEST(${NOW}, ${col} + INTERVAL 1 MICROSECOND)`;

export const INTENT_COLS = `intent_id, idempotency_key, request_hash, contract, status, attempt_count, max_attempts,
  next_attempt_at, created_at, last_modified_at, last_error, last_epoch, partition_no, partition_key`;

export const intentCols = (a: string) => INTENT_COLS.split(',').map((c) => `${a}.${c.trim()}`).join(', ');

export const ATTEMPT_COLS = 'intent_id, attempt_no, lease_epoch, holder_id, started_at, finished_at, outcome, http_status, error, duration_ms';

/** The attempt budget's SQL (the rule is defined once, in ../attemptBudget.ts). */
export const BUDGET = attemptBudgetSql('COUNT(*)');

export const scheduleCols = (a = '') => `${a}intent_id, ${a}status, ${a}next_attempt_at, ${a}attempt_count, ${a}max_attempts,
  ${utcText(`${a}last_modified_at`)} AS version`;

/** Intent ids are stored as lower-case uuid text under a binary collation (sort order = the code's string order). */
export const idParam = (id: string) => id.toLowerCase();

export {
  NIL_UUID, parseContract, toAttempt, toCompletedAttempt, toIntent, toLease, toScheduleRow, toStartedAttempt,
  type AttemptDbRow, type CompletedDbRow, type IntentDbRow, type LeaseDbRow, type ScheduleDbRow, type StartedDbRow,
} from '../rowMapping.js';
