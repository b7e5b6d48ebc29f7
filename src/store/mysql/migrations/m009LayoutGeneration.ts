// 009 (PostgreSQL's m014): the layout generation, raised by 1 by a change's fenced switch and sent to the provider
// beside partition and epoch (docs/provider-fencing.md). Additive (default 0). MySQL 8 has no ADD COLUMN IF NOT
// EXISTS (MariaDB has): added by a prepared statement only when information_schema lacks it, so it stays idempotent.
export const m009LayoutGeneration = `
SET @sm_ddl = IF(EXISTS(SELECT 1 FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = 'submission_manager_partition_count' AND column_name = 'layout_generation'), 'DO 0',
  'ALTER TABLE submission_manager_partition_count ADD COLUMN layout_generation BIGINT NOT NULL DEFAULT 0');
PREPARE sm_stmt FROM @sm_ddl;
EXECUTE sm_stmt;
DEALLOCATE PREPARE sm_stmt;
`;
