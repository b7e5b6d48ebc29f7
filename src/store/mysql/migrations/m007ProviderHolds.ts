// 007 (PostgreSQL's m012): the provider holds every process observes (breaker open_until, Retry-After paused_until),
// database time (UTC), nullable. MySQL 8 has no ADD COLUMN IF NOT EXISTS (MariaDB has): each column is added by a
// prepared statement only when information_schema lacks it ('DO 0' otherwise), so the migration stays idempotent.
const unless = (column: string, ddl: string) => `SET @sm_ddl = IF(EXISTS(SELECT 1 FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = 'submission_manager_provider_state' AND column_name = '${column}'), 'DO 0', '${ddl}');
PREPARE sm_stmt FROM @sm_ddl;
EXECUTE sm_stmt;
DEALLOCATE PREPARE sm_stmt;
`;

export const m007ProviderHolds = `
${unless('open_until', 'ALTER TABLE submission_manager_provider_state ADD COLUMN open_until DATETIME(6) NULL')}
${unless('paused_until', 'ALTER TABLE submission_manager_provider_state ADD COLUMN paused_until DATETIME(6) NULL')}
`;
