// MySQL / MariaDB ExecutionStore: the leader's reads (rebuild, refresh) and its fenced writes. MySQL has no
// data-modifying CTEs and no UPDATE … RETURNING, so each fenced write is one short transaction (fence.ts): the
// rows it will change are read FOR UPDATE first (the decision), changed by primary key, and read back. A start and
// a completion are two round trips (fencedBatch): the fence and the locking reads, then the writes, the read-back,
// the audit row and COMMIT; so every read that decides is a locking read sent before any write. Batches
// travel as one JSON parameter read with JSON_TABLE (wrapped in a derived table: MariaDB cannot join a table
// function in a multi-table UPDATE), plus a redundant `intent_id IN (…)` so each batch is found by primary key.
// Intents are locked in id order, as the redrive and the changer lock them (no deadlock between them): the batch's
// JSON rows and id lists are sorted by id, and intents are read by primary key (FORCE INDEX), so whichever of the
// two the join reads first, rows are locked in id order. Every locking read is guarded by the lease row (HELD).
// last_modified_at is always strictly newer than the previous value, so "newer state wins" in the schedule.
// Partitions: one store per executor partition; every read and write names its partition_no, so a
// partition's store never reads or changes another partition's intents or their attempts.
import type {
  AttemptCompletion, CompletedAttempt, ExecutionStore, RefreshCursor, RefreshPage, ScheduleRow, StartHold, StartOutcome,
  StartRequest,
} from '../intentPorts.js';
import { clusterControlName, leaseBaseName } from '../../limits.js';
import type { Fenced, LeaseToken } from '../ports.js';
import type { MyDatabase, MyQueryable, Row } from './db.js';
import { HELD, fencedBatch, fencedTransaction, heldParams } from './fence.js';
import {
  BUDGET, NEXT_MODIFIED, NIL_UUID, NOW, idParam, minusMs, plusMs, scheduleCols, toCompletedAttempt, toScheduleRow,
  toStartedAttempt, utcText, type CompletedDbRow, type ScheduleDbRow, type StartedDbRow,
} from './rows.js';

const ID = 'CHAR(36) CHARACTER SET ascii COLLATE ascii_bin';

/** Intent ids (idParam) in the database's order (binary collation: code-unit order). */
const byId = (a: string, b: string) => (a < b ? -1 : a > b ? 1 : 0);

/** A JSON array parameter as rows (`cols`: JSON_TABLE column definitions). */
const jsonRows = (cols: string) => `(SELECT * FROM JSON_TABLE(?, '$[*]' COLUMNS (${cols})) AS jt)`;

const START_REQ = jsonRows(`intent_id ${ID} PATH '$.id', expected INT PATH '$.expected'`);
const COMPLETION = jsonRows(`ord INT PATH '$.ord', intent_id ${ID} PATH '$.id', attempt_no INT PATH '$.attemptNo',
  outcome VARCHAR(16) PATH '$.outcome', http_status INT PATH '$.httpStatus', error LONGTEXT PATH '$.error',
  duration_ms INT PATH '$.durationMs', next_status VARCHAR(16) PATH '$.nextStatus', delay_ms BIGINT PATH '$.delayMs',
  attempt_epoch BIGINT PATH '$.attemptEpoch'`);

// Rows of the partition after (t, id) in (last_modified_at, intent_id) order, served by the partition-first
// ix_intents_partition_modified (005: partition_no, last_modified_at, intent_id; forced: on (partition_no) alone
// MariaDB may prefer the covering ix_intents_partition_scheduled and sort the whole partition); db_now comes with
// them (also when none follows). The cursor is cast back from database text server-side (no JS Date).
export const REFRESH = `
SELECT n.t AS db_now, p.* FROM (SELECT ${NOW} AS t) AS n LEFT JOIN (
  SELECT ${scheduleCols()}, last_modified_at AS modified, last_modified_at < ${minusMs(NOW, '?')} AS settled
    FROM submission_intents FORCE INDEX (ix_intents_partition_modified)
   WHERE partition_no = ?
     AND (last_modified_at > CAST(? AS DATETIME(6)) OR (last_modified_at = CAST(? AS DATETIME(6)) AND intent_id > ?))
   ORDER BY last_modified_at, intent_id
   LIMIT ?) AS p ON 1 = 1
 ORDER BY p.modified, p.intent_id`;

