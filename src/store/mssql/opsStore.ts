// SQL Server OpsStore: the execution control rows (pause/resume of the cluster and of each partition), the fenced retention purge (one batch,
// one round trip, like the executor's fenced writes) and handover requests (handover.ts). Upsert is UPDATE-then-INSERT under UPDLOCK+SERIALIZABLE
// (as the lease acquire; no MERGE).
import type { Fenced, LeaseToken } from '../ports.js';
import { SETTLED_COUNT_CAP, type ClusterOverview, type ExecutionControl, type HandoverRequest, type MaintenanceRecord, type OpsStore, type ProviderHold, type PurgeResult } from '../opsPorts.js';
import * as handover from './handover.js';
import { TERMINAL_SQL_LIST } from '../intentPorts.js';
import type { MssqlRunner } from './db.js';
import { buildFencedBatch, runFencedBatch } from './fence.js';
import { maintenanceArgs, toControl, toMaintenance, toOverview, toProviderHold, type ControlDbRow, type MaintenanceDbRow, type OverviewDbRow,
  type ProviderHoldDbRow } from '../rowMapping.js';
import { BATCH_START, BIN2, p, type SqlQuery } from './params.js';

// Always one row: database now, the control row and the cluster-scope row (@cluster_name; NULL: none) when there are.
const SELECT_CONTROL = `SELECT c.lease_name, c.paused, c.changed_at, c.changed_by, c.reason, n.t AS db_now,
       (SELECT TOP (1) h.request_id FROM submission_manager_handover_requests AS h
         WHERE h.lease_name = @lease_name AND h.status = 'pending' ORDER BY h.requested_at) AS pending_handover_id,
       ps.breaker, ps.changed_at AS breaker_changed_at, ps.holder_id AS breaker_holder_id,
       cc.paused AS cluster_paused, cc.changed_at AS cluster_changed_at, cc.changed_by AS cluster_changed_by, cc.reason AS cluster_reason
  FROM (SELECT SYSUTCDATETIME() AS t) AS n
  LEFT JOIN submission_manager_execution_control AS c ON c.lease_name = @lease_name
  LEFT JOIN submission_manager_execution_control AS cc ON cc.lease_name = @cluster_name
  LEFT JOIN submission_manager_provider_state AS ps ON ps.lease_name = @lease_name;`;

const count = (status: string) => `(SELECT COUNT_BIG(*) FROM submission_intents WHERE status = '${status}')`;
// A settled status counted up to SETTLED_COUNT_CAP: a bounded range of its status index, whatever the table holds.
const capped = (status: string) => `(SELECT COUNT_BIG(*) FROM (SELECT TOP (${SETTLED_COUNT_CAP}) 1 AS x FROM submission_intents WHERE status = '${status}') AS c)`;

const DAY_MS = 86_400_000;

/** The retention age as (days, remaining ms): two int parameters, whatever RETENTION_DAYS allows. */
export function retentionCutoffParams(olderThanMs: number) {
  const ms = Math.max(0, Math.round(olderThanMs));
  return [p.int('older_than_days', Math.floor(ms / DAY_MS)), p.int('older_than_rest_ms', ms % DAY_MS)];
}

/** A race-free upsert stamped @now: the UPDATE's key-range lock (UPDLOCK, SERIALIZABLE) makes the INSERT safe. */
const upsertText = (table: string, set: string, where: string, cols: string, values: string) => `
${BATCH_START}
BEGIN TRANSACTION;
UPDATE ${table} WITH (UPDLOCK, SERIALIZABLE)
   SET ${set}
 WHERE ${where};
IF @@ROWCOUNT = 0
  INSERT INTO ${table} (${cols})
  VALUES (${values});
COMMIT TRANSACTION;`;

