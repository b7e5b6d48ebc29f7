// 008 (SQL Server twin of the PostgreSQL m008): each leader maintenance task's state as the leader last recorded it.
export const m008MaintenanceState = `
IF OBJECT_ID(N'submission_manager_maintenance_state', N'U') IS NULL
  CREATE TABLE submission_manager_maintenance_state (
    lease_name  varchar(64)    COLLATE Latin1_General_100_BIN2 NOT NULL,
    task        varchar(32)    COLLATE Latin1_General_100_BIN2 NOT NULL,
    failures    int            NOT NULL,
    last_error  nvarchar(1000) NULL,
    changed_at  datetime2(7)   NOT NULL,
    holder_id   varchar(128)   COLLATE Latin1_General_100_BIN2 NOT NULL,
    CONSTRAINT pk_submission_manager_maintenance_state PRIMARY KEY (lease_name, task)
  );
GO
`;
