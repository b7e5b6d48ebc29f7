// 014 (PostgreSQL's m020): a change this release requested is prepared only by a changer that knows the guard.
// release_rows_moved, release_prepare_cursor and release_prepared_at (NULL): copies of rows_moved, prepare_cursor and
// prepared_at that every statement of this release writes beside them (its request sets release_rows_moved to 0), and
// a CHECK refusing, for a change whose requested_release and release_rows_moved are set, a row where one of the three
// differs from its copy: an earlier release's preparing batch (its PREPARED update, after its moves in the same
// transaction) fails (MySQL 3819, MariaDB 4025) and rolls back, nothing moved. Additive: an earlier release never
// names the columns, every existing row meets the constraint (release_rows_moved NULL). Idempotent as m012.
import { addCheckUnlessPresent, addColumnUnlessPresent } from './addColumn.js';

const T = 'submission_manager_partition_changes';
const CHECK = `requested_release IS NULL OR release_rows_moved IS NULL OR (rows_moved = release_rows_moved
    AND prepare_cursor <=> release_prepare_cursor AND prepared_at <=> release_prepared_at)`;

export const m014PrepareGuard = [
  addColumnUnlessPresent(T, 'release_rows_moved', 'BIGINT NULL'),
  addColumnUnlessPresent(T, 'release_prepare_cursor', 'CHAR(36) CHARACTER SET ascii COLLATE ascii_bin NULL'),
  addColumnUnlessPresent(T, 'release_prepared_at', 'DATETIME(6) NULL'),
  addCheckUnlessPresent(T, 'ck_partition_changes_prepare_guard', CHECK),
].join('');
