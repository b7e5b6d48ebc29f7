// 001: the lease, its append-only event log, intents, attempts and the fenced-write audit (SQL Server).
// One sequence numbers lease events and fenced writes, so a checker can prove no stale-epoch write
// committed after a newer acquire (a fenced write takes its number while holding the lease row lock).
//
// Identifier columns use a binary collation (Latin1_General_100_BIN2): case-sensitive like PostgreSQL, and
// ordering is byte order. intent_id is char(36) lower-case UUID text rather than uniqueidentifier because
// SQL Server orders uniqueidentifier by its last 6 bytes first: UUIDv7 ids (time-ordered as text) would not
// sort by creation time, and the `(last_modified_at, intent_id)` cursor and `ORDER BY intent_id` paging would
// disagree with PostgreSQL's and with JavaScript string comparison. As BIN2 text they sort exactly as strings.
// idempotency_key is unique only when present: a filtered unique index (a UNIQUE constraint would allow a
// single NULL). Times are datetime2(7), always written from SYSUTCDATETIME().
export const m001Initial = `
IF OBJECT_ID(N'submission_manager_audit_seq', N'SO') IS NULL
  CREATE SEQUENCE submission_manager_audit_seq AS bigint START WITH 1 INCREMENT BY 1;
GO

IF OBJECT_ID(N'submission_manager_leases', N'U') IS NULL
  CREATE TABLE submission_manager_leases (
    lease_name   varchar(64)  COLLATE Latin1_General_100_BIN2 NOT NULL CONSTRAINT pk_submission_manager_leases PRIMARY KEY,
    holder_id    varchar(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    lease_epoch  bigint       NOT NULL,
    acquired_at  datetime2(7) NOT NULL,
    renewed_at   datetime2(7) NOT NULL,
    expires_at   datetime2(7) NOT NULL
  );
GO

IF OBJECT_ID(N'submission_manager_lease_events', N'U') IS NULL
  CREATE TABLE submission_manager_lease_events (
    seq          bigint       NOT NULL CONSTRAINT df_lease_events_seq DEFAULT (NEXT VALUE FOR submission_manager_audit_seq)
                              CONSTRAINT pk_submission_manager_lease_events PRIMARY KEY,
    lease_name   varchar(64)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    lease_epoch  bigint       NOT NULL,
    holder_id    varchar(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    [event]      varchar(16)  NOT NULL CONSTRAINT ck_lease_events_event CHECK ([event] IN ('acquired', 'released')),
    [at]         datetime2(7) NOT NULL
  );
GO

-- At most one holder per epoch, enforced by the database.
IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ux_lease_events_acquired' AND object_id = OBJECT_ID(N'submission_manager_lease_events'))
  CREATE UNIQUE INDEX ux_lease_events_acquired
    ON submission_manager_lease_events (lease_name, lease_epoch) WHERE [event] = 'acquired';
GO

IF OBJECT_ID(N'submission_intents', N'U') IS NULL
  CREATE TABLE submission_intents (
    intent_id         char(36)      COLLATE Latin1_General_100_BIN2 NOT NULL CONSTRAINT pk_submission_intents PRIMARY KEY,
    idempotency_key   nvarchar(255) COLLATE Latin1_General_100_BIN2 NULL,
    request_hash      char(64)      NOT NULL,
    contract          nvarchar(max) NOT NULL CONSTRAINT ck_intents_contract_json CHECK (ISJSON(contract) = 1),
    status            varchar(16)   NOT NULL CONSTRAINT ck_intents_status
                                    CHECK (status IN ('scheduled', 'in_flight', 'succeeded', 'failed', 'cancelled')),
    attempt_count     int           NOT NULL CONSTRAINT df_intents_attempt_count DEFAULT (0),
    max_attempts      int           NOT NULL CONSTRAINT ck_intents_max_attempts CHECK (max_attempts BETWEEN 1 AND 50),
    next_attempt_at   datetime2(7)  NOT NULL,
    created_at        datetime2(7)  NOT NULL,
    last_modified_at  datetime2(7)  NOT NULL,
    last_error        nvarchar(max) NULL,
    last_epoch        bigint        NULL
  );
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ux_intents_idempotency_key' AND object_id = OBJECT_ID(N'submission_intents'))
  CREATE UNIQUE INDEX ux_intents_idempotency_key
    ON submission_intents (idempotency_key) WHERE idempotency_key IS NOT NULL;
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ix_intents_modified' AND object_id = OBJECT_ID(N'submission_intents'))
  CREATE INDEX ix_intents_modified ON submission_intents (last_modified_at, intent_id);
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ix_intents_due' AND object_id = OBJECT_ID(N'submission_intents'))
  CREATE INDEX ix_intents_due ON submission_intents (status, next_attempt_at);
GO

IF OBJECT_ID(N'submission_attempts', N'U') IS NULL
  CREATE TABLE submission_attempts (
    intent_id    char(36)      COLLATE Latin1_General_100_BIN2 NOT NULL
                               CONSTRAINT fk_attempts_intent REFERENCES submission_intents (intent_id),
    attempt_no   int           NOT NULL CONSTRAINT ck_attempts_attempt_no CHECK (attempt_no >= 1),
    lease_epoch  bigint        NOT NULL,
    holder_id    varchar(128)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    started_at   datetime2(7)  NOT NULL,
    finished_at  datetime2(7)  NULL,
    outcome      varchar(16)   NOT NULL CONSTRAINT ck_attempts_outcome
                               CHECK (outcome IN ('started', 'succeeded', 'retryable_error', 'permanent_error', 'abandoned', 'aborted')),
    http_status  int           NULL,
    error        nvarchar(max) NULL,
    duration_ms  int           NULL,
    CONSTRAINT pk_submission_attempts PRIMARY KEY (intent_id, attempt_no)
  );
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ix_attempts_started' AND object_id = OBJECT_ID(N'submission_attempts'))
  CREATE INDEX ix_attempts_started ON submission_attempts (intent_id, attempt_no) WHERE outcome = 'started';
GO

IF OBJECT_ID(N'submission_execution_audit', N'U') IS NULL
  CREATE TABLE submission_execution_audit (
    seq          bigint       NOT NULL CONSTRAINT df_execution_audit_seq DEFAULT (NEXT VALUE FOR submission_manager_audit_seq)
                              CONSTRAINT pk_submission_execution_audit PRIMARY KEY,
    lease_name   varchar(64)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    lease_epoch  bigint       NOT NULL,
    holder_id    varchar(128) COLLATE Latin1_General_100_BIN2 NOT NULL,
    [action]     varchar(32)  NOT NULL,
    rows_written int          NOT NULL,
    [at]         datetime2(7) NOT NULL
  );
GO
`;
