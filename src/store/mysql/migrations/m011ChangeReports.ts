// 011 (PostgreSQL's m016): what a partition change that does not progress reports (failed_steps, the last failed
// step's reason and time) and its cancel (cancelled_at/cancelled_by; stored as state 'completed' with cancelled_at
// set, so the generated `active` column and a previous release read it as ended). Additive, each column added only
// when information_schema lacks it (addColumn.ts), so the migration stays idempotent.
import { addColumnUnlessPresent } from './addColumn.js';

const T = 'submission_manager_partition_changes';
export const m011ChangeReports = [
  addColumnUnlessPresent(T, 'failed_steps', 'INT NOT NULL DEFAULT 0'),
  addColumnUnlessPresent(T, 'last_step_error', 'VARCHAR(300) NULL'),
  addColumnUnlessPresent(T, 'last_failed_at', 'DATETIME(6) NULL'),
  addColumnUnlessPresent(T, 'cancelled_at', 'DATETIME(6) NULL'),
  addColumnUnlessPresent(T, 'cancelled_by', 'VARCHAR(128) NULL'),
].join('');
