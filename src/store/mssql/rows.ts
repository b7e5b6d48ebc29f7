// Row ↔ domain mapping for the SQL Server dialect. tedious returns bigint as string, bit as boolean,
// datetime2 as a JS Date (UTC, truncated to the millisecond), so full-precision times travel as text.
import { attemptBudgetSql } from '../attemptBudget.js';

/** last_modified_at as full-precision database text (100 ns, UTC): the refresh cursor / row version. */
export const modifiedText = (col: string) => `CONVERT(char(27), ${col}, 121)`;

const INTENT_COL_NAMES = ['intent_id', 'idempotency_key', 'request_hash', 'contract', 'status', 'attempt_count', 'max_attempts',
  'next_attempt_at', 'created_at', 'last_modified_at', 'last_error', 'last_epoch', 'partition_no', 'partition_key'] as const;

/** Intent columns, optionally qualified (`inserted.` in an OUTPUT clause, `i.` in a join). */
export const intentCols = (prefix = '') => INTENT_COL_NAMES.map((c) => `${prefix}${c}`).join(', ');

export const scheduleCols = (prefix = '') =>
  `${prefix}intent_id, ${prefix}status, ${prefix}next_attempt_at, ${prefix}attempt_count, ${prefix}max_attempts, ` +
  `${modifiedText(`${prefix}last_modified_at`)} AS version`;

/** The attempt budget's SQL (the rule is defined once, in ../attemptBudget.ts). */
export const BUDGET = attemptBudgetSql('COUNT(*)');

export const LEASE_COLS = 'lease_name, holder_id, lease_epoch, acquired_at, renewed_at, expires_at';
export const leaseCols = (prefix = '') => LEASE_COLS.split(', ').map((c) => `${prefix}${c}`).join(', ');

export const ATTEMPT_COLS = 'intent_id, attempt_no, lease_epoch, holder_id, started_at, finished_at, outcome, http_status, error, duration_ms';

export {
  NIL_UUID, parseContract, toAttempt, toCompletedAttempt, toIntent, toLease, toScheduleRow, toStartedAttempt,
  type AttemptDbRow, type CompletedDbRow, type IntentDbRow, type LeaseDbRow, type ScheduleDbRow, type StartedDbRow,
} from '../rowMapping.js';
