// 003: operate — the newest-attempt / attempts-per-minute index the cluster overview and the dashboard read
// (SQL Server twin of the PostgreSQL m003).
export const m003Operate = `
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ix_attempts_started_at' AND object_id = OBJECT_ID(N'submission_attempts'))
  CREATE INDEX ix_attempts_started_at ON submission_attempts (started_at);
GO
`;
