// PostgreSQL ExecutionStore: the leader's reads (rebuild, refresh) and its fenced writes. Start and complete
// are one statement each (fence CTE locking the lease row FOR SHARE + the batched write + the audit row);
// orphan recovery is a fenced transaction (fence.ts).
// A leading `/* sm:<kind> */` names a write on the wire (pg_stat_activity; the chaos proxy loses its reply).
// last_modified_at is always strictly newer than the previous value (PGlite's clock ticks per millisecond), so
// "newer state wins" in the schedule can rely on it.
// Partitions: one store per executor partition; every read and write names its partition_no (the last
// parameter of each statement), so a partition's store never reads or changes another partition's intents.
import type {
  AttemptCompletion, CompletedAttempt, ExecutionStore, RefreshCursor, RefreshPage, ScheduleRow, StartHold, StartOutcome,
  StartRequest,
} from '../intentPorts.js';
import { clusterControlName, leaseBaseName } from '../../limits.js';
import type { Fenced, LeaseToken } from '../ports.js';
import type { PgDatabase } from './db.js';
import { FENCE_CTE, auditCte, fencedStatement, fencedTransaction } from './fence.js';
import {
  BUDGET, NIL_UUID, nextModified, SCHEDULE_COLS, SCHEDULED_ONLY_COLS, toCompletedAttempt, toScheduleRow, toStartedAttempt, utcText,
  type CompletedDbRow, type ScheduleDbRow, type StartedDbRow,
} from './rows.js';


// The cursor is cast back from database text server-side: no JS Date (millisecond) ever touches it.
const REFRESH = `
SELECT n.t AS db_now, i.*
  FROM (SELECT clock_timestamp() AS t) n
  LEFT JOIN LATERAL (
    SELECT ${SCHEDULE_COLS}, last_modified_at < n.t - $4 * interval '1 millisecond' AS settled
      FROM submission_intents
     WHERE partition_no = $5 AND (last_modified_at, intent_id) > ($1::timestamp AT TIME ZONE 'UTC', $2::uuid)
     ORDER BY last_modified_at, intent_id
     LIMIT $3
  ) i ON true`;

const RECOVER_ORPHANS = `/* sm:orphans */
WITH now AS MATERIALIZED (SELECT clock_timestamp() AS t),
orphan AS (
  SELECT a.intent_id, a.attempt_no, a.lease_epoch
    FROM submission_intents i
    JOIN submission_attempts a ON a.intent_id = i.intent_id AND a.attempt_no = i.attempt_count
   WHERE i.partition_no = $2 AND i.status = 'in_flight' AND a.outcome = 'started' AND a.lease_epoch < $1
),
-- Attempts of older epochs left 'started' on intents that moved on meanwhile (cancelled while the call was
-- in flight, then the leader died): closed too, so the attempt log never keeps a 'started' row forever.
settled AS (
  UPDATE submission_attempts a
     SET outcome = 'abandoned', finished_at = now.t,
         error = 'abandoned: leader epoch ' || a.lease_epoch || ' lost its lease before completing the attempt; it may have been sent'
    FROM submission_intents i, now
   WHERE a.intent_id = i.intent_id AND i.partition_no = $2 AND a.outcome = 'started' AND a.lease_epoch < $1 AND i.status <> 'in_flight'
  RETURNING a.intent_id
),
abandoned AS (
  UPDATE submission_attempts a
     SET outcome = 'abandoned', finished_at = now.t,
         error = 'abandoned: leader epoch ' || o.lease_epoch || ' lost its lease before completing the attempt; it may have been sent'
    FROM orphan o, now
   WHERE a.intent_id = o.intent_id AND a.attempt_no = o.attempt_no AND a.outcome = 'started'
  RETURNING a.intent_id
),
recovered AS (
UPDATE submission_intents i
   SET status = CASE WHEN ${BUDGET.exhausted('i')} THEN 'failed' ELSE 'scheduled' END,
       next_attempt_at = now.t, last_modified_at = ${nextModified('i.last_modified_at', 'now.t')}, last_epoch = $1,
       last_error = 'attempt ' || i.attempt_count || ' abandoned after a leader change; it may have been sent' ||
                    CASE WHEN ${BUDGET.exhausted('i')} THEN '; attempts exhausted' ELSE '' END
  FROM orphan o, now
 WHERE i.intent_id = o.intent_id AND i.status = 'in_flight'
RETURNING i.intent_id
)
-- Both kinds are writes of this epoch: the settled ones alone still leave an audit row.
SELECT (SELECT count(*) FROM recovered)::int AS recovered, (SELECT count(*) FROM settled)::int AS settled`;

