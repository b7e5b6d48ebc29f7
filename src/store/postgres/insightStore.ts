// PostgreSQL InsightStore: the dashboard's bounded, indexed reads.
import type { AttemptMinute, InsightStore, IntentRedrive, IntentSearch } from '../insightPorts.js';
import type { IntentRow } from '../intentPorts.js';
import type { LeaseEvent } from '../ports.js';
import { insightRows } from '../insightMapping.js';
import type { PgQueryable } from './db.js';
import { INTENT_COLS, toIntent, type IntentDbRow } from './rows.js';

export class PgInsightStore implements InsightStore {
  constructor(private readonly db: PgQueryable) {}

  async recentLeaseEvents(leaseName: string, limit: number): Promise<LeaseEvent[]> {
    const r = await this.db.query(
      `SELECT seq, lease_name, lease_epoch, holder_id, event, at FROM submission_manager_lease_events
        WHERE lease_name = $1 ORDER BY seq DESC LIMIT $2`, [leaseName, limit]);
    return r.rows.map(insightRows.event);
  }

  async attemptsPerMinute(windowMs: number): Promise<{ dbNow: Date; minutes: AttemptMinute[] }> {
    const r = await this.db.query(`
      SELECT n.t AS db_now, m.* FROM (SELECT clock_timestamp() AS t) n
      LEFT JOIN LATERAL (
        SELECT date_trunc('minute', started_at) AS minute, count(*) AS started,
               count(*) FILTER (WHERE outcome IN ('retryable_error', 'permanent_error', 'abandoned')) AS errors,
               count(*) FILTER (WHERE outcome = 'succeeded') AS succeeded
          FROM submission_attempts WHERE started_at >= n.t - $1::float8 * interval '1 millisecond'
         GROUP BY 1 ORDER BY 1) m ON true`, [windowMs]);
    return insightRows.minutes(r.rows);
  }

  async recentFailures(limit: number): Promise<IntentRow[]> {
    const r = await this.db.query<IntentDbRow>(
      `SELECT ${INTENT_COLS} FROM submission_intents WHERE status = 'failed' ORDER BY last_modified_at DESC, intent_id DESC LIMIT $1`, [limit]);
    return r.rows.map(toIntent);
  }

  async searchIntents(q: IntentSearch): Promise<IntentRow[]> {
    const r = await this.db.query<IntentDbRow>(
      `SELECT ${INTENT_COLS} FROM submission_intents
        WHERE ($1::uuid IS NULL OR intent_id = $1::uuid) AND ($2::varchar IS NULL OR idempotency_key = $2)
          AND ($3::varchar IS NULL OR status = $3) AND ($4::timestamptz IS NULL OR created_at >= $4::timestamptz)
          AND ($5::timestamptz IS NULL OR created_at < $5::timestamptz) AND ($6::uuid IS NULL OR intent_id < $6::uuid)
        ORDER BY intent_id DESC LIMIT $7`,
      [q.intentId, q.idempotencyKey, q.status, q.createdFrom?.toISOString() ?? null, q.createdTo?.toISOString() ?? null, q.before, q.limit]);
    return r.rows.map(toIntent);
  }

  async redrivesOf(intentId: string): Promise<IntentRedrive[]> {
    const r = await this.db.query(
      `SELECT r.redrive_id, r.requested_at, r.requested_by, r.reason, x.attempts_before
         FROM submission_manager_redriven_intents x JOIN submission_manager_redrives r ON r.redrive_id = x.redrive_id
        WHERE x.intent_id = $1 ORDER BY r.requested_at, r.redrive_id LIMIT 100`, [intentId]);
    return r.rows.map(insightRows.redrive);
  }
}
