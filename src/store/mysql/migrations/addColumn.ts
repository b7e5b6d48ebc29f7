// MySQL 8 has no ADD COLUMN IF NOT EXISTS (MariaDB has) nor ADD CONSTRAINT IF NOT EXISTS: a migration that adds a
// column or a constraint builds the ALTER as text only when information_schema lacks it ('DO 0' otherwise) and runs
// it as a prepared statement, so it stays idempotent when interrupted half-way or run twice.

/** `ddl` (no single quote in it) run unless `present` (an information_schema query) finds a row. */
export const ddlUnless = (present: string, ddl: string) => `
SET @sm_ddl = IF(EXISTS(${present}), 'DO 0',
  '${ddl}');
PREPARE sm_stmt FROM @sm_ddl;
EXECUTE sm_stmt;
DEALLOCATE PREPARE sm_stmt;
`;

export const addColumnUnlessPresent = (table: string, column: string, definition: string) => ddlUnless(
  `SELECT 1 FROM information_schema.columns WHERE table_schema = DATABASE()
    AND table_name = '${table}' AND column_name = '${column}'`,
  `ALTER TABLE ${table} ADD COLUMN ${column} ${definition}`);

/** A CHECK constraint `name` on `table`, added unless one of that name is there. */
export const addCheckUnlessPresent = (table: string, name: string, check: string) => ddlUnless(
  `SELECT 1 FROM information_schema.table_constraints WHERE table_schema = DATABASE()
    AND table_name = '${table}' AND constraint_name = '${name}'`,
  `ALTER TABLE ${table} ADD CONSTRAINT ${name} CHECK (${check})`);
