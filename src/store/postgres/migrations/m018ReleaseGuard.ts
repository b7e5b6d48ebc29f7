// 018: a change this release requested is claimed and switched only by a changer that knows the guard (docs/
// reliability.md, "An older release's changer during a change"). requested_release: the release that requested the
// change (NULL: a release before this guard); release_changer: the changer as the claim of such a release records it
// beside `changer`; switched_by: the changer as its switch records it. The CHECK refuses, for a change whose
// requested_release is set, a row whose changer differs from release_changer (the claim of an earlier release sets
// changer alone) or that is switched without switched_by (its switch sets switched_at alone): that release's statement
// fails (23514) and its transaction rolls back, nothing written. Additive: three NULL columns, and a constraint every
// existing row meets (requested_release NULL); an earlier release never names the columns and keeps working on
// changes it requested. The constraint is added once (guarded by its name), so a rerun changes nothing.
export const m018ReleaseGuard = `
ALTER TABLE submission_manager_partition_changes ADD COLUMN IF NOT EXISTS requested_release varchar(64) NULL;
ALTER TABLE submission_manager_partition_changes ADD COLUMN IF NOT EXISTS release_changer varchar(128) NULL;
ALTER TABLE submission_manager_partition_changes ADD COLUMN IF NOT EXISTS switched_by varchar(128) NULL;
DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'ck_partition_changes_release_guard'
    AND conrelid = 'submission_manager_partition_changes'::regclass) THEN
  ALTER TABLE submission_manager_partition_changes ADD CONSTRAINT ck_partition_changes_release_guard CHECK (requested_release IS NULL
    OR (changer IS NOT DISTINCT FROM release_changer AND (switched_at IS NULL OR switched_by IS NOT NULL))); END IF; END
$$;
`;
