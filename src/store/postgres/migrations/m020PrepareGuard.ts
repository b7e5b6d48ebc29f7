// 020: a change this release requested is prepared only by a changer that knows the guard (docs/reliability.md,
// "Mixed-version campaign"). release_rows_moved, release_prepare_cursor and release_prepared_at: copies of rows_moved,
// prepare_cursor and prepared_at that every statement of this release writes beside them (its request sets
// release_rows_moved to 0). The CHECK refuses, for a change whose requested_release and release_rows_moved are set, a
// row where one of the three differs from its copy: an earlier release's preparing batch (rows_moved, prepare_cursor,
// state and prepared_at, in the statement that moves its intents or in their transaction) fails (23514) and rolls
// back, nothing moved. Additive: three NULL columns, and a constraint every existing row meets (release_rows_moved
// NULL: a change requested before this migration keeps m018's guard only); an earlier release never names the
// columns and keeps preparing changes it requested. The constraint is added once (guarded by its name).
export const m020PrepareGuard = `
ALTER TABLE submission_manager_partition_changes ADD COLUMN IF NOT EXISTS release_rows_moved bigint NULL;
ALTER TABLE submission_manager_partition_changes ADD COLUMN IF NOT EXISTS release_prepare_cursor uuid NULL;
ALTER TABLE submission_manager_partition_changes ADD COLUMN IF NOT EXISTS release_prepared_at timestamptz NULL;
DO $$ BEGIN IF NOT EXISTS (SELECT 1 FROM pg_constraint WHERE conname = 'ck_partition_changes_prepare_guard'
    AND conrelid = 'submission_manager_partition_changes'::regclass) THEN
  ALTER TABLE submission_manager_partition_changes ADD CONSTRAINT ck_partition_changes_prepare_guard CHECK (requested_release IS NULL
    OR release_rows_moved IS NULL OR (rows_moved = release_rows_moved AND prepare_cursor IS NOT DISTINCT FROM release_prepare_cursor
      AND prepared_at IS NOT DISTINCT FROM release_prepared_at)); END IF; END
$$;
`;
