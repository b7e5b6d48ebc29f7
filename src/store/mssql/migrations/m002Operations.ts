// 002: operations — the cluster-wide execution control row (pause/resume), one per lease name (SQL Server twin
// of the PostgreSQL m002). Retention needs no schema change: it deletes terminal intents by ix_intents_modified.
export const m002Operations = `
IF OBJECT_ID(N'submission_manager_execution_control', N'U') IS NULL
  CREATE TABLE submission_manager_execution_control (
    lease_name   varchar(64)   COLLATE Latin1_General_100_BIN2 NOT NULL CONSTRAINT pk_submission_manager_execution_control PRIMARY KEY,
    paused       bit           NOT NULL,
    changed_at   datetime2(7)  NOT NULL,
    changed_by   varchar(128)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    reason       nvarchar(500) NULL
  );
GO
`;
