// PostgreSQL RedriveStore: one statement selects, moves and records (data-modifying CTEs share one snapshot).
// FOR UPDATE (not SKIP LOCKED): a concurrent redrive or purge of the same row is waited for, then the
// `status = 'failed'` predicate is re-checked on the committed row, so each failure is redriven at most once.
import type { RedriveRecord, RedriveRequest, RedriveResult, RedriveStore } from '../redrivePorts.js';
import { selectorText, toRedriveRecord, toRedriveResult, type RedriveRecordDbRow, type RedrivenDbRow } from '../redriveMapping.js';
import type { PgQueryable } from './db.js';
import { BUDGET, PARTITIONS_CTE, nextModified } from './rows.js';


// The selector's failed intents, oldest first: the oldest $5 of each partition (a range of
// ix_intents_partition_modified each, stopping after $5 matches) are the candidates, of which the oldest $5 are
// locked and moved, found by primary key (`= ANY (ARRAY(…))`; a status-only plan would sort every failed intent).
// The selector is tested again on the locked rows (FOR UPDATE re-checks the latest version).
const SELECTOR = `status = 'failed'
     AND ($1::uuid[] IS NULL OR intent_id = ANY ($1::uuid[]))
     AND ($2::timestamptz IS NULL OR last_modified_at >= $2::timestamptz)
     AND ($3::timestamptz IS NULL OR last_modified_at < $3::timestamptz)
     AND ($4::text IS NULL OR strpos(lower(last_error), lower($4::text)) > 0)`;

const REDRIVE = `
WITH RECURSIVE now AS MATERIALIZED (SELECT clock_timestamp() AS t),
${PARTITIONS_CTE},
pick AS (
  SELECT intent_id FROM submission_intents
   WHERE intent_id = ANY (ARRAY(SELECT c.intent_id FROM parts CROSS JOIN LATERAL (
           SELECT intent_id FROM submission_intents WHERE partition_no = parts.p AND ${SELECTOR}
            ORDER BY last_modified_at, intent_id LIMIT $5) c WHERE parts.p IS NOT NULL))
     AND ${SELECTOR}
   ORDER BY last_modified_at, intent_id
   LIMIT $5
   FOR UPDATE
),
moved AS (
  UPDATE submission_intents i
     SET status = 'scheduled', next_attempt_at = now.t,
         max_attempts = ${BUDGET.redrivenMaxAttempts('i', "COALESCE((i.contract->'retry'->>'maxAttempts')::int, i.max_attempts)")},
         last_modified_at = ${nextModified('i.last_modified_at', 'now.t')}
    FROM pick, now
   WHERE i.intent_id = pick.intent_id AND i.status = 'failed'
  RETURNING i.intent_id, i.attempt_count AS attempts_before, i.max_attempts
),
rec AS (
  INSERT INTO submission_manager_redrives (redrive_id, requested_at, requested_by, reason, selector, redriven)
  SELECT $6, now.t, $7, $8, $9, (SELECT count(*) FROM moved) FROM now
  RETURNING requested_at
),
items AS (
  INSERT INTO submission_manager_redriven_intents (redrive_id, intent_id, attempts_before)
  SELECT $6, intent_id, attempts_before FROM moved
)
SELECT rec.requested_at, m.* FROM rec LEFT JOIN moved m ON true ORDER BY m.intent_id`;

export class PgRedriveStore implements RedriveStore {
  constructor(private readonly db: PgQueryable, private readonly notifyDue: () => void = () => {}) {}

  async redrive(q: RedriveRequest): Promise<RedriveResult> {
    const r = await this.db.query<RedrivenDbRow>(REDRIVE, [
      q.ids, q.failedFrom?.toISOString() ?? null, q.failedTo?.toISOString() ?? null, q.errorContains, q.limit,
      q.redriveId, q.requestedBy.slice(0, 128), q.reason === null ? null : q.reason.slice(0, 500), selectorText(q),
    ]);
    if (r.rows.length > 0) this.notifyDue();
    return toRedriveResult(q.redriveId, r.rows);
  }

  async listRedrives(limit: number): Promise<RedriveRecord[]> {
    const r = await this.db.query<RedriveRecordDbRow>(
      `SELECT redrive_id, requested_at, requested_by, reason, selector, redriven FROM submission_manager_redrives
        ORDER BY requested_at DESC, redrive_id DESC LIMIT $1`, [limit]);
    return r.rows.map(toRedriveRecord);
  }
}
