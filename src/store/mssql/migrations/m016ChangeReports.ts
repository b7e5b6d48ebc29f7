// 016 (SQL Server twin of the PostgreSQL m016): what a partition change that does not progress reports (failed_steps,
// the last failed step's reason and time) and its cancel (cancelled_at/cancelled_by; stored as state 'completed'
// with cancelled_at set, so the filtered active-change index and a previous release read it as ended). Additive:
// failed_steps NOT NULL with a default (existing rows get 0), the others NULL. Each column guarded, its own batch.
const add = (column: string, definition: string) => `
IF COL_LENGTH(N'submission_manager_partition_changes', N'${column}') IS NULL
  ALTER TABLE submission_manager_partition_changes ADD ${column} ${definition};
GO
`;

export const m016ChangeReports = [
  add('failed_steps', 'int NOT NULL CONSTRAINT df_partition_changes_failed_steps DEFAULT (0)'),
  add('last_step_error', 'nvarchar(300) NULL'),
  add('last_failed_at', 'datetime2(7) NULL'),
  add('cancelled_at', 'datetime2(7) NULL'),
  add('cancelled_by', 'varchar(128) COLLATE Latin1_General_100_BIN2 NULL'),
].join('');
