// SQL Server RedriveStore: one batch, one transaction — pick (UPDLOCK, oldest failure first), move, record —
// results read after COMMIT. UPDLOCK (not READPAST): a concurrent redrive or purge of the same row is waited
// for, then `status = 'failed'` is re-checked by the UPDATE, so each failure is redriven at most once. A contract
// maxAttempts that is not an int is an error (CAST, not TRY_CAST), as PostgreSQL's ::int: never a silent fallback.
// The pick is an ordered range of the filtered index ix_intents_failed_modified (m017), planned per call (RECOMPILE):
// the selector's values become literals, so a time window is a seek and a list of ids a primary-key seek each.
import type { RedriveRecord, RedriveRequest, RedriveResult, RedriveStore } from '../redrivePorts.js';
import { selectorText, toRedriveRecord, toRedriveResult, type RedriveRecordDbRow, type RedrivenDbRow } from '../redriveMapping.js';
import type { MssqlRunner } from './db.js';
import { NEXT_VERSION } from './executionQueries.js';
import { BATCH_START, BIN2, p, uuidText, type SqlQuery } from './params.js';
import { BUDGET } from './rows.js';


export const redriveQueries = {
  redrive(q: RedriveRequest): SqlQuery {
    const ids = q.ids === null ? null : JSON.stringify(q.ids.map((id) => uuidText('ids', id)));
    return {
      text: `
${BATCH_START}
DECLARE @pick TABLE (intent_id char(36) COLLATE ${BIN2} NOT NULL PRIMARY KEY);
DECLARE @moved TABLE (intent_id char(36) COLLATE ${BIN2} NOT NULL, attempts_before int NOT NULL, max_attempts int NOT NULL);
BEGIN TRANSACTION;
INSERT INTO @pick (intent_id)
SELECT TOP (@limit) intent_id FROM submission_intents WITH (UPDLOCK, ROWLOCK)
 WHERE status = 'failed'
   AND (@ids IS NULL OR intent_id IN (SELECT CAST(value AS char(36)) COLLATE ${BIN2} FROM OPENJSON(@ids)))
   AND (@failed_from IS NULL OR last_modified_at >= @failed_from)
   AND (@failed_to IS NULL OR last_modified_at < @failed_to)
   AND (@error_contains IS NULL OR CHARINDEX(LOWER(@error_contains), LOWER(last_error)) > 0)
 ORDER BY last_modified_at, intent_id OPTION (RECOMPILE);
UPDATE i
   SET status = 'scheduled', next_attempt_at = @now,
       max_attempts = ${BUDGET.redrivenMaxAttempts('i', "COALESCE(CAST(JSON_VALUE(i.contract, '$.retry.maxAttempts') AS int), i.max_attempts)")},
       last_modified_at = ${NEXT_VERSION('i.last_modified_at', '@now')}
OUTPUT inserted.intent_id, inserted.attempt_count, inserted.max_attempts INTO @moved
  FROM submission_intents AS i
  JOIN @pick AS k ON i.intent_id = k.intent_id
 WHERE i.status = 'failed';
INSERT INTO submission_manager_redrives (redrive_id, requested_at, requested_by, reason, selector, redriven)
SELECT @redrive_id, @now, @requested_by, @reason, @selector, COUNT(*) FROM @moved;
INSERT INTO submission_manager_redriven_intents (redrive_id, intent_id, attempts_before)
SELECT @redrive_id, intent_id, attempts_before FROM @moved;
COMMIT TRANSACTION;
SELECT @now AS requested_at, m.intent_id, m.attempts_before, m.max_attempts
  FROM (SELECT 1 AS one) AS x LEFT JOIN @moved AS m ON 1 = 1
 ORDER BY m.intent_id;`,
      params: [
        p.nvarcharMax('ids', ids),
        p.datetime2('failed_from', q.failedFrom),
        p.datetime2('failed_to', q.failedTo),
        p.nvarchar('error_contains', 200, q.errorContains),
        p.int('limit', q.limit),
        p.uuid('redrive_id', q.redriveId),
        p.varchar('requested_by', 128, q.requestedBy.slice(0, 128)),
        p.nvarchar('reason', 500, q.reason === null ? null : q.reason.slice(0, 500)),
        p.nvarcharMax('selector', selectorText(q)),
      ],
    };
  },

  listRedrives(limit: number): SqlQuery {
    return {
      text: `SELECT TOP (@limit) redrive_id, requested_at, requested_by, reason, selector, redriven
  FROM submission_manager_redrives ORDER BY requested_at DESC, redrive_id DESC;`,
      params: [p.int('limit', limit)],
    };
  },
};

export class MssqlRedriveStore implements RedriveStore {
  constructor(private readonly db: MssqlRunner) {}

  async redrive(q: RedriveRequest): Promise<RedriveResult> {
    const sets = await this.db.run<RedrivenDbRow>(redriveQueries.redrive(q));
    return toRedriveResult(q.redriveId, sets[sets.length - 1] ?? []);
  }

  async listRedrives(limit: number): Promise<RedriveRecord[]> {
    const [rows = []] = await this.db.run<RedriveRecordDbRow>(redriveQueries.listRedrives(limit));
    return rows.map(toRedriveRecord);
  }
}
