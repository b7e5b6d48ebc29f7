// 012 (SQL Server twin of the PostgreSQL m012): the provider holds every process observes (breaker open_until,
// Retry-After paused_until), database time, nullable. Each column is its own batch (a batch is compiled whole).
export const m012ProviderHolds = `
IF COL_LENGTH(N'submission_manager_provider_state', N'open_until') IS NULL
  ALTER TABLE submission_manager_provider_state ADD open_until datetime2(7) NULL;
GO

IF COL_LENGTH(N'submission_manager_provider_state', N'paused_until') IS NULL
  ALTER TABLE submission_manager_provider_state ADD paused_until datetime2(7) NULL;
GO
`;
