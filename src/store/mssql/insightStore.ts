// SQL Server InsightStore: the dashboard's bounded, indexed reads (twin of postgres/insightStore.ts).
import { PARTITION_ATTEMPT_SCAN, type AttemptMinute, type InsightStore, type IntentRedrive, type IntentSearch, type PartitionControl, type PartitionRef, type PartitionState } from '../insightPorts.js';
import type { IntentRow } from '../intentPorts.js';
import type { LeaseEvent } from '../ports.js';
import { insightRows, requirePartitions } from '../insightMapping.js';
import type { MssqlRunner } from './db.js';
import { p, type SqlQuery } from './params.js';
import { intentCols, toIntent, type IntentDbRow } from './rows.js';

const EPOCH = "CAST('2000-01-01' AS datetime2(7))";

export const insightQueries = {
  /** One SELECT (one snapshot under RCSI), one @now: the partitions asked for as a VALUES table of typed parameters,
   *  their lease rows by primary key, the backlog grouped by partition_no over the scheduled range of
   *  ix_intents_status_partition_due,
   *  the latest start per partition over the newest @scan attempts (ix_attempts_started_at, intents by primary key:
   *  LOOP JOIN, so never a hash join over a scan of every intent whichever @scan the plan was compiled for). */
  partitionStates(partitions: readonly PartitionRef[]): SqlQuery {
    requirePartitions(partitions);
    const values = partitions.map((_, i) => `(@o${i}, @p${i}, @n${i})`).join(', ');
    const nums = partitions.map((_, i) => `@p${i}`).join(', ');
    return {
      text: `SET NOCOUNT ON;
DECLARE @now datetime2(7) = SYSUTCDATETIME();
SELECT p.partition_no, p.lease_name, @now AS db_now, l.holder_id, l.lease_epoch, l.acquired_at, l.renewed_at, l.expires_at,
       ISNULL(b.scheduled, 0) AS scheduled, ISNULL(b.due, 0) AS due, a.last_attempt_at
  FROM (VALUES ${values}) AS p (ord, partition_no, lease_name)
  LEFT JOIN submission_manager_leases AS l ON l.lease_name = p.lease_name
  LEFT JOIN (SELECT partition_no, COUNT_BIG(*) AS scheduled, SUM(CASE WHEN next_attempt_at <= @now THEN 1 ELSE 0 END) AS due
               FROM submission_intents WHERE status = 'scheduled' AND partition_no IN (${nums}) GROUP BY partition_no) AS b
    ON b.partition_no = p.partition_no
  LEFT JOIN (SELECT i.partition_no, MAX(x.started_at) AS last_attempt_at
               FROM (SELECT TOP (@scan) intent_id, started_at FROM submission_attempts ORDER BY started_at DESC) AS x
               JOIN submission_intents AS i ON i.intent_id = x.intent_id GROUP BY i.partition_no) AS a
    ON a.partition_no = p.partition_no
 ORDER BY p.ord
OPTION (LOOP JOIN);`,
      params: [
        ...partitions.flatMap((x, i) => [p.int(`o${i}`, i), p.int(`p${i}`, x.partition), p.varchar(`n${i}`, 64, x.leaseName)]),
        p.int('scan', PARTITION_ATTEMPT_SCAN),
      ],
    };
  },

  /** One SELECT: the partitions asked for as a VALUES table of typed parameters, their control rows by primary key,
   *  the oldest pending handover request of each (ix_handover_lease_status: lease_name, status, requested_at), the
   *  most failing maintenance task of each (the primary key's lease_name range). */
  partitionControls(partitions: readonly PartitionRef[]): SqlQuery {
    requirePartitions(partitions);
    const values = partitions.map((_, i) => `(@o${i}, @p${i}, @n${i})`).join(', ');
    return {
      text: `SELECT p.partition_no, p.lease_name, c.paused, c.changed_at, c.changed_by, c.reason, h.request_id, h.requested_at, h.requested_by,
       m.task AS m_task, m.failures AS m_failures, m.last_error AS m_last_error, m.changed_at AS m_changed_at, m.holder_id AS m_holder_id
  FROM (VALUES ${values}) AS p (ord, partition_no, lease_name)
  LEFT JOIN submission_manager_execution_control AS c ON c.lease_name = p.lease_name
  OUTER APPLY (SELECT TOP (1) r.request_id, r.requested_at, r.requested_by FROM submission_manager_handover_requests AS r
                WHERE r.lease_name = p.lease_name AND r.status = 'pending' ORDER BY r.requested_at) AS h
  OUTER APPLY (SELECT TOP (1) t.task, t.failures, t.last_error, t.changed_at, t.holder_id FROM submission_manager_maintenance_state AS t
                WHERE t.lease_name = p.lease_name AND t.failures > 0 ORDER BY t.failures DESC, t.task) AS m
 ORDER BY p.ord;`,
      params: partitions.flatMap((x, i) => [p.int(`o${i}`, i), p.int(`p${i}`, x.partition), p.varchar(`n${i}`, 64, x.leaseName)]),
    };
  },

  recentLeaseEvents(leaseName: string, limit: number): SqlQuery {
    return {
      text: `SELECT TOP (@limit) seq, lease_name, lease_epoch, holder_id, [event] AS event, [at] AS at
  FROM submission_manager_lease_events WHERE lease_name = @lease_name ORDER BY seq DESC;`,
      params: [p.varchar('lease_name', 64, leaseName), p.int('limit', limit)],
    };
  },

  /** The last window's attempts per minute: a seek of ix_attempts_started_at from @since, a key lookup per row for the
   *  outcome. RECOMPILE: @since is a local variable, which the optimizer would otherwise guess as a third of the table
   *  (a clustered scan); with its value it costs the window's rows. */
  attemptsPerMinute(windowMs: number): SqlQuery {
    return {
      text: `SET NOCOUNT ON;
DECLARE @now datetime2(7) = SYSUTCDATETIME();
DECLARE @since datetime2(7) = DATEADD(millisecond, -CAST(@window_ms % 1000 AS int), DATEADD(second, -CAST(@window_ms / 1000 AS int), @now));
SELECT @now AS db_now, m.minute, m.started, m.errors, m.succeeded
  FROM (SELECT 1 AS one) AS x
  LEFT JOIN (
    SELECT DATEADD(minute, DATEDIFF(minute, ${EPOCH}, started_at), ${EPOCH}) AS minute, COUNT(*) AS started,
           SUM(CASE WHEN outcome IN ('retryable_error', 'permanent_error', 'abandoned') THEN 1 ELSE 0 END) AS errors,
           SUM(CASE WHEN outcome = 'succeeded' THEN 1 ELSE 0 END) AS succeeded
      FROM submission_attempts WHERE started_at >= @since
     GROUP BY DATEADD(minute, DATEDIFF(minute, ${EPOCH}, started_at), ${EPOCH})) AS m ON 1 = 1
 ORDER BY m.minute
OPTION (RECOMPILE);`,
      params: [p.bigint('window_ms', Math.max(0, Math.round(windowMs)))],
    };
  },

  /** The newest @limit entries of the filtered index ix_intents_failed_modified (m017), read backwards. */
  recentFailures(limit: number): SqlQuery {
    return {
      text: `SELECT TOP (@limit) ${intentCols()} FROM submission_intents WHERE status = 'failed' ORDER BY last_modified_at DESC, intent_id DESC;`,
      params: [p.int('limit', limit)],
    };
  },

  /** OPTION (RECOMPILE), as intentQueries.list: an id or key given is a seek of its index, not a walk of the primary key. */
  searchIntents(q: IntentSearch): SqlQuery {
    return {
      text: `SELECT TOP (@limit) ${intentCols()} FROM submission_intents
 WHERE (@intent_id IS NULL OR intent_id = @intent_id) AND (@idempotency_key IS NULL OR idempotency_key = @idempotency_key)
   AND (@status IS NULL OR status = @status) AND (@created_from IS NULL OR created_at >= @created_from)
   AND (@created_to IS NULL OR created_at < @created_to) AND (@before IS NULL OR intent_id < @before)
 ORDER BY intent_id DESC OPTION (RECOMPILE);`,
      params: [
        p.uuid('intent_id', q.intentId), p.nvarchar('idempotency_key', 255, q.idempotencyKey), p.varchar('status', 16, q.status),
        p.datetime2('created_from', q.createdFrom), p.datetime2('created_to', q.createdTo), p.uuid('before', q.before), p.int('limit', q.limit),
      ],
    };
  },

  redrivesOf(intentId: string): SqlQuery {
    return {
      text: `SELECT TOP (100) r.redrive_id, r.requested_at, r.requested_by, r.reason, x.attempts_before
  FROM submission_manager_redriven_intents AS x JOIN submission_manager_redrives AS r ON r.redrive_id = x.redrive_id
 WHERE x.intent_id = @intent_id ORDER BY r.requested_at, r.redrive_id;`,
      params: [p.uuid('intent_id', intentId)],
    };
  },
};

