// 005: handover requests (SQL Server twin of the PostgreSQL m005). One pending per lease name is kept by the
// insert (UPDLOCK+SERIALIZABLE on ix_handover_lease_status), not a filtered index (it would tie every writer's
// session to the filtered-index SET options).
export const m005Handover = `
IF OBJECT_ID(N'submission_manager_handover_requests', N'U') IS NULL
  CREATE TABLE submission_manager_handover_requests (
    request_id       char(36)      COLLATE Latin1_General_100_BIN2 NOT NULL CONSTRAINT pk_submission_manager_handover_requests PRIMARY KEY,
    lease_name       varchar(64)   COLLATE Latin1_General_100_BIN2 NOT NULL,
    status           varchar(16)   COLLATE Latin1_General_100_BIN2 NOT NULL
                     CONSTRAINT ck_handover_status CHECK (status IN ('pending', 'completed')),
    requested_at     datetime2(7)  NOT NULL,
    requested_by     varchar(128)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    reason           nvarchar(500) NULL,
    requested_epoch  bigint        NULL,
    completed_at     datetime2(7)  NULL,
    completed_epoch  bigint        NULL,
    completed_by     varchar(128)  COLLATE Latin1_General_100_BIN2 NULL
  );
GO
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ix_handover_lease_status' AND object_id = OBJECT_ID(N'submission_manager_handover_requests'))
  CREATE INDEX ix_handover_lease_status ON submission_manager_handover_requests (lease_name, status, requested_at);
GO
`;
