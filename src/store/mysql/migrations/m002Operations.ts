// 002: operations — execution control (pause/resume), redrive records, handover requests (at most one pending
// per lease name: a unique index on a generated column that is NULL unless pending, MySQL having no partial
// indexes) and the provider protection state the leader last recorded. Idempotent statements, as in 001.
export const m002Operations = `
CREATE TABLE IF NOT EXISTS submission_manager_execution_control (
  lease_name   VARCHAR(64)  NOT NULL PRIMARY KEY,
  paused       BOOLEAN      NOT NULL,
  changed_at   DATETIME(6)  NOT NULL,
  changed_by   VARCHAR(128) NOT NULL,
  reason       VARCHAR(500) NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS submission_manager_redrives (
  redrive_id    CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
  requested_at  DATETIME(6)  NOT NULL,
  requested_by  VARCHAR(128) NOT NULL,
  reason        VARCHAR(500) NULL,
  selector      TEXT         NOT NULL,
  redriven      INT          NOT NULL,
  KEY ix_redrives_requested (requested_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS submission_manager_redriven_intents (
  redrive_id      CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  intent_id       CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  attempts_before INT NOT NULL,
  PRIMARY KEY (intent_id, redrive_id)
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS submission_manager_handover_requests (
  request_id       CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
  lease_name       VARCHAR(64)  NOT NULL,
  status           VARCHAR(16)  NOT NULL,
  requested_at     DATETIME(6)  NOT NULL,
  requested_by     VARCHAR(128) NOT NULL,
  reason           VARCHAR(500) NULL,
  requested_epoch  BIGINT       NULL,
  completed_at     DATETIME(6)  NULL,
  completed_epoch  BIGINT       NULL,
  completed_by     VARCHAR(128) NULL,
  pending_lease    VARCHAR(64)  AS (IF(status = 'pending', lease_name, NULL)) STORED,
  CONSTRAINT ck_handover_status CHECK (status IN ('pending', 'completed')),
  UNIQUE KEY ux_handover_pending (pending_lease),
  KEY ix_handover_requested (lease_name, requested_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS submission_manager_provider_state (
  lease_name  VARCHAR(64)  NOT NULL PRIMARY KEY,
  breaker     VARCHAR(16)  NOT NULL,
  changed_at  DATETIME(6)  NOT NULL,
  holder_id   VARCHAR(128) NOT NULL,
  CONSTRAINT ck_provider_state_breaker CHECK (breaker IN ('closed', 'half_open', 'open'))
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
`;
