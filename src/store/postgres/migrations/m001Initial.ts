// 001: the lease, its append-only event log, intents, attempts and the fenced-write audit.
// One sequence orders lease events and fenced writes, so a checker can prove no stale-epoch write
// committed after a newer acquire (a fenced write takes its number while holding the lease row lock).
export const m001Initial = `
CREATE SEQUENCE IF NOT EXISTS submission_manager_audit_seq;

CREATE TABLE IF NOT EXISTS submission_manager_leases (
  lease_name   varchar(64)  PRIMARY KEY,
  holder_id    varchar(128) NOT NULL,
  lease_epoch  bigint       NOT NULL,
  acquired_at  timestamptz  NOT NULL,
  renewed_at   timestamptz  NOT NULL,
  expires_at   timestamptz  NOT NULL
);

CREATE TABLE IF NOT EXISTS submission_manager_lease_events (
  seq          bigint       PRIMARY KEY DEFAULT nextval('submission_manager_audit_seq'),
  lease_name   varchar(64)  NOT NULL,
  lease_epoch  bigint       NOT NULL,
  holder_id    varchar(128) NOT NULL,
  event        varchar(16)  NOT NULL CHECK (event IN ('acquired', 'released')),
  at           timestamptz  NOT NULL
);
-- At most one holder per epoch, enforced by the database.
CREATE UNIQUE INDEX IF NOT EXISTS ux_lease_events_acquired
  ON submission_manager_lease_events (lease_name, lease_epoch) WHERE event = 'acquired';

CREATE TABLE IF NOT EXISTS submission_intents (
  intent_id         uuid         PRIMARY KEY,
  idempotency_key   varchar(255) NULL UNIQUE,
  request_hash      char(64)     NOT NULL,
  contract          jsonb        NOT NULL,
  status            varchar(16)  NOT NULL CHECK (status IN ('scheduled', 'in_flight', 'succeeded', 'failed', 'cancelled')),
  attempt_count     integer      NOT NULL DEFAULT 0,
  max_attempts      integer      NOT NULL CHECK (max_attempts BETWEEN 1 AND 50),
  next_attempt_at   timestamptz  NOT NULL,
  created_at        timestamptz  NOT NULL,
  last_modified_at  timestamptz  NOT NULL,
  last_error        text         NULL,
  last_epoch        bigint       NULL
);
CREATE INDEX IF NOT EXISTS ix_intents_modified ON submission_intents (last_modified_at, intent_id);
CREATE INDEX IF NOT EXISTS ix_intents_due ON submission_intents (status, next_attempt_at);

CREATE TABLE IF NOT EXISTS submission_attempts (
  intent_id    uuid         NOT NULL REFERENCES submission_intents (intent_id),
  attempt_no   integer      NOT NULL CHECK (attempt_no >= 1),
  lease_epoch  bigint       NOT NULL,
  holder_id    varchar(128) NOT NULL,
  started_at   timestamptz  NOT NULL,
  finished_at  timestamptz  NULL,
  outcome      varchar(16)  NOT NULL CHECK (outcome IN ('started', 'succeeded', 'retryable_error', 'permanent_error', 'abandoned', 'aborted')),
  http_status  integer      NULL,
  error        text         NULL,
  duration_ms  integer      NULL,
  PRIMARY KEY (intent_id, attempt_no)
);
CREATE INDEX IF NOT EXISTS ix_attempts_started ON submission_attempts (outcome) WHERE outcome = 'started';

CREATE TABLE IF NOT EXISTS submission_execution_audit (
  seq          bigint       PRIMARY KEY DEFAULT nextval('submission_manager_audit_seq'),
  lease_name   varchar(64)  NOT NULL,
  lease_epoch  bigint       NOT NULL,
  holder_id    varchar(128) NOT NULL,
  action       varchar(32)  NOT NULL,
  rows_written integer      NOT NULL,
  at           timestamptz  NOT NULL
);
`;
