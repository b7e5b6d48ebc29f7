// 012 (PostgreSQL's m018): a change this release requested is claimed and switched only by a changer that knows the
// guard. requested_release, release_changer and switched_by (NULL), and a CHECK refusing, for a change whose
// requested_release is set, a row whose changer differs from release_changer (an earlier release's claim sets changer
// alone) or that is switched without switched_by (its switch sets switched_at alone): that statement fails (MySQL
// 3819, MariaDB 4025) and the earlier release's transaction rolls back, nothing written. Additive: an earlier release
// never names the columns, every existing row meets the constraint. Idempotent: each column added when
// information_schema lacks it (addColumn.ts), the constraint when no constraint of its name is on the table.
import { addCheckUnlessPresent, addColumnUnlessPresent } from './addColumn.js';

const T = 'submission_manager_partition_changes';
const CHECK = `requested_release IS NULL OR (changer <=> release_changer AND (switched_at IS NULL OR switched_by IS NOT NULL))`;

export const m012ReleaseGuard = [
  addColumnUnlessPresent(T, 'requested_release', 'VARCHAR(64) NULL'),
  addColumnUnlessPresent(T, 'release_changer', 'VARCHAR(128) NULL'),
  addColumnUnlessPresent(T, 'switched_by', 'VARCHAR(128) NULL'),
  addCheckUnlessPresent(T, 'ck_partition_changes_release_guard', CHECK),
].join('');