const LOAD_SCHEDULED = `SELECT ${scheduleCols()} FROM submission_intents
  WHERE partition_no = ? AND status = 'scheduled' AND intent_id > ? ORDER BY intent_id LIMIT ?`;

const ORPHANS = `
SELECT a.intent_id, a.attempt_no FROM submission_intents AS i
  JOIN submission_attempts AS a ON a.intent_id = i.intent_id AND a.attempt_no = i.attempt_count
 WHERE i.partition_no = ? AND i.status = 'in_flight' AND a.outcome = 'started' AND a.lease_epoch < ?
 FOR UPDATE`;

const abandonedError = (epoch: string) =>
  `CONCAT('abandoned: leader epoch ', ${epoch}, ' lost its lease before completing the attempt; it may have been sent')`;

// Attempts of older epochs left 'started' on intents that moved on meanwhile (cancelled while the call was in
// flight, then the leader died): closed too, so the attempt log never keeps a 'started' row forever.
const CLOSE_SETTLED = `
UPDATE submission_attempts AS a JOIN submission_intents AS i ON i.intent_id = a.intent_id
   SET a.outcome = 'abandoned', a.finished_at = ${NOW}, a.error = ${abandonedError('a.lease_epoch')}
 WHERE i.partition_no = ? AND a.outcome = 'started' AND a.lease_epoch < ? AND i.status <> 'in_flight'`;

const CLOSE_ORPHANS = `
UPDATE submission_attempts SET outcome = 'abandoned', finished_at = ${NOW}, error = ${abandonedError('lease_epoch')}
 WHERE (intent_id, attempt_no) IN (?) AND outcome = 'started'`;

const RESCHEDULE_ORPHANS = `
UPDATE submission_intents AS i
   SET i.status = CASE WHEN ${BUDGET.exhausted('i')} THEN 'failed' ELSE 'scheduled' END,
       i.next_attempt_at = ${NOW}, i.last_modified_at = ${NEXT_MODIFIED('i.last_modified_at')}, i.last_epoch = ?,
       i.last_error = CONCAT('attempt ', i.attempt_count, ' abandoned after a leader change; it may have been sent',
                             CASE WHEN ${BUDGET.exhausted('i')} THEN '; attempts exhausted' ELSE '' END)
 WHERE i.intent_id IN (?) AND i.status = 'in_flight'`;

// The hold (params: the lease name twice, the cluster's control name): the leader's own rules (ExecutionOps: a pending
// handover request for the lease drains it; the partition's or the cluster's pause holds it), read as the START runs
// (plain reads: a subquery of a locking read locks nothing, READ COMMITTED sees the latest commit). Judged in both round
// trips: at the pick (nothing held is picked; HOLD_READ, after it, says which) and again in the commit trip (@sm_start_hold, set
// by its first statement; the writes, the read-back and the audit row test it), so neither a connection wait before
// the START nor the client hop between its trips lets it start after a pause or a drain committed before that trip.
const HOLD = `CASE WHEN EXISTS (SELECT 1 FROM submission_manager_handover_requests AS h WHERE h.pending_lease = ?) THEN 'draining'
  WHEN EXISTS (SELECT 1 FROM submission_manager_execution_control AS c WHERE c.lease_name IN (?, ?) AND c.paused) THEN 'paused' END`;
const HOLD_READ = `SELECT ${HOLD} AS held FROM DUAL WHERE ${HELD}`;
const HOLD_SET = `SET @sm_start_hold = ${HOLD}`;
const NOT_HELD = '@sm_start_hold IS NULL';
const HOLD_NOW = 'SELECT @sm_start_hold AS held';

// Optimistic predicate per intent (still scheduled, same attempt_count, due in database time, within the budget).
const START_PICK = `
SELECT i.intent_id FROM submission_intents AS i FORCE INDEX (PRIMARY) JOIN ${START_REQ} AS r ON i.intent_id = r.intent_id
 WHERE i.intent_id IN (?) AND i.attempt_count = r.expected AND i.status = 'scheduled' AND i.next_attempt_at <= ${NOW}
   AND i.partition_no = ? AND ${BUDGET.mayStart('i')} AND (${HOLD}) IS NULL AND ${HELD}
 ORDER BY i.intent_id
 FOR UPDATE`;

