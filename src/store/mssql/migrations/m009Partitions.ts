// 009 (SQL Server twin of the PostgreSQL m009): partitions (issue 25). partition_no with a constant default makes
// every existing row partition 0 as a metadata-only change (no CHECK: it would scan the table under its lock);
// partition_key keeps the key it was hashed from (128 characters: up to 256 UTF-16 units, nvarchar's measure),
// compared byte-wise (BIN2) like the other identifiers. Each
// column is its own batch (a batch is compiled whole). No partition-first indexes yet (see the PostgreSQL m009);
// the partition count is one row, 1 where intents exist already.
export const m009Partitions = `
IF COL_LENGTH(N'submission_intents', N'partition_no') IS NULL
  ALTER TABLE submission_intents ADD partition_no smallint NOT NULL CONSTRAINT df_intents_partition_no DEFAULT (0);
GO

IF COL_LENGTH(N'submission_intents', N'partition_key') IS NULL
  ALTER TABLE submission_intents ADD partition_key nvarchar(256) COLLATE Latin1_General_100_BIN2 NULL;
GO

IF OBJECT_ID(N'submission_manager_partition_count', N'U') IS NULL
  CREATE TABLE submission_manager_partition_count (
    id               smallint     NOT NULL CONSTRAINT pk_submission_manager_partition_count PRIMARY KEY
                                  CONSTRAINT ck_partition_count_id CHECK (id = 1),
    partition_count  smallint     NOT NULL CONSTRAINT ck_partition_count_count CHECK (partition_count >= 1),
    recorded_at      datetime2(7) NOT NULL,
    recorded_by      varchar(128) COLLATE Latin1_General_100_BIN2 NOT NULL
  );
GO

IF NOT EXISTS (SELECT 1 FROM submission_manager_partition_count WITH (UPDLOCK, HOLDLOCK) WHERE id = 1)
   AND EXISTS (SELECT 1 FROM submission_intents)
  INSERT INTO submission_manager_partition_count (id, partition_count, recorded_at, recorded_by)
  VALUES (1, 1, SYSUTCDATETIME(), 'migration');
GO
`;
