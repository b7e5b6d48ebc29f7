// 004: partitions (issue 25; PostgreSQL's m009). MySQL 8 has no ADD COLUMN / CREATE INDEX IF NOT EXISTS (MariaDB
// has), so each change is built as text only when information_schema lacks it and run as a prepared statement
// ('DO 0' otherwise): the migration stays idempotent when interrupted half-way. The column is `partition_no`
// (PARTITION is a reserved word here). Its constant default makes existing rows partition 0 without a table copy
// (INSTANT / in place; no CHECK, which would copy the table). No partition-first indexes yet (see the PostgreSQL m009).
/** Run `ddl` unless information_schema shows that `object.column` of submission_intents exists already. */
const unless = (object: { column: string }, ddl: string) => {
  return `SET @sm_ddl = IF(EXISTS(SELECT 1 FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = 'submission_intents' AND column_name = '${object.column}'), 'DO 0', '${ddl}');
PREPARE sm_stmt FROM @sm_ddl;
EXECUTE sm_stmt;
DEALLOCATE PREPARE sm_stmt;
`;
};

export const m004Partitions = `
${unless({ column: 'partition_no' }, 'ALTER TABLE submission_intents ADD COLUMN partition_no SMALLINT NOT NULL DEFAULT 0')}
${unless({ column: 'partition_key' }, 'ALTER TABLE submission_intents ADD COLUMN partition_key VARCHAR(128) NULL')}
CREATE TABLE IF NOT EXISTS submission_manager_partition_count (
  id               SMALLINT     NOT NULL PRIMARY KEY,
  partition_count  SMALLINT     NOT NULL,
  recorded_at      DATETIME(6)  NOT NULL,
  recorded_by      VARCHAR(128) NOT NULL,
  CONSTRAINT ck_partition_count_id CHECK (id = 1),
  CONSTRAINT ck_partition_count_count CHECK (partition_count >= 1)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

INSERT INTO submission_manager_partition_count (id, partition_count, recorded_at, recorded_by)
SELECT 1, 1, UTC_TIMESTAMP(6), 'migration' FROM DUAL WHERE EXISTS (SELECT 1 FROM submission_intents)
ON DUPLICATE KEY UPDATE id = id;
`;
