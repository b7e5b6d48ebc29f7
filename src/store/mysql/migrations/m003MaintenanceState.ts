// 003: each leader maintenance task's state as the leader last recorded it (PostgreSQL's m008).
export const m003MaintenanceState = `
CREATE TABLE IF NOT EXISTS submission_manager_maintenance_state (
  lease_name  VARCHAR(64)   NOT NULL,
  task        VARCHAR(32)   NOT NULL,
  failures    INT           NOT NULL,
  last_error  VARCHAR(1000) NULL,
  changed_at  DATETIME(6)   NOT NULL,
  holder_id   VARCHAR(128)  NOT NULL,
  PRIMARY KEY (lease_name, task)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
`;
