// PostgreSQL OpsStore: the execution control rows (pause/resume of the cluster and of each partition), the fenced retention purge, handover requests.
import type { Fenced, LeaseToken } from '../ports.js';
import { SETTLED_COUNT_CAP, type ClusterOverview, type ExecutionControl, type HandoverRequest, type MaintenanceRecord, type OpsStore, type ProviderHold, type PurgeResult } from '../opsPorts.js';
import * as handover from './handover.js';
import { TERMINAL_SQL_LIST } from '../intentPorts.js';
import { PARTITIONS_CTE } from './rows.js';
import type { PgDatabase } from './db.js';
import { fencedTransaction } from './fence.js';
import { maintenanceArgs, toControl, toMaintenance, toOverview, toProviderHold, type ControlDbRow, type MaintenanceDbRow, type OverviewDbRow,
  type ProviderHoldDbRow } from '../rowMapping.js';

// Always one row: database now, joined with the control row and the cluster-scope row ($2; NULL: none) when there are.
const GET = `
SELECT c.lease_name, c.paused, c.changed_at, c.changed_by, c.reason, n.t AS db_now,
       (SELECT h.request_id::text FROM submission_manager_handover_requests h
         WHERE h.lease_name = $1 AND h.status = 'pending' ORDER BY h.requested_at LIMIT 1) AS pending_handover_id,
       ps.breaker, ps.changed_at AS breaker_changed_at, ps.holder_id AS breaker_holder_id,
       cc.paused AS cluster_paused, cc.changed_at AS cluster_changed_at, cc.changed_by AS cluster_changed_by, cc.reason AS cluster_reason
  FROM (SELECT clock_timestamp() AS t) n
  LEFT JOIN submission_manager_execution_control c ON c.lease_name = $1
  LEFT JOIN submission_manager_execution_control cc ON cc.lease_name = $2::varchar
  LEFT JOIN submission_manager_provider_state ps ON ps.lease_name = $1`;

// open_until: when the breaker closes again (open only; $4 = its cool-down, 0 otherwise), for the other processes.
const RECORD_BREAKER = `
INSERT INTO submission_manager_provider_state (lease_name, breaker, changed_at, holder_id, open_until)
VALUES ($1, $2, clock_timestamp(), $3, CASE WHEN $4::float8 > 0 THEN clock_timestamp() + $4::float8 * interval '1 millisecond' END)
ON CONFLICT (lease_name) DO UPDATE
  SET breaker = EXCLUDED.breaker, changed_at = EXCLUDED.changed_at, holder_id = EXCLUDED.holder_id, open_until = EXCLUDED.open_until`;

// The pause only ever ends later (GREATEST ignores a NULL); a new row says breaker closed (nothing else is known).
const RECORD_PAUSE = `
INSERT INTO submission_manager_provider_state AS ps (lease_name, breaker, changed_at, holder_id, paused_until)
VALUES ($1, 'closed', clock_timestamp(), $2, clock_timestamp() + $3::float8 * interval '1 millisecond')
ON CONFLICT (lease_name) DO UPDATE SET paused_until = GREATEST(ps.paused_until, EXCLUDED.paused_until)`;

const GET_HOLD = `
SELECT breaker, changed_at, holder_id, open_until, paused_until, clock_timestamp() AS db_now
  FROM submission_manager_provider_state WHERE lease_name = $1`;

const RECORD_MAINTENANCE = `
INSERT INTO submission_manager_maintenance_state (lease_name, task, failures, last_error, changed_at, holder_id)
VALUES ($1, $2, $3, $4, clock_timestamp(), $5)
ON CONFLICT (lease_name, task) DO UPDATE
  SET failures = EXCLUDED.failures, last_error = EXCLUDED.last_error, changed_at = EXCLUDED.changed_at, holder_id = EXCLUDED.holder_id`;

// Idempotent: changed_at/changed_by/reason only move when the flag actually flips.
const SET = `
WITH now AS MATERIALIZED (SELECT clock_timestamp() AS t)
INSERT INTO submission_manager_execution_control AS c (lease_name, paused, changed_at, changed_by, reason)
SELECT $1, $2, now.t, $3, $4 FROM now
ON CONFLICT (lease_name) DO UPDATE
  SET paused = EXCLUDED.paused, changed_at = EXCLUDED.changed_at, changed_by = EXCLUDED.changed_by, reason = EXCLUDED.reason
  WHERE c.paused IS DISTINCT FROM EXCLUDED.paused
RETURNING c.lease_name`;

// Oldest terminal intents of the partition first (ix_intents_partition_modified: partition_no, last_modified_at, intent_id), locked so a concurrent purge by a
// stale leader could not pick the same rows (it is fenced anyway). Attempts and intents go in one statement:
// the foreign key is checked at the end of the statement, when both deletes are done. Terminal statuses are
// final (cancel/reschedule refuse them; orphan recovery touches only in_flight), and the delete re-checks it.
const PURGE = `
WITH victim AS (
  SELECT intent_id FROM submission_intents
   WHERE partition_no = $3 AND status IN ${TERMINAL_SQL_LIST}
     AND last_modified_at < clock_timestamp() - $1::float8 * interval '1 millisecond'
   ORDER BY last_modified_at, intent_id
   LIMIT $2
   FOR UPDATE SKIP LOCKED
),
att AS (
  DELETE FROM submission_attempts a USING victim v WHERE a.intent_id = v.intent_id RETURNING 1
),
del AS (
  DELETE FROM submission_intents i USING victim v
   WHERE i.intent_id = v.intent_id AND i.status IN ${TERMINAL_SQL_LIST}
  RETURNING 1
)
SELECT (SELECT count(*) FROM del)::int AS intents, (SELECT count(*) FROM att)::int AS attempts`;

