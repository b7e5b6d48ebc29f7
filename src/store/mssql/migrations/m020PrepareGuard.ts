// 020 (SQL Server twin of the PostgreSQL m020): a change this release requested is prepared only by a changer that
// knows the guard. release_rows_moved, release_prepare_cursor (BIN2, as prepare_cursor) and release_prepared_at (NULL):
// copies of rows_moved, prepare_cursor and prepared_at that every statement of this release writes beside them (its
// request sets release_rows_moved to 0), and a CHECK refusing, for a change whose requested_release and
// release_rows_moved are set, a row where one of the three differs from its copy: error 547, and XACT_ABORT (the
// earlier release's preparing batch sets it) rolls that batch back, nothing moved. Written with no UNKNOWN branch (a
// CHECK passes on UNKNOWN). Additive: an earlier release never names the columns, every existing row meets the
// constraint (release_rows_moved NULL). Each column and the constraint guarded, each in its own batch.
const T = 'submission_manager_partition_changes';
const add = (column: string, definition: string) => `
IF COL_LENGTH(N'${T}', N'${column}') IS NULL
  ALTER TABLE ${T} ADD ${column} ${definition};
GO
`;
/** a and b both NULL, or both set and equal. */
const same = (a: string, b: string) => `((${a} IS NULL AND ${b} IS NULL) OR (${a} IS NOT NULL AND ${b} IS NOT NULL AND ${a} = ${b}))`;

export const m020PrepareGuard = [
  add('release_rows_moved', 'bigint NULL'),
  add('release_prepare_cursor', 'char(36) COLLATE Latin1_General_100_BIN2 NULL'),
  add('release_prepared_at', 'datetime2(7) NULL'),
  `
IF NOT EXISTS (SELECT 1 FROM sys.check_constraints WHERE name = N'ck_partition_changes_prepare_guard' AND parent_object_id = OBJECT_ID(N'${T}'))
  ALTER TABLE ${T} ADD CONSTRAINT ck_partition_changes_prepare_guard CHECK (requested_release IS NULL OR release_rows_moved IS NULL
    OR (rows_moved = release_rows_moved AND ${same('prepare_cursor', 'release_prepare_cursor')} AND ${same('prepared_at', 'release_prepared_at')}));
GO
`,
].join('');
