// PostgreSQL InsightStore: the dashboard's bounded, indexed reads.
import { PARTITION_ATTEMPT_SCAN, type AttemptMinute, type InsightStore, type IntentRedrive, type IntentSearch, type PartitionControl, type PartitionRef, type PartitionState } from '../insightPorts.js';
import type { IntentRow } from '../intentPorts.js';
import type { LeaseEvent } from '../ports.js';
import { insightRows, requirePartitions } from '../insightMapping.js';
import type { PgQueryable } from './db.js';
import { INTENT_COLS, PARTITIONS_CTE, toIntent, type IntentDbRow } from './rows.js';

// The newest failures: the newest of each partition (a backward range of ix_intents_partition_modified, stopping
// after $1 failed rows), merged. A status-only plan would sort every failed intent on each call.
const RECENT_FAILURES = `WITH RECURSIVE ${PARTITIONS_CTE}
SELECT f.* FROM parts CROSS JOIN LATERAL (
  SELECT ${INTENT_COLS} FROM submission_intents
   WHERE partition_no = parts.p AND status = 'failed' ORDER BY last_modified_at DESC, intent_id DESC LIMIT $1) f
 WHERE parts.p IS NOT NULL
 ORDER BY f.last_modified_at DESC, f.intent_id DESC LIMIT $1`;

// One statement, one snapshot, one database now: the partitions asked for (two parallel arrays), their lease rows by
// primary key, the backlog grouped by partition_no (the scheduled range of ix_intents_status_partition_due) and the latest start per
// partition among the newest $3 attempts (ix_attempts_started_at, then each one's intent by primary key: a subquery per
// attempt, so the work is $3 index probes at every size; a join may be planned as a hash join over every intent).
const PARTITION_STATES = `
WITH n AS (SELECT clock_timestamp() AS t),
p AS (SELECT * FROM unnest($1::int[], $2::text[]) WITH ORDINALITY AS p(partition_no, lease_name, ord)),
b AS (SELECT partition_no, count(*) AS scheduled, count(*) FILTER (WHERE next_attempt_at <= (SELECT t FROM n)) AS due
        FROM submission_intents WHERE status = 'scheduled' AND partition_no = ANY($1::int[]) GROUP BY partition_no),
a AS (SELECT y.partition_no, max(y.started_at) AS last_attempt_at
        FROM (SELECT (SELECT i.partition_no FROM submission_intents i WHERE i.intent_id = x.intent_id) AS partition_no, x.started_at
                FROM (SELECT intent_id, started_at FROM submission_attempts ORDER BY started_at DESC LIMIT $3) x) y
       GROUP BY y.partition_no)
SELECT p.partition_no, p.lease_name, n.t AS db_now, l.holder_id, l.lease_epoch, l.acquired_at, l.renewed_at, l.expires_at,
       coalesce(b.scheduled, 0) AS scheduled, coalesce(b.due, 0) AS due, a.last_attempt_at
  FROM p CROSS JOIN n
  LEFT JOIN submission_manager_leases l ON l.lease_name = p.lease_name
  LEFT JOIN b ON b.partition_no = p.partition_no
  LEFT JOIN a ON a.partition_no = p.partition_no
 ORDER BY p.ord`;

// One statement: the partitions asked for, their control rows by primary key, their pending handover request
// (ux_handover_pending: at most one per lease name; LIMIT 1 keeps the row count whatever happens to that index) and
// their most failing maintenance task (the primary key's lease_name range: one row per task).
const PARTITION_CONTROLS = `
SELECT p.partition_no, p.lease_name, c.paused, c.changed_at, c.changed_by, c.reason,
       h.request_id::text AS request_id, h.requested_at, h.requested_by,
       m.task AS m_task, m.failures AS m_failures, m.last_error AS m_last_error, m.changed_at AS m_changed_at, m.holder_id AS m_holder_id
  FROM unnest($1::int[], $2::text[]) WITH ORDINALITY AS p(partition_no, lease_name, ord)
  LEFT JOIN submission_manager_execution_control c ON c.lease_name = p.lease_name
  LEFT JOIN LATERAL (SELECT request_id, requested_at, requested_by FROM submission_manager_handover_requests
                      WHERE lease_name = p.lease_name AND status = 'pending' ORDER BY requested_at LIMIT 1) h ON true
  LEFT JOIN LATERAL (SELECT task, failures, last_error, changed_at, holder_id FROM submission_manager_maintenance_state
                      WHERE lease_name = p.lease_name AND failures > 0 ORDER BY failures DESC, task LIMIT 1) m ON true
 ORDER BY p.ord`;

export class PgInsightStore implements InsightStore {
  constructor(private readonly db: PgQueryable) {}

  async partitionStates(partitions: readonly PartitionRef[]): Promise<{ dbNow: Date; partitions: PartitionState[] }> {
    requirePartitions(partitions);
    const r = await this.db.query(PARTITION_STATES,
      [partitions.map((x) => x.partition), partitions.map((x) => x.leaseName), PARTITION_ATTEMPT_SCAN]);
    return insightRows.partitions(r.rows);
  }

  async partitionControls(partitions: readonly PartitionRef[]): Promise<PartitionControl[]> {
    requirePartitions(partitions);
    const r = await this.db.query(PARTITION_CONTROLS, [partitions.map((x) => x.partition), partitions.map((x) => x.leaseName)]);
    return insightRows.controls(r.rows);
  }

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
    const r = await this.db.query<IntentDbRow>(RECENT_FAILURES, [limit]);
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