export const opsQueries = {
  /** One SELECT (one snapshot under RCSI), one @now: counts and the due range on ix_intents_status_partition_due
   *  (m010: status leading, so both stay seeks; the due range now spans each partition's entries, not yet summed
   *  per partition as on PostgreSQL and MySQL), the newest attempt on ix_attempts_started_at, the lease row by
   *  primary key. */
  clusterOverview(leaseName: string): SqlQuery {
    return {
      text: `SET NOCOUNT ON;
DECLARE @now datetime2(7) = SYSUTCDATETIME();
SELECT @now AS db_now, l.holder_id, l.lease_epoch, l.acquired_at, l.renewed_at, l.expires_at,
       ${count('scheduled')} AS n_scheduled, ${count('in_flight')} AS n_in_flight, ${capped('succeeded')} AS n_succeeded,
       ${count('failed')} AS n_failed, ${capped('cancelled')} AS n_cancelled,
       (SELECT COUNT_BIG(*) FROM submission_intents WHERE status = 'scheduled' AND next_attempt_at <= @now) AS due_now,
       (SELECT MIN(next_attempt_at) FROM submission_intents WHERE status = 'scheduled' AND next_attempt_at <= @now) AS oldest_due_at,
       (SELECT MAX(started_at) FROM submission_attempts) AS last_attempt_at
  FROM (SELECT 1 AS one) AS x
  LEFT JOIN submission_manager_leases AS l ON l.lease_name = @lease_name;`,
      params: [p.varchar('lease_name', 64, leaseName)],
    };
  },

  getExecutionControl(leaseName: string, clusterName: string | null = null): SqlQuery {
    return { text: SELECT_CONTROL, params: [p.varchar('lease_name', 64, leaseName), p.varchar('cluster_name', 64, clusterName)] };
  },

  /** Upsert of the breaker row: the UPDATE's key-range lock (UPDLOCK, SERIALIZABLE) makes the INSERT race-free.
   *  open_until: when an open breaker closes again (@open_ms, its cool-down; NULL for 0), for the other processes. */
  recordProviderBreaker(leaseName: string, state: string, holderId: string, openForMs = 0): SqlQuery {
    const openUntil = 'CASE WHEN @open_ms > 0 THEN DATEADD(millisecond, @open_ms, @now) END';
    return {
      text: upsertText('submission_manager_provider_state', `breaker = @breaker, changed_at = @now, holder_id = @holder_id, open_until = ${openUntil}`,
        'lease_name = @lease_name', 'lease_name, breaker, changed_at, holder_id, open_until', `@lease_name, @breaker, @now, @holder_id, ${openUntil}`),
      params: [p.varchar('lease_name', 64, leaseName), p.varchar('breaker', 16, state), p.varchar('holder_id', 128, holderId.slice(0, 128)),
        p.int('open_ms', state === 'open' ? Math.max(0, Math.round(openForMs)) : 0)],
    };
  },

  /** A Retry-After pause: the recorded end only ever moves later; a new row says breaker closed. Race-free like the breaker's. */
  recordProviderPause(leaseName: string, pauseMs: number, holderId: string): SqlQuery {
    const until = 'DATEADD(millisecond, @pause_ms, @now)';
    return {
      text: upsertText('submission_manager_provider_state',
        `paused_until = CASE WHEN paused_until IS NULL OR paused_until < ${until} THEN ${until} ELSE paused_until END`,
        'lease_name = @lease_name', 'lease_name, breaker, changed_at, holder_id, paused_until', `@lease_name, 'closed', @now, @holder_id, ${until}`),
      params: [p.varchar('lease_name', 64, leaseName), p.varchar('holder_id', 128, holderId.slice(0, 128)), p.int('pause_ms', Math.max(0, Math.round(pauseMs)))],
    };
  },

  /** One primary-key read of the provider holds, with database now. */
  getProviderHold(leaseName: string): SqlQuery {
    return {
      text: `SELECT breaker, changed_at, holder_id, open_until, paused_until, SYSUTCDATETIME() AS db_now
  FROM submission_manager_provider_state WHERE lease_name = @lease_name;`,
      params: [p.varchar('lease_name', 64, leaseName)],
    };
  },

  /** Upsert of a maintenance task's row, race-free like the breaker's. */
  recordMaintenance(leaseName: string, task: string, holderId: string, failures: number, lastError: string | null): SqlQuery {
    const a = maintenanceArgs(holderId, lastError);
    return {
      text: upsertText('submission_manager_maintenance_state',
        'failures = @failures, last_error = @last_error, changed_at = @now, holder_id = @holder_id', 'lease_name = @lease_name AND task = @task',
        'lease_name, task, failures, last_error, changed_at, holder_id', '@lease_name, @task, @failures, @last_error, @now, @holder_id'),
      params: [p.varchar('lease_name', 64, leaseName), p.varchar('task', 32, task), p.int('failures', failures),
        p.nvarchar('last_error', 1000, a.error), p.varchar('holder_id', 128, a.holder)],
    };
  },

  listMaintenance(leaseName: string): SqlQuery {
    return {
      text: `SELECT task, failures, last_error, changed_at, holder_id FROM submission_manager_maintenance_state
 WHERE lease_name = @lease_name ORDER BY task;`,
      params: [p.varchar('lease_name', 64, leaseName)],
    };
  },

  /** Idempotent: changed_at/changed_by/reason only move when the flag actually flips. Last result set: the row. */
  setPaused(leaseName: string, paused: boolean, changedBy: string, reason: string | null): SqlQuery {
    return {
      text: `
${BATCH_START}
BEGIN TRANSACTION;
UPDATE submission_manager_execution_control WITH (UPDLOCK, SERIALIZABLE)
   SET paused = CAST(@paused AS bit), changed_at = @now, changed_by = @changed_by, reason = @reason
 WHERE lease_name = @lease_name AND paused <> CAST(@paused AS bit);
IF NOT EXISTS (SELECT 1 FROM submission_manager_execution_control WITH (UPDLOCK, SERIALIZABLE) WHERE lease_name = @lease_name)
  INSERT INTO submission_manager_execution_control (lease_name, paused, changed_at, changed_by, reason)
  VALUES (@lease_name, CAST(@paused AS bit), @now, @changed_by, @reason);
COMMIT TRANSACTION;
${SELECT_CONTROL}`,
      params: [
        p.varchar('lease_name', 64, leaseName),
        p.int('paused', paused ? 1 : 0),
        p.varchar('changed_by', 128, changedBy.slice(0, 128)),
        p.nvarchar('reason', 500, reason === null ? null : reason.slice(0, 500)),
        p.varchar('cluster_name', 64, null),
      ],
    };
  },

  /** Oldest terminal intents of the partition first (ix_intents_partition_modified: partition_no, last_modified_at, intent_id), READPAST so a concurrent writer is never waited for;
   *  attempts first (foreign key), then the intents, re-checking the terminal status. READCOMMITTEDLOCK beside
   *  READPAST: under READ_COMMITTED_SNAPSHOT ON (Azure SQL's default) a READ COMMITTED statement may not use READPAST
   *  without it (Microsoft, "Table hints (Transact-SQL)", READPAST: "…add the READCOMMITTEDLOCK table hint…";
   *  learn.microsoft.com/sql/t-sql/queries/hints-transact-sql-table); with RCSI OFF it changes nothing. */
  purgeTerminal(token: LeaseToken, partition: number, olderThanMs: number, limit: number, timeoutMs?: number): SqlQuery {
    return buildFencedBatch(token, 'purge_retention', {
      declare: `DECLARE @cutoff datetime2(7);
DECLARE @purged_intents int = 0;
DECLARE @purged_attempts int = 0;
DECLARE @victim TABLE (intent_id char(36) COLLATE ${BIN2} NOT NULL PRIMARY KEY);`,
      // Whole days, then the rest in milliseconds: both fit int up to RETENTION_DAYS' maximum (36,500 days),
      // where seconds overflow int from about 24,856 days.
      body: `SET @cutoff = DATEADD(millisecond, -@older_than_rest_ms, DATEADD(day, -@older_than_days, SYSUTCDATETIME()));
INSERT INTO @victim (intent_id)
SELECT TOP (@limit) intent_id FROM submission_intents WITH (UPDLOCK, READPAST, READCOMMITTEDLOCK, ROWLOCK)
 WHERE partition_no = @partition_no AND status IN ${TERMINAL_SQL_LIST} AND last_modified_at < @cutoff
 ORDER BY last_modified_at, intent_id;
DELETE a FROM submission_attempts AS a JOIN @victim AS v ON a.intent_id = v.intent_id;
SET @purged_attempts = @@ROWCOUNT;
DELETE i FROM submission_intents AS i JOIN @victim AS v ON i.intent_id = v.intent_id
 WHERE i.status IN ${TERMINAL_SQL_LIST};
SET @purged_intents = @@ROWCOUNT;
SET @rows_written = @purged_intents + @purged_attempts;`,
      results: 'SELECT @purged_intents AS intents, @purged_attempts AS attempts;',
      params: [...retentionCutoffParams(olderThanMs), p.int('limit', limit), p.smallint('partition_no', partition)],
      lockTimeoutMs: timeoutMs,
    });
  },
};

