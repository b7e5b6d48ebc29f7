// 008: partition count changes (issue 26; src/store/partitionPorts.ts). One row per requested change, times database
// time (UTC_TIMESTAMP(6)). `active` is 1 while the change is not completed (preparing too), else NULL (NULLs never
// collide in a unique index): the database itself keeps at most one change active, and the active change is one
// probe of that index. "Newest first" reads ix_partition_changes_requested backwards. CREATE TABLE IF NOT EXISTS
// keeps it idempotent (the indexes are created with the table: MySQL 8 has no CREATE INDEX IF NOT EXISTS).
export const m008PartitionChanges = `
CREATE TABLE IF NOT EXISTS submission_manager_partition_changes (
  change_id     CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
  from_count    SMALLINT     NOT NULL,
  to_count      SMALLINT     NOT NULL,
  state         VARCHAR(16)  NOT NULL,
  requested_at  DATETIME(6)  NOT NULL,
  requested_by  VARCHAR(128) NOT NULL,
  prepare_cursor CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NULL,
  prepared_at   DATETIME(6)  NULL,
  changer       VARCHAR(128) NULL,
  claimed_at    DATETIME(6)  NULL,
  switched_at   DATETIME(6)  NULL,
  scan_cursor   CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NULL,
  scan_done_at  DATETIME(6)  NULL,
  rows_moved    BIGINT       NOT NULL DEFAULT 0,
  completed_at  DATETIME(6)  NULL,
  active        TINYINT AS (IF(state = 'completed', NULL, 1)) STORED,
  CONSTRAINT ck_partition_changes_state CHECK (state IN ('preparing', 'pending', 'reassigning', 'completed')),
  CONSTRAINT ck_partition_changes_counts CHECK (from_count >= 1 AND to_count >= 1),
  UNIQUE KEY ux_partition_changes_active (active),
  KEY ix_partition_changes_requested (requested_at, change_id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
`;
