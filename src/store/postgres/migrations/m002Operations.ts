// 002: operations — the cluster-wide execution control row (pause/resume), one per lease name.
// Retention needs no schema change: it deletes terminal intents by the (last_modified_at, intent_id) index.
export const m002Operations = `
CREATE TABLE IF NOT EXISTS submission_manager_execution_control (
  lease_name   varchar(64)  PRIMARY KEY,
  paused       boolean      NOT NULL,
  changed_at   timestamptz  NOT NULL,
  changed_by   varchar(128) NOT NULL,
  reason       varchar(500) NULL
);
`;
