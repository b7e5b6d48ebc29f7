// MySQL / MariaDB OpsStore: the execution control rows (pause/resume of the cluster and of each partition), provider state, the fenced retention
// purge, handover requests, the cluster overview.
import type { Fenced, LeaseToken } from '../ports.js';
import { SETTLED_COUNT_CAP, type ClusterOverview, type ExecutionControl, type HandoverRequest, type MaintenanceRecord, type OpsStore, type ProviderHold, type PurgeResult } from '../opsPorts.js';
import { TERMINAL_SQL_LIST } from '../intentPorts.js';
import { maintenanceArgs, toControl, toMaintenance, toOverview, toProviderHold, type ControlDbRow, type MaintenanceDbRow, type OverviewDbRow,
  type ProviderHoldDbRow } from '../rowMapping.js';
import type { MyDatabase } from './db.js';
import { fencedTransaction } from './fence.js';
import * as handover from './handover.js';
import { NOW, PARTITIONS_CTE, minusMs, plusMs } from './rows.js';

// Always one row: database now, joined with the control row and the cluster-scope row (NULL: none) when there are.
const GET = `
SELECT c.lease_name, c.paused, c.changed_at, c.changed_by, c.reason, n.t AS db_now,
       (SELECT h.request_id FROM submission_manager_handover_requests AS h
         WHERE h.lease_name = ? AND h.status = 'pending' ORDER BY h.requested_at LIMIT 1) AS pending_handover_id,
       ps.breaker, ps.changed_at AS breaker_changed_at, ps.holder_id AS breaker_holder_id,
       cc.paused AS cluster_paused, cc.changed_at AS cluster_changed_at, cc.changed_by AS cluster_changed_by, cc.reason AS cluster_reason
  FROM (SELECT ${NOW} AS t) AS n
  LEFT JOIN submission_manager_execution_control AS c ON c.lease_name = ?
  LEFT JOIN submission_manager_execution_control AS cc ON cc.lease_name = ?
  LEFT JOIN submission_manager_provider_state AS ps ON ps.lease_name = ?`;

// Constants only in the update list: the order of assignments never matters.
// open_until: when the breaker closes again (open only: NULL for 0 ms), for the other processes.
const OPEN_UNTIL = `IF(? > 0, ${plusMs(NOW, '?')}, NULL)`;
const RECORD_BREAKER = `
INSERT INTO submission_manager_provider_state (lease_name, breaker, changed_at, holder_id, open_until) VALUES (?, ?, ${NOW}, ?, ${OPEN_UNTIL})
ON DUPLICATE KEY UPDATE breaker = ?, changed_at = ${NOW}, holder_id = ?, open_until = ${OPEN_UNTIL}`;

// The pause only ever ends later (GREATEST of a NULL is NULL here, hence the COALESCE); a new row says breaker closed.
const RECORD_PAUSE = `
INSERT INTO submission_manager_provider_state (lease_name, breaker, changed_at, holder_id, paused_until) VALUES (?, 'closed', ${NOW}, ?, ${plusMs(NOW, '?')})
ON DUPLICATE KEY UPDATE paused_until = GREATEST(COALESCE(paused_until, ${plusMs(NOW, '?')}), ${plusMs(NOW, '?')})`;

const GET_HOLD = `
SELECT breaker, changed_at, holder_id, open_until, paused_until, ${NOW} AS db_now
  FROM submission_manager_provider_state WHERE lease_name = ?`;

const RECORD_MAINTENANCE = `
INSERT INTO submission_manager_maintenance_state (lease_name, task, failures, last_error, changed_at, holder_id) VALUES (?, ?, ?, ?, ${NOW}, ?)
ON DUPLICATE KEY UPDATE failures = ?, last_error = ?, changed_at = ${NOW}, holder_id = ?`;

// Idempotent: changed_at/changed_by/reason only move when the flag actually flips. The row is created when
// missing (a no-op when present), then updated only if the flag differs.
const ENSURE_CONTROL = `
INSERT INTO submission_manager_execution_control (lease_name, paused, changed_at, changed_by, reason) VALUES (?, ?, ${NOW}, ?, ?)
ON DUPLICATE KEY UPDATE lease_name = lease_name`;
const FLIP_CONTROL = `
UPDATE submission_manager_execution_control SET paused = ?, changed_at = ${NOW}, changed_by = ?, reason = ?
 WHERE lease_name = ? AND paused <> ?`;

// Oldest terminal intents of the partition first (ix_intents_partition_modified: partition_no, last_modified_at, intent_id;
// forced, as the refresh's), locked, skipping rows another
// transaction holds. Attempts first (the foreign key is checked per row), then the intents, re-checking that
// they are terminal (final: cancel/reschedule refuse them; orphan recovery touches only in_flight).
const PURGE_PICK = `
SELECT intent_id FROM submission_intents FORCE INDEX (ix_intents_partition_modified)
 WHERE partition_no = ? AND status IN ${TERMINAL_SQL_LIST} AND last_modified_at < ${minusMs(NOW, '?')}
 ORDER BY last_modified_at, intent_id
 LIMIT ?
 FOR UPDATE SKIP LOCKED`;

