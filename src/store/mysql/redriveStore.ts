// MySQL / MariaDB RedriveStore: one transaction — pick, lock, move, record. The candidates (oldest failure
// first) are read without locks, then locked by primary key in id order with `status = 'failed'` re-checked on
// the latest committed row (a locking read under READ COMMITTED): a concurrent redrive or purge of the same row
// is waited for, so each failure is redriven at most once, and no unrelated row is ever locked on the way (a
// locking scan of the filter would lock the rows it passes, in its own order, against the executor's batches,
// which also lock intents in id order: found as deadlocks in the live-executor redrive test).
import type { RedriveRecord, RedriveRequest, RedriveResult, RedriveStore } from '../redrivePorts.js';
import { selectorText, toRedriveRecord, toRedriveResult, type RedriveRecordDbRow, type RedrivenDbRow } from '../redriveMapping.js';
import { dbTimeOrNull, type MyDatabase } from './db.js';
import { BUDGET, NOW, idParam, utcText } from './rows.js';

/** The id filter as SQL (constant text; the ids are parameters). */
const idFilter = (ids: string[] | null) => (ids === null ? 'TRUE' : ids.length === 0 ? 'FALSE' : 'intent_id IN (?)');

const pick = (ids: string[] | null) => `
SELECT intent_id FROM submission_intents
 WHERE status = 'failed' AND ${idFilter(ids)}
   AND (? IS NULL OR last_modified_at >= CAST(? AS DATETIME(6)))
   AND (? IS NULL OR last_modified_at < CAST(? AS DATETIME(6)))
   AND (? IS NULL OR LOCATE(LOWER(?), LOWER(last_error)) > 0)
 ORDER BY last_modified_at, intent_id
 LIMIT ?`;

const LOCK = `SELECT intent_id FROM submission_intents WHERE intent_id IN (?) AND status = 'failed' ORDER BY intent_id FOR UPDATE`;

// Assignments read only constants, their own column and attempt_count (never assigned here): order-independent.
const MOVE = `
UPDATE submission_intents AS i
   SET i.status = 'scheduled', i.next_attempt_at = CAST(? AS DATETIME(6)),
       i.max_attempts = ${BUDGET.redrivenMaxAttempts('i', "COALESCE(CAST(JSON_VALUE(i.contract, '$.retry.maxAttempts') AS SIGNED), i.max_attempts)")},
       i.last_modified_at = GREATEST(CAST(? AS DATETIME(6)), i.last_modified_at + INTERVAL 1 MICROSECOND)
 WHERE i.intent_id IN (?) AND i.status = 'failed'`;

export class MysqlRedriveStore implements RedriveStore {
  constructor(private readonly db: MyDatabase) {}

  redrive(q: RedriveRequest): Promise<RedriveResult> {
    const ids = q.ids === null ? null : q.ids.map(idParam);
    const from = dbTimeOrNull(q.failedFrom);
    const to = dbTimeOrNull(q.failedTo);
    return this.db.transaction(async (tx) => {
      const now = (await tx.query<{ t: Date; text: string }>(`SELECT ${NOW} AS t, ${utcText(NOW)} AS text`)).rows[0]!;
      const candidates = (await tx.query<{ intent_id: string }>(pick(ids), [
        ...(ids && ids.length > 0 ? [ids] : []), from, from, to, to, q.errorContains, q.errorContains, q.limit,
      ])).rows.map((r) => r.intent_id);
      const picked = candidates.length === 0 ? [] : (await tx.query<{ intent_id: string }>(LOCK, [candidates])).rows.map((r) => r.intent_id);
      let moved: RedrivenDbRow[] = [];
      if (picked.length > 0) {
        await tx.query(MOVE, [now.text, now.text, picked]);
        moved = (await tx.query<RedrivenDbRow>(`SELECT ? AS requested_at, intent_id, attempt_count AS attempts_before, max_attempts
          FROM submission_intents WHERE intent_id IN (?) ORDER BY intent_id`, [now.text, picked])).rows.map((r) => ({ ...r, requested_at: now.t }));
      }
      await tx.query(`INSERT INTO submission_manager_redrives (redrive_id, requested_at, requested_by, reason, selector, redriven)
        VALUES (?, CAST(? AS DATETIME(6)), ?, ?, ?, ?)`,
      [idParam(q.redriveId), now.text, q.requestedBy.slice(0, 128), q.reason === null ? null : q.reason.slice(0, 500), selectorText(q), moved.length]);
      if (moved.length > 0) {
        await tx.query('INSERT INTO submission_manager_redriven_intents (redrive_id, intent_id, attempts_before) VALUES ?',
          [moved.map((m) => [idParam(q.redriveId), m.intent_id, m.attempts_before])]);
      }
      const rows = moved.length > 0 ? moved : [{ requested_at: now.t, intent_id: null, attempts_before: null, max_attempts: null }];
      return toRedriveResult(q.redriveId, rows);
    });
  }

  async listRedrives(limit: number): Promise<RedriveRecord[]> {
    const r = await this.db.query<RedriveRecordDbRow>(
      `SELECT redrive_id, requested_at, requested_by, reason, selector, redriven FROM submission_manager_redrives
        ORDER BY requested_at DESC, redrive_id DESC LIMIT ?`, [limit]);
    return r.rows.map(toRedriveRecord);
  }
}
