// MySQL / MariaDB InsightStore: the dashboard's bounded, indexed reads.
import type { AttemptMinute, InsightStore, IntentRedrive, IntentSearch } from '../insightPorts.js';
import type { IntentRow } from '../intentPorts.js';
import type { LeaseEvent } from '../ports.js';
import { insightRows } from '../insightMapping.js';
import { dbTimeOrNull, type MyDatabase } from './db.js';
import { INTENT_COLS, NOW, idParam, minusMs, toIntent, type IntentDbRow } from './rows.js';

const MINUTE = "CAST(DATE_FORMAT(started_at, '%Y-%m-%d %H:%i:00') AS DATETIME)";

export class MysqlInsightStore implements InsightStore {
  constructor(private readonly db: MyDatabase) {}

  async recentLeaseEvents(leaseName: string, limit: number): Promise<LeaseEvent[]> {
    const r = await this.db.query(
      `SELECT seq, lease_name, lease_epoch, holder_id, event, at FROM submission_manager_lease_events
        WHERE lease_name = ? ORDER BY seq DESC LIMIT ?`, [leaseName, limit]);
    return r.rows.map(insightRows.event);
  }

  async attemptsPerMinute(windowMs: number): Promise<{ dbNow: Date; minutes: AttemptMinute[] }> {
    const r = await this.db.query(`
      SELECT n.t AS db_now, m.minute, m.started, m.errors, m.succeeded FROM (SELECT ${NOW} AS t) AS n
      LEFT JOIN (
        SELECT ${MINUTE} AS minute, COUNT(*) AS started,
               SUM(CASE WHEN outcome IN ('retryable_error', 'permanent_error', 'abandoned') THEN 1 ELSE 0 END) AS errors,
               SUM(CASE WHEN outcome = 'succeeded' THEN 1 ELSE 0 END) AS succeeded
          FROM submission_attempts WHERE started_at >= ${minusMs(NOW, '?')}
         GROUP BY ${MINUTE}) AS m ON 1 = 1
      ORDER BY m.minute`, [Math.max(0, Math.round(windowMs))]);
    return insightRows.minutes(r.rows);
  }

  async recentFailures(limit: number): Promise<IntentRow[]> {
    const r = await this.db.query<IntentDbRow>(
      `SELECT ${INTENT_COLS} FROM submission_intents WHERE status = 'failed' ORDER BY last_modified_at DESC, intent_id DESC LIMIT ?`, [limit]);
    return r.rows.map(toIntent);
  }

  async searchIntents(q: IntentSearch): Promise<IntentRow[]> {
    const id = q.intentId === null ? null : idParam(q.intentId);
    const before = q.before === null ? null : idParam(q.before);
    const from = dbTimeOrNull(q.createdFrom);
    const to = dbTimeOrNull(q.createdTo);
    const r = await this.db.query<IntentDbRow>(
      `SELECT ${INTENT_COLS} FROM submission_intents
        WHERE (? IS NULL OR intent_id = ?) AND (? IS NULL OR idempotency_key = ?)
          AND (? IS NULL OR status = ?) AND (? IS NULL OR created_at >= CAST(? AS DATETIME(6)))
          AND (? IS NULL OR created_at < CAST(? AS DATETIME(6))) AND (? IS NULL OR intent_id < ?)
        ORDER BY intent_id DESC LIMIT ?`,
      [id, id, q.idempotencyKey, q.idempotencyKey, q.status, q.status, from, from, to, to, before, before, q.limit]);
    return r.rows.map(toIntent);
  }

  async redrivesOf(intentId: string): Promise<IntentRedrive[]> {
    const r = await this.db.query(
      `SELECT r.redrive_id, r.requested_at, r.requested_by, r.reason, x.attempts_before
         FROM submission_manager_redriven_intents AS x JOIN submission_manager_redrives AS r ON r.redrive_id = x.redrive_id
        WHERE x.intent_id = ? ORDER BY r.requested_at, r.redrive_id LIMIT 100`, [idParam(intentId)]);
    return r.rows.map(insightRows.redrive);
  }
}
