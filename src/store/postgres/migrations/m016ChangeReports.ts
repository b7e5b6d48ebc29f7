// 016: what a partition change that does not progress reports, and its cancel (docs/operations.md, "A count change
// that does not progress"). Additive only (a previous release never names these columns; the constant default is
// metadata only): failed_steps (consecutive failed changer steps, reset by a step that does not fail), the last
// one's reason and time; cancelled_at/cancelled_by. A cancelled change is stored as state 'completed' with
// cancelled_at set, so the active-change index and a previous release both read it as ended.
export const m016ChangeReports = `
ALTER TABLE submission_manager_partition_changes ADD COLUMN IF NOT EXISTS failed_steps integer NOT NULL DEFAULT 0;
ALTER TABLE submission_manager_partition_changes ADD COLUMN IF NOT EXISTS last_step_error varchar(300) NULL;
ALTER TABLE submission_manager_partition_changes ADD COLUMN IF NOT EXISTS last_failed_at timestamptz NULL;
ALTER TABLE submission_manager_partition_changes ADD COLUMN IF NOT EXISTS cancelled_at timestamptz NULL;
ALTER TABLE submission_manager_partition_changes ADD COLUMN IF NOT EXISTS cancelled_by varchar(128) NULL;
`;
