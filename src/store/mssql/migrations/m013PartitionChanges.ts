// 013 (SQL Server twin of the PostgreSQL m013): changes of the partition count (issue 26), one row per request,
// preparing → pending → reassigning → completed, times database time (SYSUTCDATETIME()). change_id, prepare_cursor and
// scan_cursor are char(36) lower-case UUID text with the binary collation, like intent_id (m001: uniqueidentifier does
// not sort as its text), so the cursors compare with intent_id in the same byte order as PostgreSQL's uuid and
// JavaScript strings. At most one change is active (preparing counts): the filtered unique index holds every
// not-completed row's completed_at (NULL until completion), and a SQL Server unique index admits one NULL. Newest
// first: (requested_at, change_id), read backwards. Each object is its own batch.
export const m013PartitionChanges = `
IF OBJECT_ID(N'submission_manager_partition_changes', N'U') IS NULL
  CREATE TABLE submission_manager_partition_changes (
    change_id     char(36)     COLLATE Latin1_General_100_BIN2 NOT NULL
                  CONSTRAINT pk_submission_manager_partition_changes PRIMARY KEY,
    from_count    smallint     NOT NULL CONSTRAINT ck_partition_changes_from_count CHECK (from_count >= 1),
    to_count      smallint     NOT NULL CONSTRAINT ck_partition_changes_to_count CHECK (to_count >= 1),
    state         varchar(16)  NOT NULL CONSTRAINT ck_partition_changes_state
                  CHECK (state IN ('preparing', 'pending', 'reassigning', 'completed')),
    requested_at  datetime2(7) NOT NULL,
    requested_by  varchar(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    prepare_cursor char(36)    COLLATE Latin1_General_100_BIN2 NULL,
    prepared_at   datetime2(7) NULL,
    changer       varchar(128) COLLATE Latin1_General_100_BIN2 NULL,
    claimed_at    datetime2(7) NULL,
    switched_at   datetime2(7) NULL,
    scan_cursor   char(36)     COLLATE Latin1_General_100_BIN2 NULL,
    scan_done_at  datetime2(7) NULL,
    rows_moved    bigint       NOT NULL CONSTRAINT df_partition_changes_rows_moved DEFAULT (0),
    completed_at  datetime2(7) NULL
  );
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ux_partition_changes_active' AND object_id = OBJECT_ID(N'submission_manager_partition_changes'))
  CREATE UNIQUE INDEX ux_partition_changes_active
    ON submission_manager_partition_changes (completed_at) WHERE state <> 'completed';
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ix_partition_changes_requested' AND object_id = OBJECT_ID(N'submission_manager_partition_changes'))
  CREATE INDEX ix_partition_changes_requested ON submission_manager_partition_changes (requested_at, change_id);
GO
`;