const START_UPDATE = `
UPDATE submission_intents SET status = 'in_flight', attempt_count = attempt_count + 1,
       last_modified_at = ${NEXT_MODIFIED()}, last_epoch = ?
 WHERE intent_id IN (?) AND ${NOT_HELD}`;

const START_ATTEMPTS = `
INSERT INTO submission_attempts (intent_id, attempt_no, lease_epoch, holder_id, started_at, outcome)
SELECT intent_id, attempt_count, ?, ?, ${NOW}, 'started' FROM submission_intents WHERE intent_id IN (?) AND ${NOT_HELD}`;

const STARTED = `
SELECT i.intent_id, i.attempt_count, i.max_attempts, i.contract, ${utcText('i.last_modified_at')} AS version,
       ${BUDGET.abortedBefore('i.attempt_count', 'i.intent_id')} AS aborted_before
  FROM submission_intents AS i WHERE i.intent_id IN (?) AND ${NOT_HELD}`;

// The attempt row is closed (outcome set once, by its own holder, under its own or a later epoch of that holder):
// picked (locked) first, so the intents below move on only where this transaction closed the attempt (an aborted
// record of a START whose reply was lost may name an attempt number another epoch started). Only attempts of this
// partition's intents (MINE: the intent's partition_no, read by primary key). CLOSE_ATTEMPTS changes the picked
// rows only (`ids` = those CLOSE_PICK found, all locked here: each is found, and each changes).
const MINE = 'EXISTS (SELECT 1 FROM submission_intents AS pi WHERE pi.intent_id = a.intent_id AND pi.partition_no = ?)';
const CLOSE_PICK = `
SELECT a.intent_id, a.attempt_no FROM submission_attempts AS a FORCE INDEX (PRIMARY)
  JOIN ${COMPLETION} AS c ON a.intent_id = c.intent_id AND a.attempt_no = c.attempt_no
 WHERE a.intent_id IN (?) AND a.outcome = 'started' AND a.lease_epoch = c.attempt_epoch AND c.attempt_epoch <= ? AND a.holder_id = ?
   AND ${MINE} AND ${HELD}
 ORDER BY a.intent_id, a.attempt_no
 FOR UPDATE`;

const CLOSE_ATTEMPTS = `
UPDATE submission_attempts AS a JOIN ${COMPLETION} AS c ON a.intent_id = c.intent_id AND a.attempt_no = c.attempt_no
   SET a.outcome = c.outcome, a.finished_at = ${NOW}, a.http_status = c.http_status, a.error = c.error, a.duration_ms = c.duration_ms
 WHERE a.intent_id IN (?) AND a.outcome = 'started' AND a.lease_epoch = c.attempt_epoch AND c.attempt_epoch <= ? AND a.holder_id = ?
   AND ${MINE}`;

// A completion first locks every intent of its batch, in id order (as a start and the redrive lock them), so its
// attempt rows are read only once no other transaction holds one of these intents: a start whose reply was lost, its
// writes arriving late, has committed or rolled back by then, and its aborted record finds the attempt it started.
const LOCK_INTENTS = `SELECT intent_id FROM submission_intents FORCE INDEX (PRIMARY)
 WHERE intent_id IN (?) AND partition_no = ? AND ${HELD} ORDER BY intent_id FOR UPDATE`;

// The intent moves on only if it did not change meanwhile (still in flight with this attempt) and that attempt is
// closed here: the caller keeps the (intent, attempt) pairs CLOSE_PICK found, and COMPLETE_UPDATE applies the
// completion of the intent's current attempt only.
const COMPLETE_PICK = `
SELECT i.intent_id, i.attempt_count AS attempt_no FROM submission_intents AS i FORCE INDEX (PRIMARY)
  JOIN ${COMPLETION} AS c ON i.intent_id = c.intent_id
 WHERE i.intent_id IN (?) AND i.status = 'in_flight' AND i.attempt_count = c.attempt_no AND ${HELD}
 ORDER BY i.intent_id
 FOR UPDATE`;

