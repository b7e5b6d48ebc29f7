// MySQL / MariaDB InsightStore: the dashboard's bounded, indexed reads.
import { PARTITION_ATTEMPT_SCAN, type AttemptMinute, type InsightStore, type IntentRedrive, type IntentSearch, type PartitionControl, type PartitionRef, type PartitionState } from '../insightPorts.js';
import type { IntentRow } from '../intentPorts.js';
import type { LeaseEvent } from '../ports.js';
import { insightRows, requirePartitions } from '../insightMapping.js';
import { dbTimeOrNull, type MyDatabase } from './db.js';
import { INTENT_COLS, NOW, idParam, minusMs, toIntent, type IntentDbRow } from './rows.js';

// The newest failures: the failed intents' entries of ix_intents_status_id (status, intent_id), forced, each row read
// by its key, sorted, the newest `limit` kept. It reads the failed intents and no other row, however many settled
// intents the table holds (a walk of a partition's modification order passes every settled row of a partition that
// has fewer than `limit` failures, the usual case).
const FAILURES = `SELECT ${INTENT_COLS} FROM submission_intents FORCE INDEX (ix_intents_status_id)
  WHERE status = 'failed' ORDER BY last_modified_at DESC, intent_id DESC LIMIT ?`;

const MINUTE = "CAST(DATE_FORMAT(started_at, '%Y-%m-%d %H:%i:00') AS DATETIME)";

export class MysqlInsightStore implements InsightStore {
  constructor(private readonly db: MyDatabase) {}

  /** One statement, one snapshot: UTC_TIMESTAMP(6) is the statement's start wherever it appears, so the backlog's
   *  due count and db_now are one database now. The partitions asked for are a derived table of parameters (no
   *  arrays, no LATERAL in MariaDB); the backlog is grouped by partition_no over the scheduled range of ix_intents_status_partition_due,
   *  the latest start per partition over the newest PARTITION_ATTEMPT_SCAN attempts (ix_attempts_started_at). */
  async partitionStates(partitions: readonly PartitionRef[]): Promise<{ dbNow: Date; partitions: PartitionState[] }> {
    requirePartitions(partitions);
    const rows = partitions.map((_, i) => (i === 0 ? 'SELECT ? AS ord, ? AS partition_no, ? AS lease_name' : 'SELECT ?, ?, ?')).join(' UNION ALL ');
    const nums = partitions.map(() => '?').join(', ');
    const r = await this.db.query(`
      SELECT p.partition_no, p.lease_name, ${NOW} AS db_now, l.holder_id, l.lease_epoch, l.acquired_at, l.renewed_at, l.expires_at,
             COALESCE(b.scheduled, 0) AS scheduled, COALESCE(b.due, 0) AS due, a.last_attempt_at
        FROM (${rows}) AS p
        LEFT JOIN submission_manager_leases AS l ON l.lease_name = p.lease_name
        LEFT JOIN (SELECT partition_no, COUNT(*) AS scheduled, SUM(CASE WHEN next_attempt_at <= ${NOW} THEN 1 ELSE 0 END) AS due
                     FROM submission_intents WHERE status = 'scheduled' AND partition_no IN (${nums}) GROUP BY partition_no) AS b
          ON b.partition_no = p.partition_no
        LEFT JOIN (SELECT i.partition_no, MAX(x.started_at) AS last_attempt_at
                     FROM (SELECT intent_id, started_at FROM submission_attempts ORDER BY started_at DESC LIMIT ?) AS x
                     JOIN submission_intents AS i ON i.intent_id = x.intent_id GROUP BY i.partition_no) AS a
          ON a.partition_no = p.partition_no
       ORDER BY p.ord`,
    [...partitions.flatMap((x, i) => [i, x.partition, x.leaseName]), ...partitions.map((x) => x.partition), PARTITION_ATTEMPT_SCAN]);
    return insightRows.partitions(r.rows);
  }

  /** One statement: the partitions asked for (a derived table of parameters), their control rows by primary key, their
   *  pending handover request by ux_handover_pending (the generated pending_lease column: one per lease name), their
   *  most failing maintenance task (no LATERAL in MariaDB: the task picked by a correlated subquery on the primary key). */
  async partitionControls(partitions: readonly PartitionRef[]): Promise<PartitionControl[]> {
    requirePartitions(partitions);
    const rows = partitions.map((_, i) => (i === 0 ? 'SELECT ? AS ord, ? AS partition_no, ? AS lease_name' : 'SELECT ?, ?, ?')).join(' UNION ALL ');
    const r = await this.db.query(`
      SELECT p.partition_no, p.lease_name, c.paused, c.changed_at, c.changed_by, c.reason, h.request_id, h.requested_at, h.requested_by,
             m.task AS m_task, m.failures AS m_failures, m.last_error AS m_last_error, m.changed_at AS m_changed_at, m.holder_id AS m_holder_id
        FROM (${rows}) AS p
        LEFT JOIN submission_manager_execution_control AS c ON c.lease_name = p.lease_name
        LEFT JOIN submission_manager_handover_requests AS h ON h.pending_lease = p.lease_name
        LEFT JOIN submission_manager_maintenance_state AS m ON m.lease_name = p.lease_name
         AND m.task = (SELECT x.task FROM submission_manager_maintenance_state AS x
                        WHERE x.lease_name = p.lease_name AND x.failures > 0 ORDER BY x.failures DESC, x.task LIMIT 1)
       ORDER BY p.ord`, partitions.flatMap((x, i) => [i, x.partition, x.leaseName]));
    return insightRows.controls(r.rows);
  }

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
    return (await this.db.query<IntentDbRow>(FAILURES, [limit])).rows.map(toIntent);
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
