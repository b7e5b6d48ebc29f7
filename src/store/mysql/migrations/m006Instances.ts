// 006: instance heartbeats (issue 25; PostgreSQL's m011). One row per live process, its times database time
// (UTC_TIMESTAMP(6)); binary collation, so holder ids compare byte-wise as on the other dialects. CREATE TABLE
// IF NOT EXISTS keeps it idempotent; the index is created with the table (MySQL 8 has no CREATE INDEX IF NOT EXISTS).
export const m006Instances = `
CREATE TABLE IF NOT EXISTS submission_manager_instances (
  holder_id       VARCHAR(128) NOT NULL PRIMARY KEY,
  version         VARCHAR(64)  NOT NULL,
  roles           VARCHAR(64)  NOT NULL,
  started_at      DATETIME(6)  NOT NULL,
  last_seen_at    DATETIME(6)  NOT NULL,
  partitions_led  VARCHAR(400) NOT NULL DEFAULT '',
  INDEX ix_instances_last_seen (last_seen_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
`;