/** A rebuild page: an index-only range scan of ix_intents_partition_scheduled (010; 006 before) once the
 *  visibility map is set. */
export const LOAD_SCHEDULED = `SELECT ${SCHEDULED_ONLY_COLS} FROM submission_intents
  WHERE partition_no = $3 AND status = 'scheduled' AND intent_id > $1::uuid ORDER BY intent_id LIMIT $2`;

// Optimistic predicate per intent (still scheduled, same attempt_count, due in database time, within the attempt budget).
// Plan: driven by the requests (unnest, its row count known from the arrays), each intent one primary-key probe on its
// only key `i.intent_id = req.intent_id`: O(batch) whatever the statistics (no `= ANY($4)` beside it: the planner then
// reads the intents first and rescans the requests per intent, batch² rows). The status and due tests are written `(…) IS TRUE`
// (the same result in a WHERE clause) so the planner cannot scan ix_intents_status_partition_due instead (nor, for the
// partition test, a whole partition of ix_intents_partition_modified): without fresh
// statistics (right after a burst of intents) it otherwise read every due entry of that index per batch.
// The hold ($7: the cluster's control row): the leader's own rules (ExecutionOps: a pending handover request for the
// lease drains it; the partition's or the cluster's pause holds it), read by this statement's snapshot, taken as it
// begins: a START that waited for a connection starts nothing once a pause or a drain committed before it began (a
// lock wait inside it, on the lease row behind a renew or on an intent row, comes after that snapshot).
const START = `/* sm:start */
WITH ${FENCE_CTE},
now AS MATERIALIZED (SELECT clock_timestamp() AS t),
hold AS MATERIALIZED (
  SELECT CASE WHEN EXISTS (SELECT 1 FROM submission_manager_handover_requests h WHERE h.lease_name = $1 AND h.status = 'pending')
              THEN 'draining'
              WHEN EXISTS (SELECT 1 FROM submission_manager_execution_control c WHERE c.lease_name IN ($1, $7::varchar) AND c.paused)
              THEN 'paused' END AS by),
req AS (SELECT * FROM unnest($4::uuid[], $5::int[]) AS r(intent_id, expected)),
started AS (
  UPDATE submission_intents i
     SET status = 'in_flight', attempt_count = i.attempt_count + 1,
         last_modified_at = ${nextModified('i.last_modified_at', 'now.t')}, last_epoch = $3
    FROM req, now, fence, hold
   WHERE hold.by IS NULL AND i.intent_id = req.intent_id AND i.attempt_count = req.expected AND (i.status = 'scheduled') IS TRUE
     AND (i.next_attempt_at <= now.t) IS TRUE AND (i.partition_no = $6) IS TRUE
     AND ${BUDGET.mayStart('i')}
  RETURNING i.intent_id, i.attempt_count, i.max_attempts, i.contract, ${utcText('i.last_modified_at')} AS version,
            ${BUDGET.abortedBefore('i.attempt_count', 'i.intent_id')} AS aborted_before
),
ins AS (
  INSERT INTO submission_attempts (intent_id, attempt_no, lease_epoch, holder_id, started_at, outcome)
  SELECT intent_id, attempt_count, $3, $2, (SELECT t FROM now), 'started' FROM started
),
${auditCte('start_attempts', 'SELECT count(*) FROM started')}
SELECT f.fenced, s.*, hold.by AS held FROM (SELECT count(*)::int AS fenced FROM fence) f CROSS JOIN hold LEFT JOIN started s ON true`;