const count = (status: string) => `(SELECT COUNT(*) FROM submission_intents WHERE status = '${status}')`;
// A settled status counted up to SETTLED_COUNT_CAP: a bounded range of its status index, whatever the table holds.
const capped = (status: string) => `(SELECT COUNT(*) FROM (SELECT 1 FROM submission_intents WHERE status = '${status}' LIMIT ${SETTLED_COUNT_CAP}) AS c)`;
// One statement, one instant: per-status counts on ix_intents_status_partition_due (status leading), the due
// figures per partition (its (status, partition_no) range of that index; NOW is one instant per statement) summed,
// the newest attempt on ix_attempts_started_at, the lease row by primary key.
const duePer = (agg: string, expr: string) => `(SELECT ${agg}((SELECT ${expr} FROM submission_intents AS d
  WHERE d.status = 'scheduled' AND d.partition_no = parts.p AND d.next_attempt_at <= ${NOW})) FROM parts)`;
const OVERVIEW = `
WITH RECURSIVE ${PARTITIONS_CTE}
SELECT n.t AS db_now, l.holder_id, l.lease_epoch, l.acquired_at, l.renewed_at, l.expires_at,
       ${count('scheduled')} AS n_scheduled, ${count('in_flight')} AS n_in_flight, ${capped('succeeded')} AS n_succeeded,
       ${count('failed')} AS n_failed, ${capped('cancelled')} AS n_cancelled,
       COALESCE(${duePer('SUM', 'COUNT(*)')}, 0) AS due_now, ${duePer('MIN', 'MIN(d.next_attempt_at)')} AS oldest_due_at,
       (SELECT MAX(started_at) FROM submission_attempts) AS last_attempt_at
  FROM (SELECT ${NOW} AS t) AS n
  LEFT JOIN submission_manager_leases AS l ON l.lease_name = ?`;

export class MysqlOpsStore implements OpsStore {
  constructor(private readonly db: MyDatabase) {}

  async recordProviderBreaker(leaseName: string, state: string, holderId: string, openForMs = 0): Promise<void> {
    const holder = holderId.slice(0, 128);
    const ms = state === 'open' ? Math.max(0, Math.round(openForMs)) : 0;
    await this.db.query(RECORD_BREAKER, [leaseName, state, holder, ms, ms, state, holder, ms, ms]);
  }

  async recordProviderPause(leaseName: string, pauseMs: number, holderId: string): Promise<void> {
    const ms = Math.max(0, Math.round(pauseMs));
    await this.db.query(RECORD_PAUSE, [leaseName, holderId.slice(0, 128), ms, ms, ms]);
  }

  async getProviderHold(leaseName: string): Promise<ProviderHold | null> {
    const r = await this.db.query<ProviderHoldDbRow>(GET_HOLD, [leaseName]);
    return r.rows[0] ? toProviderHold(r.rows[0]) : null;
  }

  async getClusterOverview(leaseName: string): Promise<ClusterOverview> {
    const r = await this.db.query<OverviewDbRow>(OVERVIEW, [leaseName]);
    return toOverview(leaseName, r.rows[0]!);
  }

  async recordMaintenance(leaseName: string, task: string, holderId: string, failures: number, lastError: string | null): Promise<void> {
    const a = maintenanceArgs(holderId, lastError);
    await this.db.query(RECORD_MAINTENANCE, [leaseName, task, failures, a.error, a.holder, failures, a.error, a.holder]);
  }

  async listMaintenance(leaseName: string): Promise<MaintenanceRecord[]> {
    const r = await this.db.query<MaintenanceDbRow>(
      'SELECT task, failures, last_error, changed_at, holder_id FROM submission_manager_maintenance_state WHERE lease_name = ? ORDER BY task', [leaseName]);
    return r.rows.map(toMaintenance);
  }

  async getExecutionControl(leaseName: string, clusterName: string | null = null): Promise<ExecutionControl> {
    const r = await this.db.query<ControlDbRow>(GET, [leaseName, leaseName, clusterName, leaseName]);
    return toControl(leaseName, r.rows[0]!, clusterName);
  }

  async setPaused(leaseName: string, paused: boolean, changedBy: string, reason: string | null): Promise<ExecutionControl> {
    const by = changedBy.slice(0, 128);
    const why = reason === null ? null : reason.slice(0, 500);
    await this.db.query(ENSURE_CONTROL, [leaseName, paused, by, why]);
    await this.db.query(FLIP_CONTROL, [paused, by, why, leaseName, paused]);
    return this.getExecutionControl(leaseName);
  }

  fencedPurgeTerminal(token: LeaseToken, partition: number, olderThanMs: number, limit: number, timeoutMs?: number): Promise<Fenced<PurgeResult>> {
    return fencedTransaction(this.db, token, 'purge_retention', async (tx) => {
      const ids = (await tx.query<{ intent_id: string }>(PURGE_PICK, [partition, Math.max(0, Math.round(olderThanMs)), limit])).rows.map((r) => r.intent_id);
      if (ids.length === 0) return { value: { intents: 0, attempts: 0 }, rowsWritten: 0 };
      const attempts = await tx.query('DELETE FROM submission_attempts WHERE intent_id IN (?)', [ids]);
      const intents = await tx.query(`DELETE FROM submission_intents WHERE intent_id IN (?) AND status IN ${TERMINAL_SQL_LIST}`, [ids]);
      const value = { intents: intents.affectedRows, attempts: attempts.affectedRows };
      return { value, rowsWritten: value.intents + value.attempts };
    }, timeoutMs);
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
