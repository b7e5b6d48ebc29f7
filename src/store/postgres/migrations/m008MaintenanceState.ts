// 008: the state of each leader maintenance task (retention) as the leader last recorded it, one row per lease name
// and task, so that any instance (the dashboard) can show a failing purge without asking the leader.
export const m008MaintenanceState = `
CREATE TABLE IF NOT EXISTS submission_manager_maintenance_state (
  lease_name  varchar(64)   NOT NULL,
  task        varchar(32)   NOT NULL,
  failures    integer       NOT NULL,
  last_error  varchar(1000) NULL,
  changed_at  timestamptz   NOT NULL,
  holder_id   varchar(128)  NOT NULL,
  PRIMARY KEY (lease_name, task)
);
`;
