// 007 (SQL Server twin of the PostgreSQL m007): the circuit-breaker state the leader last recorded.
export const m007ProviderState = `
IF OBJECT_ID(N'submission_manager_provider_state', N'U') IS NULL
  CREATE TABLE submission_manager_provider_state (
    lease_name  varchar(64)  COLLATE Latin1_General_100_BIN2 NOT NULL CONSTRAINT pk_submission_manager_provider_state PRIMARY KEY,
    breaker     varchar(16)  COLLATE Latin1_General_100_BIN2 NOT NULL
                CONSTRAINT ck_provider_state_breaker CHECK (breaker IN ('closed', 'half_open', 'open')),
    changed_at  datetime2(7) NOT NULL,
    holder_id   varchar(128) COLLATE Latin1_General_100_BIN2 NOT NULL
  );
GO
`;