export class MssqlOpsStore implements OpsStore {
  constructor(private readonly db: MssqlRunner) {}

  async getClusterOverview(leaseName: string): Promise<ClusterOverview> {
    const sets = await this.db.run<OverviewDbRow>(opsQueries.clusterOverview(leaseName));
    return toOverview(leaseName, sets[sets.length - 1]![0]!);
  }

  async getExecutionControl(leaseName: string, clusterName: string | null = null): Promise<ExecutionControl> {
    const [rows = []] = await this.db.run<ControlDbRow>(opsQueries.getExecutionControl(leaseName, clusterName));
    return toControl(leaseName, rows[0]!, clusterName);
  }

  async recordMaintenance(leaseName: string, task: string, holderId: string, failures: number, lastError: string | null): Promise<void> {
    await this.db.run(opsQueries.recordMaintenance(leaseName, task, holderId, failures, lastError));
  }

  async listMaintenance(leaseName: string): Promise<MaintenanceRecord[]> {
    const [rows = []] = await this.db.run<MaintenanceDbRow>(opsQueries.listMaintenance(leaseName));
    return rows.map(toMaintenance);
  }

  async recordProviderBreaker(leaseName: string, state: string, holderId: string, openForMs = 0): Promise<void> {
    await this.db.run(opsQueries.recordProviderBreaker(leaseName, state, holderId, openForMs));
  }