// One statement, one snapshot: per-status counts on ix_intents_status_partition_due (status leading), the due
// figures summed over the partitions (each partition's due range of that index: the oldest is its first entry), the
// newest attempt on ix_attempts_started_at, the lease row by primary key.
const count = (status: string) => `(SELECT count(*) FROM submission_intents WHERE status = '${status}')`;
// A settled status counted up to SETTLED_COUNT_CAP: a bounded range of its status index, whatever the table holds.
const capped = (status: string) => `(SELECT count(*) FROM (SELECT 1 FROM submission_intents WHERE status = '${status}' LIMIT ${SETTLED_COUNT_CAP}) c)`;
const OVERVIEW = `
WITH RECURSIVE now AS MATERIALIZED (SELECT clock_timestamp() AS t),
${PARTITIONS_CTE},
due AS (SELECT d.n, d.m FROM parts CROSS JOIN LATERAL (
  SELECT count(*) AS n, min(next_attempt_at) AS m FROM submission_intents
   WHERE status = 'scheduled' AND partition_no = parts.p AND next_attempt_at <= (SELECT t FROM now)) d WHERE parts.p IS NOT NULL)
SELECT n.t AS db_now, l.holder_id, l.lease_epoch, l.acquired_at, l.renewed_at, l.expires_at,
       ${count('scheduled')} AS n_scheduled, ${count('in_flight')} AS n_in_flight, ${capped('succeeded')} AS n_succeeded,
       ${count('failed')} AS n_failed, ${capped('cancelled')} AS n_cancelled,
       (SELECT COALESCE(sum(n), 0)::int8 FROM due) AS due_now, (SELECT min(m) FROM due) AS oldest_due_at,
       (SELECT max(started_at) FROM submission_attempts) AS last_attempt_at
  FROM now n
  LEFT JOIN submission_manager_leases l ON l.lease_name = $1`;

export class PgOpsStore implements OpsStore {
  constructor(private readonly db: PgDatabase) {}

  async recordProviderBreaker(leaseName: string, state: string, holderId: string, openForMs = 0): Promise<void> {
    await this.db.query(RECORD_BREAKER, [leaseName, state, holderId.slice(0, 128), state === 'open' ? Math.max(0, openForMs) : 0]);
  }

  async recordProviderPause(leaseName: string, pauseMs: number, holderId: string): Promise<void> {
    await this.db.query(RECORD_PAUSE, [leaseName, holderId.slice(0, 128), Math.max(0, pauseMs)]);
  }

  async getProviderHold(leaseName: string): Promise<ProviderHold | null> {
    const r = await this.db.query<ProviderHoldDbRow>(GET_HOLD, [leaseName]);
    return r.rows[0] ? toProviderHold(r.rows[0]) : null;
  }

  async recordMaintenance(leaseName: string, task: string, holderId: string, failures: number, lastError: string | null): Promise<void> {
    const a = maintenanceArgs(holderId, lastError);
    await this.db.query(RECORD_MAINTENANCE, [leaseName, task, failures, a.error, a.holder]);
  }

  async listMaintenance(leaseName: string): Promise<MaintenanceRecord[]> {
    const r = await this.db.query<MaintenanceDbRow>(
      'SELECT task, failures, last_error, changed_at, holder_id FROM submission_manager_maintenance_state WHERE lease_name = $1 ORDER BY task', [leaseName]);
    return r.rows.map(toMaintenance);
  }

  async getClusterOverview(leaseName: string): Promise<ClusterOverview> {
    const r = await this.db.query<OverviewDbRow>(OVERVIEW, [leaseName]);
    return toOverview(leaseName, r.rows[0]!);
  }

  async getExecutionControl(leaseName: string, clusterName: string | null = null): Promise<ExecutionControl> {
    const r = await this.db.query<ControlDbRow>(GET, [leaseName, clusterName]);
    return toControl(leaseName, r.rows[0]!, clusterName);
  }

  async setPaused(leaseName: string, paused: boolean, changedBy: string, reason: string | null): Promise<ExecutionControl> {
    await this.db.query(SET, [leaseName, paused, changedBy.slice(0, 128), reason === null ? null : reason.slice(0, 500)]);
    return this.getExecutionControl(leaseName);
  }

  fencedPurgeTerminal(token: LeaseToken, partition: number, olderThanMs: number, limit: number, timeoutMs?: number): Promise<Fenced<PurgeResult>> {
    return fencedTransaction(this.db, token, 'purge_retention', async (tx) => {
      const r = await tx.query<{ intents: number; attempts: number }>(PURGE, [Math.max(0, Math.round(olderThanMs)), limit, partition]);
      const value = { intents: Number(r.rows[0]?.intents ?? 0), attempts: Number(r.rows[0]?.attempts ?? 0) };
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