const COMPLETE_UPDATE = `
UPDATE submission_intents AS i JOIN ${COMPLETION} AS c ON i.intent_id = c.intent_id AND c.attempt_no = i.attempt_count
   SET i.status = c.next_status,
       i.next_attempt_at = CASE WHEN c.next_status = 'scheduled' THEN ${plusMs(NOW, 'c.delay_ms')} ELSE i.next_attempt_at END,
       i.last_error = CASE WHEN c.outcome = 'succeeded' THEN NULL ELSE c.error END,
       i.last_modified_at = ${NEXT_MODIFIED('i.last_modified_at')}, i.last_epoch = ?
 WHERE i.intent_id IN (?)`;

const SCHEDULE_ROWS = `SELECT ${scheduleCols()} FROM submission_intents WHERE intent_id IN (?)`;

export class MysqlExecutionStore implements ExecutionStore {
  /** `partition`: the executor partition this store reads and writes (0 with EXECUTOR_PARTITIONS = 1). */
  constructor(private readonly db: MyDatabase, private readonly partition = 0) {}

  async rebuildStart(commitGraceMs: number): Promise<{ dbNow: Date; cursor: RefreshCursor }> {
    const r = await this.db.query<{ db_now: Date; cursor_text: string }>(
      `SELECT ${NOW} AS db_now, ${utcText(minusMs(NOW, '?'))} AS cursor_text`, [commitGraceMs]);
    const row = r.rows[0]!;
    return { dbNow: row.db_now, cursor: { modifiedAt: row.cursor_text, intentId: NIL_UUID } };
  }

  async loadScheduled(afterId: string | null, limit: number): Promise<ScheduleRow[]> {
    const r = await this.db.query<ScheduleDbRow>(LOAD_SCHEDULED, [this.partition, idParam(afterId ?? NIL_UUID), limit]);
    return r.rows.map(toScheduleRow);
  }

  async refreshPage(cursor: RefreshCursor, limit: number, commitGraceMs: number): Promise<RefreshPage> {
    const r = await this.db.query<ScheduleDbRow & { db_now: Date; settled: number | null }>(REFRESH,
      [commitGraceMs, this.partition, cursor.modifiedAt, cursor.modifiedAt, idParam(cursor.intentId), limit]);
    const rows = r.rows.filter((x) => x.intent_id !== null).map((x) => ({ ...toScheduleRow(x), settled: Number(x.settled) === 1 }));
    return { rows, dbNow: r.rows[0]!.db_now };
  }

  fencedRecoverOrphans(token: LeaseToken): Promise<Fenced<{ recovered: number }>> {
    return fencedTransaction(this.db, token, 'recover_orphans', async (tx) => {
      const orphans = (await tx.query<{ intent_id: string; attempt_no: number }>(ORPHANS, [this.partition, token.leaseEpoch])).rows;
      // Attempts closed on intents that moved on are writes of this epoch too: alone they still leave an audit row.
      const settled = (await tx.query(CLOSE_SETTLED, [this.partition, token.leaseEpoch])).affectedRows;
      if (orphans.length === 0) return { value: { recovered: 0 }, rowsWritten: settled };
      await tx.query(CLOSE_ORPHANS, [orphans.map((o) => [o.intent_id, o.attempt_no])]);
      await tx.query(RESCHEDULE_ORPHANS, [token.leaseEpoch, orphans.map((o) => o.intent_id)]);
      return { value: { recovered: orphans.length }, rowsWritten: orphans.length + settled };
    });
  }

