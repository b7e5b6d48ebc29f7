// 001: the lease, its append-only event log, intents, attempts and the fenced-write audit. MySQL DDL commits
// implicitly (no transactional migrations): every statement is idempotent (IF NOT EXISTS, indexes declared in
// CREATE TABLE), so a migration interrupted half-way is simply run again. Times are DATETIME(6) in UTC (never
// TIMESTAMP: session-zone conversion and 2038); names and ids compare byte-wise (binary collations), as in
// PostgreSQL. One AUTO_INCREMENT table numbers lease events and fenced writes from one sequence, so a checker
// can prove no stale-epoch write committed after a newer acquire (a fenced write takes its number while it
// holds the lease row lock).
export const m001Initial = `
CREATE TABLE IF NOT EXISTS submission_manager_seq (
  seq          BIGINT       NOT NULL AUTO_INCREMENT PRIMARY KEY
) ENGINE=InnoDB;

CREATE TABLE IF NOT EXISTS submission_manager_leases (
  lease_name   VARCHAR(64)  NOT NULL PRIMARY KEY,
  holder_id    VARCHAR(128) NOT NULL,
  lease_epoch  BIGINT       NOT NULL,
  acquired_at  DATETIME(6)  NOT NULL,
  renewed_at   DATETIME(6)  NOT NULL,
  expires_at   DATETIME(6)  NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS submission_manager_lease_events (
  seq            BIGINT       NOT NULL PRIMARY KEY,
  lease_name     VARCHAR(64)  NOT NULL,
  lease_epoch    BIGINT       NOT NULL,
  holder_id      VARCHAR(128) NOT NULL,
  event          VARCHAR(16)  NOT NULL,
  at             DATETIME(6)  NOT NULL,
  -- At most one holder per epoch, enforced by the database (NULLs do not collide in a unique index).
  acquired_epoch BIGINT AS (IF(event = 'acquired', lease_epoch, NULL)) STORED,
  CONSTRAINT ck_lease_events_event CHECK (event IN ('acquired', 'released')),
  UNIQUE KEY ux_lease_events_acquired (lease_name, acquired_epoch),
  KEY ix_lease_events_name (lease_name, seq)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS submission_intents (
  intent_id         CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL PRIMARY KEY,
  idempotency_key   VARCHAR(255) NULL,
  request_hash      CHAR(64) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  contract          JSON         NOT NULL,
  status            VARCHAR(16)  NOT NULL,
  attempt_count     INT          NOT NULL DEFAULT 0,
  max_attempts      INT          NOT NULL,
  next_attempt_at   DATETIME(6)  NOT NULL,
  created_at        DATETIME(6)  NOT NULL,
  last_modified_at  DATETIME(6)  NOT NULL,
  last_error        TEXT         NULL,
  last_epoch        BIGINT       NULL,
  CONSTRAINT ck_intents_status CHECK (status IN ('scheduled', 'in_flight', 'succeeded', 'failed', 'cancelled')),
  CONSTRAINT ck_intents_max_attempts CHECK (max_attempts >= 1),
  UNIQUE KEY ux_intents_idempotency_key (idempotency_key),
  -- The refresh cursor (last_modified_at, intent_id) and retention.
  KEY ix_intents_modified (last_modified_at, intent_id),
  KEY ix_intents_due (status, next_attempt_at),
  -- The rebuild's pages (status = 'scheduled' AND intent_id > ? ORDER BY intent_id), covering its columns.
  KEY ix_intents_scheduled (status, intent_id, next_attempt_at, attempt_count, max_attempts, last_modified_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS submission_attempts (
  intent_id    CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NOT NULL,
  attempt_no   INT          NOT NULL,
  lease_epoch  BIGINT       NOT NULL,
  holder_id    VARCHAR(128) NOT NULL,
  started_at   DATETIME(6)  NOT NULL,
  finished_at  DATETIME(6)  NULL,
  outcome      VARCHAR(16)  NOT NULL,
  http_status  INT          NULL,
  error        TEXT         NULL,
  duration_ms  INT          NULL,
  PRIMARY KEY (intent_id, attempt_no),
  CONSTRAINT fk_attempts_intent FOREIGN KEY (intent_id) REFERENCES submission_intents (intent_id),
  CONSTRAINT ck_attempts_no CHECK (attempt_no >= 1),
  CONSTRAINT ck_attempts_outcome CHECK (outcome IN ('started', 'succeeded', 'retryable_error', 'permanent_error', 'abandoned', 'aborted')),
  KEY ix_attempts_open (outcome, lease_epoch),
  KEY ix_attempts_started_at (started_at)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;

CREATE TABLE IF NOT EXISTS submission_execution_audit (
  seq          BIGINT       NOT NULL PRIMARY KEY,
  lease_name   VARCHAR(64)  NOT NULL,
  lease_epoch  BIGINT       NOT NULL,
  holder_id    VARCHAR(128) NOT NULL,
  action       VARCHAR(32)  NOT NULL,
  rows_written INT          NOT NULL,
  at           DATETIME(6)  NOT NULL
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin;
`;
