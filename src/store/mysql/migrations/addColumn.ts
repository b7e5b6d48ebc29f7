// MySQL 8 has no ADD COLUMN IF NOT EXISTS (MariaDB has): a migration that adds a column builds the ALTER as text only
// when information_schema lacks the column ('DO 0' otherwise) and runs it as a prepared statement, so it stays
// idempotent when interrupted half-way or run twice.
export const addColumnUnlessPresent = (table: string, column: string, definition: string) => `
SET @sm_ddl = IF(EXISTS(SELECT 1 FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = '${table}' AND column_name = '${column}'), 'DO 0',
  'ALTER TABLE ${table} ADD COLUMN ${column} ${definition}');
PREPARE sm_stmt FROM @sm_ddl;
EXECUTE sm_stmt;
DEALLOCATE PREPARE sm_stmt;
`;