  async fencedStartAttempts(token: LeaseToken, requests: StartRequest[]): Promise<StartOutcome> {
    const sorted = requests.map((q) => ({ id: idParam(q.intentId), expected: q.expectedAttemptCount })).sort((a, b) => byId(a.id, b.id));
    const ids = sorted.map((q) => q.id);
    const hold = [token.leaseName, token.leaseName, clusterControlName(leaseBaseName(token.leaseName, this.partition))];
    const held = heldParams(token);
    const out = await fencedBatch(this.db, token, 'start_attempts', {
      reads: [
        ...(ids.length === 0 ? [] : [{ text: START_PICK, params: [JSON.stringify(sorted), ids, this.partition, ...hold, ...held] }]),
        { text: HOLD_READ, params: [...hold, ...held] },
      ],
      decide: (rows) => {
        const pick = ids.length === 0 ? [] : rows[0]!;
        const holdRows = rows.at(-1);
        const picked = pick.map((r) => r.intent_id as string);
        if (picked.length === 0) {
          // Nothing picked: 'held' when the HOLD_READ after the pick finds a hold (a pick held finds nothing).
          const by = (holdRows?.[0]?.held ?? null) as StartHold | null;
          return { writes: [], rowsWritten: 0, value: (): StartOutcome => (by === null ? { kind: 'ok', value: [] } : { kind: 'held', by }) };
        }
        return {
          writes: [
            { text: HOLD_SET, params: hold },
            { text: START_UPDATE, params: [token.leaseEpoch, picked] },
            { text: START_ATTEMPTS, params: [token.leaseEpoch, token.holderId, picked] },
            { text: STARTED, params: [picked] },
            { text: HOLD_NOW },
          ],
          rowsWritten: picked.length, // each picked row is locked here: each one starts, unless held in this trip
          writesIf: NOT_HELD,
          value: (results): StartOutcome => {
            const by = (results[4]!.rows[0]?.held ?? null) as StartHold | null;
            if (by !== null) return { kind: 'held', by };
            return { kind: 'ok', value: (results[3]!.rows as unknown as StartedDbRow[]).map(toStartedAttempt) };
          },
        };
      },
    });
    return out.kind === 'leaseLost' ? out : out.value;
  }

  async fencedCompleteAttempts(token: LeaseToken, completions: AttemptCompletion[]): Promise<Fenced<CompletedAttempt[]>> {
    if (completions.length === 0) return { kind: 'ok', value: [] };
    const reqIds = completions.map((c) => idParam(c.intentId));
    const rows = completions.map((c, ord) => ({
      ord, id: reqIds[ord]!, attemptNo: c.attemptNo, outcome: c.outcome, httpStatus: c.httpStatus, error: c.error,
      durationMs: Math.round(c.durationMs), nextStatus: c.next.status,
      delayMs: c.next.status === 'scheduled' ? Math.round(c.next.retryDelayMs) : null, attemptEpoch: c.attemptEpoch ?? token.leaseEpoch,
    })).sort((a, b) => byId(a.id, b.id) || a.attemptNo - b.attemptNo);
    const batch = JSON.stringify(rows);
    const ids = [...new Set(rows.map((r) => r.id))];
    const fence = [token.leaseEpoch, token.holderId];
    const held = heldParams(token);
    const pair = (r: Row) => `${r.intent_id as string}/${Number(r.attempt_no)}`;
    return fencedBatch(this.db, token, 'complete_attempts', {
      reads: [
        { text: LOCK_INTENTS, params: [ids, this.partition, ...held] },
        { text: CLOSE_PICK, params: [batch, ids, ...fence, this.partition, ...held] },
        { text: COMPLETE_PICK, params: [batch, ids, ...held] },
      ],
      decide: ([, closePick, completePick]) => {
        const closes = new Set(closePick!.map(pair));
        const closing = [...new Set(closePick!.map((r) => r.intent_id as string))];
        const picked = [...new Set(completePick!.filter((r) => closes.has(pair(r))).map((r) => r.intent_id as string))];
        const writes = [
          ...(closing.length === 0 ? [] : [{ text: CLOSE_ATTEMPTS, params: [batch, closing, ...fence, this.partition] }]),
          ...(picked.length === 0 ? [] : [
            { text: COMPLETE_UPDATE, params: [batch, token.leaseEpoch, picked] },
            { text: SCHEDULE_ROWS, params: [picked] },
          ]),
        ];
        return {
          writes,
          // Rows of both UPDATEs, for the audit only: every picked attempt and intent is locked here, so each one changes.
          rowsWritten: closes.size + picked.length,
          value: (results) => {
            const after = new Map((picked.length === 0 ? [] : results.at(-1)!.rows as unknown as ScheduleDbRow[]).map((r) => [r.intent_id, r]));
            return reqIds.map((id) => toCompletedAttempt({ req_id: id, ...(after.get(id) ?? {}) } as CompletedDbRow));
          },
        };
      },
    });
  }
}