  async recordProviderPause(leaseName: string, pauseMs: number, holderId: string): Promise<void> {
    await this.db.run(opsQueries.recordProviderPause(leaseName, pauseMs, holderId));
  }

  async getProviderHold(leaseName: string): Promise<ProviderHold | null> {
    const [rows = []] = await this.db.run<ProviderHoldDbRow>(opsQueries.getProviderHold(leaseName));
    return rows[0] ? toProviderHold(rows[0]) : null;
  }

  async setPaused(leaseName: string, paused: boolean, changedBy: string, reason: string | null): Promise<ExecutionControl> {
    const sets = await this.db.run<ControlDbRow>(opsQueries.setPaused(leaseName, paused, changedBy, reason));
    return toControl(leaseName, sets[sets.length - 1]![0]!);
  }

  async fencedPurgeTerminal(token: LeaseToken, partition: number, olderThanMs: number, limit: number, timeoutMs?: number): Promise<Fenced<PurgeResult>> {
    const out = await runFencedBatch(this.db, opsQueries.purgeTerminal(token, partition, olderThanMs, limit, timeoutMs));
    if (out.kind === 'leaseLost') return out;
    const row = out.value[0]?.[0] ?? {};
    return { kind: 'ok', value: { intents: Number(row.intents ?? 0), attempts: Number(row.attempts ?? 0) } };
  }

  requestHandover(leaseName: string, requestId: string, requestedBy: string, reason: string | null) {
    return handover.requestHandover(this.db, leaseName, requestId, requestedBy, reason);
  }

  listHandovers(leaseName: string, limit: number): Promise<HandoverRequest[]> {
    return handover.listHandovers(this.db, leaseName, limit);
  }

  fencedCompleteHandover(token: LeaseToken, requestId: string) {
    return handover.fencedCompleteHandover(this.db, token, requestId);
  }
}