// The attempt row is closed (outcome set once); the intent moves on only if it did not change meanwhile and this
// statement closed its attempt (an aborted record of a START whose reply was lost names an attempt that may never
// have been created: the same attempt number started later by another epoch is not ours to move on).
// Plan: each intent by one primary-key probe per completion, `i.intent_id = c.intent_id` its only key (not the in_flight
// range of ix_intents_status_partition_due, which holds an entry for every attempt started since the last vacuum; nor an
// `= ANY($4)` beside it: costed as a descent per array element per probe, it made a full read of an index holding intent_id
// second look cheaper, once per completion, without statistics or for batches of thousands). Attempts by their primary
// key, one probe per (intent_id, attempt_no) of the batch (the redundant `IN (unnest …)` makes that the obvious plan;
// without it, and without statistics, the planner scanned the whole table or every dead entry of ix_attempts_started).
// Only attempts of this partition's intents ($13) are closed: the intent's partition is a scalar subquery per closed
// attempt (never flattened into a join, so always a primary-key probe: as a join or a CTE, a plan without statistics
// scanned the table or a whole partition-first index per batch); the intent update tests it `(…) IS TRUE`, as its status.
const COMPLETE = `/* sm:complete */
WITH ${FENCE_CTE},
now AS MATERIALIZED (SELECT clock_timestamp() AS t),
c AS (SELECT * FROM unnest($4::uuid[], $5::int[], $6::text[], $7::int[], $8::text[], $9::int[], $10::text[], $11::int8[], $12::int8[])
        AS c(intent_id, attempt_no, outcome, http_status, error, duration_ms, next_status, delay_ms, attempt_epoch)),
att AS (
  UPDATE submission_attempts a
     SET outcome = c.outcome, finished_at = now.t, http_status = c.http_status, error = c.error, duration_ms = c.duration_ms
    FROM c, now, fence
   WHERE (a.intent_id, a.attempt_no) IN (SELECT * FROM unnest($4::uuid[], $5::int[]))
     AND a.intent_id = c.intent_id AND a.attempt_no = c.attempt_no AND (a.outcome = 'started') IS TRUE
     AND a.lease_epoch = c.attempt_epoch AND c.attempt_epoch <= $3 AND a.holder_id = $2
     AND (SELECT pi.partition_no FROM submission_intents pi WHERE pi.intent_id = a.intent_id) = $13
  RETURNING a.intent_id, a.attempt_no
),
upd AS (
  UPDATE submission_intents i
     SET status = c.next_status,
         next_attempt_at = CASE WHEN c.next_status = 'scheduled' THEN now.t + c.delay_ms * interval '1 millisecond' ELSE i.next_attempt_at END,
         last_error = CASE WHEN c.outcome = 'succeeded' THEN NULL ELSE c.error END,
         last_modified_at = ${nextModified('i.last_modified_at', 'now.t')}, last_epoch = $3
    FROM c, now, fence
   WHERE i.intent_id = c.intent_id AND (i.status = 'in_flight') IS TRUE AND i.attempt_count = c.attempt_no
     AND (i.partition_no = $13) IS TRUE
     AND EXISTS (SELECT 1 FROM att WHERE att.intent_id = c.intent_id AND att.attempt_no = c.attempt_no)
  RETURNING i.intent_id, i.status, i.next_attempt_at, i.attempt_count, i.max_attempts, ${utcText('i.last_modified_at')} AS version
),
${auditCte('complete_attempts', 'SELECT (SELECT count(*) FROM att) + (SELECT count(*) FROM upd)')}
SELECT f.fenced, c.intent_id AS req_id, upd.*
  FROM (SELECT count(*)::int AS fenced FROM fence) f
  CROSS JOIN c LEFT JOIN upd ON upd.intent_id = c.intent_id`;

