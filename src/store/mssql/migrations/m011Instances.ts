// 011 (SQL Server twin of the PostgreSQL m011): instance heartbeats (issue 25), one row per live process, its times
// database time (SYSUTCDATETIME()). Identifiers compare byte-wise (BIN2) like the lease's holder_id. Each object is
// its own batch (a batch is compiled whole).
export const m011Instances = `
IF OBJECT_ID(N'submission_manager_instances', N'U') IS NULL
  CREATE TABLE submission_manager_instances (
    holder_id       varchar(128) COLLATE Latin1_General_100_BIN2 NOT NULL
                    CONSTRAINT pk_submission_manager_instances PRIMARY KEY,
    version         varchar(64)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    roles           varchar(64)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    started_at      datetime2(7) NOT NULL,
    last_seen_at    datetime2(7) NOT NULL,
    partitions_led  varchar(400) COLLATE Latin1_General_100_BIN2 NOT NULL
                    CONSTRAINT df_instances_partitions_led DEFAULT ('')
  );
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ix_instances_last_seen' AND object_id = OBJECT_ID(N'submission_manager_instances'))
  CREATE INDEX ix_instances_last_seen ON submission_manager_instances (last_seen_at);
GO
`;
