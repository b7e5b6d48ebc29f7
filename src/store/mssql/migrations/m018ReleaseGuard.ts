// 018 (SQL Server twin of the PostgreSQL m018): a change this release requested is claimed and switched only by a
// changer that knows the guard. requested_release, release_changer and switched_by (NULL; the changer columns in
// changer's BIN2 collation), and a CHECK refusing, for a change whose requested_release is set, a row whose changer
// differs from release_changer (an earlier release's claim sets changer alone) or that is switched without
// switched_by (its switch sets switched_at alone): error 547, and XACT_ABORT (every fenced batch sets it) rolls the
// earlier release's batch back, nothing written. Written with no UNKNOWN branch: a CHECK passes on UNKNOWN. Additive:
// an earlier release never names the columns, every existing row meets the constraint (checked as it is added, the default). Each column and
// the constraint guarded, each in its own batch (the constraint's batch compiles once the columns exist).
const T = 'submission_manager_partition_changes';
const add = (column: string, definition: string) => `
IF COL_LENGTH(N'${T}', N'${column}') IS NULL
  ALTER TABLE ${T} ADD ${column} ${definition};
GO
`;

export const m018ReleaseGuard = [
  add('requested_release', 'varchar(64) NULL'),
  add('release_changer', 'varchar(128) COLLATE Latin1_General_100_BIN2 NULL'),
  add('switched_by', 'varchar(128) COLLATE Latin1_General_100_BIN2 NULL'),
  `
IF NOT EXISTS (SELECT 1 FROM sys.check_constraints WHERE name = N'ck_partition_changes_release_guard' AND parent_object_id = OBJECT_ID(N'${T}'))
  ALTER TABLE ${T} ADD CONSTRAINT ck_partition_changes_release_guard CHECK (requested_release IS NULL
    OR (((changer IS NULL AND release_changer IS NULL) OR (changer IS NOT NULL AND release_changer IS NOT NULL AND changer = release_changer))
      AND (switched_at IS NULL OR switched_by IS NOT NULL)));
GO
`,
].join('');
