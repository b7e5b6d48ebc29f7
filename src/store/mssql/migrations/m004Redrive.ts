// 004: redrive (SQL Server twin of the PostgreSQL m004) — every redrive call recorded with the intents it
// moved, and the attempt budget no longer capped at 50 (a redrive adds a fresh budget on top of the attempts
// already made, so attempt numbers simply continue).
export const m004Redrive = `
IF EXISTS (SELECT 1 FROM sys.check_constraints WHERE name = N'ck_intents_max_attempts' AND definition LIKE N'%50%')
  ALTER TABLE submission_intents DROP CONSTRAINT ck_intents_max_attempts;
GO

IF NOT EXISTS (SELECT 1 FROM sys.check_constraints WHERE name = N'ck_intents_max_attempts')
  ALTER TABLE submission_intents ADD CONSTRAINT ck_intents_max_attempts CHECK (max_attempts >= 1);
GO

IF OBJECT_ID(N'submission_manager_redrives', N'U') IS NULL
  CREATE TABLE submission_manager_redrives (
    redrive_id    char(36)      COLLATE Latin1_General_100_BIN2 NOT NULL CONSTRAINT pk_submission_manager_redrives PRIMARY KEY,
    requested_at  datetime2(7)  NOT NULL,
    requested_by  varchar(128)  COLLATE Latin1_General_100_BIN2 NOT NULL,
    reason        nvarchar(500) NULL,
    selector      nvarchar(max) NOT NULL,
    redriven      int           NOT NULL
  );
GO

IF NOT EXISTS (SELECT 1 FROM sys.indexes WHERE name = N'ix_redrives_requested' AND object_id = OBJECT_ID(N'submission_manager_redrives'))
  CREATE INDEX ix_redrives_requested ON submission_manager_redrives (requested_at);
GO

IF OBJECT_ID(N'submission_manager_redriven_intents', N'U') IS NULL
  CREATE TABLE submission_manager_redriven_intents (
    redrive_id    char(36)      COLLATE Latin1_General_100_BIN2 NOT NULL,
    intent_id     char(36)      COLLATE Latin1_General_100_BIN2 NOT NULL,
    attempts_before int         NOT NULL,
    CONSTRAINT pk_submission_manager_redriven_intents PRIMARY KEY (intent_id, redrive_id)
  );
GO
`;