export class PgExecutionStore implements ExecutionStore {
  /** `partition`: the executor partition this store reads and writes (0 with EXECUTOR_PARTITIONS = 1). */
  constructor(private readonly db: PgDatabase, private readonly partition = 0) {}

  async rebuildStart(commitGraceMs: number): Promise<{ dbNow: Date; cursor: RefreshCursor }> {
    const r = await this.db.query<{ db_now: Date; cursor: string }>(
      `SELECT n.t AS db_now, ${utcText(`n.t - $1 * interval '1 millisecond'`)} AS cursor
         FROM (SELECT clock_timestamp() AS t) n`, [commitGraceMs]);
    const row = r.rows[0]!;
    return { dbNow: row.db_now, cursor: { modifiedAt: row.cursor, intentId: NIL_UUID } };
  }

  async loadScheduled(afterId: string | null, limit: number): Promise<ScheduleRow[]> {
    const r = await this.db.query<ScheduleDbRow>(LOAD_SCHEDULED, [afterId ?? NIL_UUID, limit, this.partition]);
    return r.rows.map(toScheduleRow);
  }

  async refreshPage(cursor: RefreshCursor, limit: number, commitGraceMs: number): Promise<RefreshPage> {
    const r = await this.db.query<ScheduleDbRow & { db_now: Date; settled: boolean | null }>(
      REFRESH, [cursor.modifiedAt, cursor.intentId, limit, commitGraceMs, this.partition]);
    const rows = r.rows.filter((x) => x.intent_id !== null).map((x) => ({ ...toScheduleRow(x), settled: x.settled === true }));
    return { rows, dbNow: r.rows[0]!.db_now };
  }

  fencedRecoverOrphans(token: LeaseToken): Promise<Fenced<{ recovered: number }>> {
    return fencedTransaction(this.db, token, 'recover_orphans', async (tx) => {
      const r = await tx.query<{ recovered: number; settled: number }>(RECOVER_ORPHANS, [token.leaseEpoch, this.partition]);
      const { recovered, settled } = r.rows[0]!;
      return { value: { recovered }, rowsWritten: recovered + settled };
    });
  }

  // One statement each (fence + write + audit): one round trip and one commit per batch.
  async fencedStartAttempts(token: LeaseToken, requests: StartRequest[]): Promise<StartOutcome> {
    const out = await fencedStatement<StartedDbRow & { held: StartHold | null }>(this.db, token, START, [
      requests.map((q) => q.intentId), requests.map((q) => q.expectedAttemptCount), this.partition,
      clusterControlName(leaseBaseName(token.leaseName, this.partition))]);
    if (out.kind === 'leaseLost') return out;
    const held = out.value[0]?.held ?? null;
    if (held !== null) return { kind: 'held', by: held };
    // The LEFT JOIN yields one all-null row when nothing started (the fence row is always there).
    return { kind: 'ok', value: out.value.filter((x) => x.intent_id !== null).map(toStartedAttempt) };
  }

  async fencedCompleteAttempts(token: LeaseToken, completions: AttemptCompletion[]): Promise<Fenced<CompletedAttempt[]>> {
    if (completions.length === 0) return { kind: 'ok', value: [] };
    const out = await fencedStatement<CompletedDbRow>(this.db, token, COMPLETE, [
      completions.map((c) => c.intentId),
      completions.map((c) => c.attemptNo),
      completions.map((c) => c.outcome),
      completions.map((c) => c.httpStatus),
      completions.map((c) => c.error),
      completions.map((c) => Math.round(c.durationMs)),
      completions.map((c) => c.next.status),
      completions.map((c) => (c.next.status === 'scheduled' ? Math.round(c.next.retryDelayMs) : null)),
      completions.map((c) => c.attemptEpoch ?? token.leaseEpoch),
      this.partition,
    ]);
    if (out.kind === 'leaseLost') return out;
    return { kind: 'ok', value: out.value.map(toCompletedAttempt) };
  }
}

