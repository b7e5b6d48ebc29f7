// SQL Server: an operator's cancel of a partition change not yet switched, and the failed-step report (port:
// ../partitionPorts.ts cancelChange, recordStepFailure, clearStepFailures). Unfenced: asks and reports from any
// instance. The cancel reads the change row WITH (UPDLOCK, HOLDLOCK), as every step does, so it and a step serialise:
// a switch that committed first makes it `switched`; a step after it finds the change ended (stored as completed,
// cancelled_at set) and writes nothing. Its batch answers the row as it found it, then as it left it: ended now when
// no row moved yet, else back to preparing under to_count := from_count (the pass moves the rows back, then ends it).
import { PARTITION_CHANGE_COLS, STEP_ERROR_MAX_LENGTH } from '../partitionMapping.js';
import { BATCH_START, p, type SqlQuery } from './params.js';
import { CHANGE_RESULT, CHANGES, changeParam } from './partitionReassignQueries.js';

/** decideCancel's `end` (else `moveBack`), on the row before the update (every SET expression reads it so). */
const NOTHING_MOVED = '(rows_moved = 0 OR from_count = to_count)';

const INSERTED = PARTITION_CHANGE_COLS.split(',').map((c) => `inserted.${c.trim()}`).join(', ');

export const partitionCancelQueries = {
  cancelChange(changeId: string, cancelledBy: string): SqlQuery {
    return {
      text: `
${BATCH_START}
BEGIN TRANSACTION;
SELECT ${PARTITION_CHANGE_COLS} FROM ${CHANGES} WITH (UPDLOCK, HOLDLOCK) WHERE change_id = @change_id;
UPDATE ${CHANGES}
   SET state = CASE WHEN ${NOTHING_MOVED} THEN 'completed' ELSE 'preparing' END,
       completed_at = CASE WHEN ${NOTHING_MOVED} THEN @now ELSE completed_at END,
       prepare_cursor = CASE WHEN ${NOTHING_MOVED} THEN prepare_cursor ELSE NULL END,
       release_prepare_cursor = CASE WHEN ${NOTHING_MOVED} THEN release_prepare_cursor ELSE NULL END,
       prepared_at = CASE WHEN ${NOTHING_MOVED} THEN prepared_at ELSE NULL END,
       release_prepared_at = CASE WHEN ${NOTHING_MOVED} THEN release_prepared_at ELSE NULL END,
       to_count = CASE WHEN ${NOTHING_MOVED} THEN to_count ELSE from_count END,
       cancelled_at = @now, cancelled_by = @cancelled_by
 WHERE change_id = @change_id AND state IN ('preparing', 'pending') AND NOT (state = 'preparing' AND cancelled_at IS NOT NULL);
COMMIT TRANSACTION;
${CHANGE_RESULT}`,
      params: [changeParam(changeId), p.varchar('cancelled_by', 128, cancelledBy.slice(0, 128))],
    };
  },

  recordStepFailure(changeId: string, error: string): SqlQuery {
    return {
      text: `SET NOCOUNT ON;
UPDATE ${CHANGES} SET failed_steps = failed_steps + 1, last_step_error = @error, last_failed_at = SYSUTCDATETIME()
OUTPUT ${INSERTED}
 WHERE change_id = @change_id AND state <> 'completed';`,
      params: [changeParam(changeId), p.nvarchar('error', STEP_ERROR_MAX_LENGTH, error.slice(0, STEP_ERROR_MAX_LENGTH))],
    };
  },

  clearStepFailures(changeId: string): SqlQuery {
    return {
      text: `UPDATE ${CHANGES} SET failed_steps = 0 WHERE change_id = @change_id AND failed_steps > 0;`,
      params: [changeParam(changeId)],
    };
  },
};
