// 005: handover requests — a drain asked of the leader, recorded by any instance (POST /api/ops/lease/release)
// and completed, fenced, by the leader that drained. At most one pending per lease name (partial unique index).
export const m005Handover = `
CREATE TABLE IF NOT EXISTS submission_manager_handover_requests (
  request_id       uuid         PRIMARY KEY,
  lease_name       varchar(64)  NOT NULL,
  status           varchar(16)  NOT NULL CHECK (status IN ('pending', 'completed')),
  requested_at     timestamptz  NOT NULL,
  requested_by     varchar(128) NOT NULL,
  reason           varchar(500) NULL,
  requested_epoch  bigint       NULL,
  completed_at     timestamptz  NULL,
  completed_epoch  bigint       NULL,
  completed_by     varchar(128) NULL
);
CREATE UNIQUE INDEX IF NOT EXISTS ux_handover_pending ON submission_manager_handover_requests (lease_name) WHERE status = 'pending';
CREATE INDEX IF NOT EXISTS ix_handover_requested ON submission_manager_handover_requests (lease_name, requested_at DESC);
`;