export class MssqlInsightStore implements InsightStore {
  constructor(private readonly db: MssqlRunner) {}

  private async rows(q: SqlQuery): Promise<Record<string, unknown>[]> {
    const sets = await this.db.run<Record<string, unknown>>(q);
    return sets[sets.length - 1] ?? [];
  }

  async partitionStates(partitions: readonly PartitionRef[]): Promise<{ dbNow: Date; partitions: PartitionState[] }> {
    return insightRows.partitions(await this.rows(insightQueries.partitionStates(partitions)));
  }

  async partitionControls(partitions: readonly PartitionRef[]): Promise<PartitionControl[]> {
    return insightRows.controls(await this.rows(insightQueries.partitionControls(partitions)));
  }

  async recentLeaseEvents(leaseName: string, limit: number): Promise<LeaseEvent[]> {
    return (await this.rows(insightQueries.recentLeaseEvents(leaseName, limit))).map(insightRows.event);
  }

  async attemptsPerMinute(windowMs: number): Promise<{ dbNow: Date; minutes: AttemptMinute[] }> {
    return insightRows.minutes(await this.rows(insightQueries.attemptsPerMinute(windowMs)));
  }

  async recentFailures(limit: number): Promise<IntentRow[]> {
    return (await this.rows(insightQueries.recentFailures(limit))).map((r) => toIntent(r as unknown as IntentDbRow));
  }

  async searchIntents(q: IntentSearch): Promise<IntentRow[]> {
    return (await this.rows(insightQueries.searchIntents(q))).map((r) => toIntent(r as unknown as IntentDbRow));
  }

  async redrivesOf(intentId: string): Promise<IntentRedrive[]> {
    return (await this.rows(insightQueries.redrivesOf(intentId))).map(insightRows.redrive);
  }
}
