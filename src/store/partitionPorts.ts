// Partition port (issues 25, 26): the partition count the database records, one row per database (partitions divide
// its intents table), and changes of that count. Every dialect implements it (postgres/, mssql/, mysql/
// partitionStore.ts); test/store/partitionContract.test.ts and partitionChangeContract.test.ts run the same cases on
// each. Same rules as ports.ts: database time only; ordinary outcomes are values; failures throw StoreError.
import type { Fenced, LeaseToken } from './ports.js';

/** Width of submission_intents.partition_key in characters (Unicode code points, as PostgreSQL's and MySQL's varchar
 *  and JSON Schema's maxLength count them). SQL Server's nvarchar counts UTF-16 code units: its column is twice as wide. */
export const PARTITION_KEY_MAX_LENGTH = 128;

/** Whether a change's switch excludes inserts that read the old count (switchCount). */
export type InsertExclusion = 'excluded' | 'unexcluded';

/** The recorded partition count. Only a change's fenced switch (switchCount) changes `count` after it is recorded. */
export interface PartitionCount {
  count: number;
  /** Database time when it was recorded. */
  recordedAt: Date;
  /** Who recorded it: the holder id of the first process that started on this database, `migration` when the
   *  partitions migration found intents already there (they are all partition 0, so the count is 1), or the changer
   *  of the change that switched it. */
  recordedBy: string;
}

/** A change's steps, in order (issue 26). Roll forward only: once requested, a change completes. */
export type PartitionChangeState =
  /** Recorded; execution goes on; the changer moves the FINISHED intents (succeeded, cancelled: never open again;
   *  not failed, which a redrive reopens) that settled before the horizon (requestedAt − COMMIT_GRACE_MS −
   *  SCHEDULE_REFRESH_INTERVAL_MS: every leader's schedule has seen them finish) to their partition under the new
   *  count, a key range at a time (prepareBatch), with no lease; the move is conditional on the row being finished
   *  with no attempt `started` (a call cancelled in flight still has its completion to write in its partition: left
   *  to the scan, bumped). Ends with the batch whose range reaches the last id. */
  | 'preparing'
  /** Partition leaders drain and release; no one else acquires; the changer takes the leases in order. */
  | 'pending'
  /** The changer holds every lease (0..max(from, to)−1), recovered what was in flight, and switched the count: new
   *  intents get `toCount`'s partitions; existing rows move in bounded batches (scan, then catch-up). */
  | 'reassigning'
  /** Every row moved, the change row closed and every lease released in one transaction. */
  | 'completed'
  /** Cancelled by an operator before its switch (preparing or pending; cancelChange): the count never changed. The
   *  row is stored as completed with cancelled_at set, so a release that predates cancelling reads it as ended. */
  | 'cancelled';

/** A change still to be driven (not completed, not cancelled): at most one exists. */
export const isChangeActive = (c: { state: PartitionChangeState }): boolean => c.state !== 'completed' && c.state !== 'cancelled';

export interface PartitionChange {
  changeId: string;
  fromCount: number;
  toCount: number;
  state: PartitionChangeState;
  requestedAt: Date;
  requestedBy: string;
  /** The preparing pass's progress: the upper end of the last key range it passed (null: not started), and when it
   *  ended. */
  prepareCursor: string | null;
  preparedAt: Date | null;
  /** Holder id of the changer that last claimed the change (null before the first claim). */
  changer: string | null;
  claimedAt: Date | null;
  /** When the count became `toCount` (state reassigning), database time. */
  switchedAt: Date | null;
  /** Reassignment progress: the last intent_id the scan passed (null: not started); `scanDoneAt` ends the scan;
   *  then the catch-up pass (rows modified since switchedAt − COMMIT_GRACE_MS) runs once and completes the change.
   *  The scan reads the open intents (failed included) and those modified since the horizon (finished after it, or
   *  whose attempt the switch abandoned); `rowsMoved` counts the rows actually moved (a retried batch adds nothing). */
  scanCursor: string | null;
  scanDoneAt: Date | null;
  /** The catch-up's progress: the last intent_id it passed (null: not started), so a catch-up cut short by a step's
   *  deadline resumes where it stopped. */
  catchUpCursor: string | null;
  rowsMoved: number;
  /** When it ended (completed or cancelled). */
  completedAt: Date | null;
  /** Consecutive steps that failed (recordStepFailure; reset by the next step that does not fail), the last one's
   *  reason (an SQL error code and class, never a payload) and when, database time. */
  failedSteps: number;
  lastStepError: string | null;
  lastFailedAt: Date | null;
  /** Set when an operator cancelled it (state cancelled): when and by whom. */
  cancelledAt: Date | null;
  cancelledBy: string | null;
}

/** What cancelChange did. Only a change that has not switched can be cancelled: once switched, rows live under the
 *  new count and the change rolls forward. */
export type CancelChangeOutcome =
  | { kind: 'cancelled'; change: PartitionChange }
  /** Cancelled before (a retried cancel): unchanged. */
  | { kind: 'alreadyCancelled'; change: PartitionChange }
  /** Switched (reassigning) or completed: unchanged. */
  | { kind: 'switched'; change: PartitionChange }
  | { kind: 'notFound' };

/** The count and the change in progress (if any), read together in one round trip. */
export interface PartitionLayout {
  count: number;
  recordedAt: Date;
  recordedBy: string;
  /** The layout generation: 0 until the first switch, raised by 1 by every change's fenced switch (with the count),
   *  never otherwise. Sent to the provider as X-Layout-Generation (docs/provider-fencing.md). */
  generation: number;
  /** The change not yet completed (at most one exists), else null. */
  active: PartitionChange | null;
  /** Database time of the read. */
  dbNow: Date;
}

export type RequestChangeOutcome =
  | { kind: 'created'; change: PartitionChange }
  /** The same count is already being changed to: the request is that one (a retried POST is harmless). */
  | { kind: 'existing'; change: PartitionChange }
  /** The count is already `toCount` and no change is active: nothing recorded. */
  | { kind: 'unchanged'; count: PartitionCount }
  /** Another change (to another count) is active: nothing recorded. */
  | { kind: 'conflict'; active: PartitionChange };

/** Which rows a reassignment read returns: `open` (scheduled, in_flight, failed, or last_modified_at >= modifiedSince:
 *  the scan under every lease), `all` (with modifiedSince: the catch-up). */
export type ReassignScope = 'open' | 'all';

/** One row the reassignment reads: what its partition is hashed from, and the partition it has. */
export interface ReassignRow {
  intentId: string;
  partitionKey: string | null;
  partition: number;
}

export interface PartitionMove {
  intentId: string;
  partition: number;
}

export interface ReassignProgress {
  /** The scan's new cursor (the last intent_id of the batch read), or null in the catch-up pass. */
  scanCursor: string | null;
  /** Ends the scan (scanDoneAt := database time). */
  scanDone: boolean;
  /** The catch-up's new cursor (the last intent_id of its batch read); absent or null leaves it. */
  catchUpCursor?: string | null;
}

/** One batch of the preparing pass (prepareBatch). */
export interface PrepareBatch {
  /** Ids per key range: the range is the next `limit` intent ids after prepareCursor, whatever their status. */
  limit: number;
  /** Only rows last modified before it move (the changer's horizon). */
  horizon: Date;
}

/**
 * Changer writes are fenced by EVERY token in `fence` (one per partition lease 0..max(from, to)−1, all held by the
 * changer): each lease row is read by (name, holder, epoch, not expired) with the dialect's shared lock held to
 * commit; fewer rows than tokens = {kind:'leaseLost'}, nothing written. Each is idempotent: a retry after a lost reply
 * (or by the next changer) finds the state it left and does not repeat the effect.
 */
export interface PartitionStore {
  /** Records `count` unless a count is recorded already (a conditional insert: of concurrent first calls exactly one
   *  records), then returns the count as recorded: `count` itself, or the one that was there or won the race. */
  recordPartitionCount(count: number, recordedBy: string): Promise<PartitionCount>;
  /** The recorded count (count 1 recorded by `none` if no row yet) and the active change, in one read. No side effect. */
  readLayout(): Promise<PartitionLayout>;
  /** Records a change to `toCount` (fromCount = the recorded count) in state preparing, serialized with other
   *  requests by a lock on the count row. At most one change is active at a time. */
  requestChange(toCount: number, requestedBy: string, changeId: string): Promise<RequestChangeOutcome>;
  /** Changes, newest requested first. No side effect. */
  listChanges(limit: number): Promise<PartitionChange[]>;
  /** The change, or null if no such id. No side effect. */
  getChange(changeId: string): Promise<PartitionChange | null>;
  /** Sets changer = fence[0].holderId and claimedAt, fenced by `fence` (the leases the changer holds so far, at
   *  least lease 0). A completed change: unchanged. */
  claimChange(fence: LeaseToken[], changeId: string): Promise<Fenced<PartitionChange>>;
  /**
   * pending → reassigning, fenced by every lease: every `started` attempt becomes `abandoned`, its intent's
   * last_modified_at is bumped (so the scan, which reads rows modified since the horizon, moves it), and an in_flight
   * intent becomes `scheduled` due now, or `failed` when its attempt budget is spent (as orphan recovery; no executor
   * can hold its partition: the changer holds them all); the count row
   * becomes toCount (recordedBy = changer) and its layout generation is raised by 1; switchedAt := database time. Already reassigning or completed: unchanged.
   * No insert that read the old count commits after the switch (it waits for inserts in flight; later ones read the
   * new count) unless `inserts` is 'unexcluded': a dialect whose exclusion is a lock of the switch's own (PostgreSQL)
   * then takes none, and such inserts commit within COMMIT_GRACE_MS of the switch. The wait is bounded (PostgreSQL:
   * SWITCH_LOCK_TIMEOUT_MS; elsewhere the statement timeout): over it, the switch throws a transient StoreError and
   * writes nothing.
   */
  switchCount(fence: LeaseToken[], changeId: string, inserts?: InsertExclusion): Promise<Fenced<PartitionChange>>;
  /** Up to `limit` intents of `scope` ordered by intent_id, after `after` (exclusive; null = from the start). Scope
   *  `all` with modifiedSince: only rows with last_modified_at >= it; `open`: scheduled, in_flight or failed, or (when
   *  modifiedSince is set) last_modified_at >= it. A plain read, no side effect.
   *  Bounded by the rows it examines, whatever the table holds: the unsettled rows are read from an index in id order
   *  from `after` (a few entries per row returned), the rows modified since modifiedSince from the partition-first
   *  (partition_no, last_modified_at, intent_id) index (every such row after `after`: they are recent, so as many as
   *  were written since, never the table's finished ones). Scope `all` without modifiedSince walks the primary key
   *  (tests and tools only; the changer never reads it). */
  listForReassign(q: { after: string | null; limit: number; modifiedSince: Date | null; scope: ReassignScope }): Promise<ReassignRow[]>;
  /** One batch of the preparing pass (no fence), set-based in SQL: with the change row locked, the key range is the
   *  next `limit` intent ids after prepareCursor (read from the primary key: `limit` entries); in it, every intent
   *  succeeded or cancelled, last modified before `horizon`, with no attempt `started`, gets partition_no := the
   *  partition rule (src/intents/partition.ts) under toCount, computed in SQL, where it differs (an open or failed
   *  intent is never moved here; a settled one whose cancelled call is still out gets last_modified_at bumped instead,
   *  so the scan moves it once its attempt closed, however it closes); rowsMoved += the rows moved; prepareCursor :=
   *  the range's last id (never backwards); a range of fewer than `limit` ids ends the pass (state pending,
   *  preparedAt := database time). Only in state preparing, else the change comes back unchanged and nothing is
   *  written; null if no such change. Idempotent: a retry after a lost reply (or a second changer: the change row's
   *  lock serialises them) continues from the recorded cursor, and a row already in its partition is not counted. */
  prepareBatch(changeId: string, batch: PrepareBatch): Promise<PartitionChange | null>;
  /** Sets partition_no of each moved intent (last_modified_at unchanged: every partition's next leader rebuilds),
   *  adds the rows actually moved to rowsMoved, and records `progress`, fenced by every lease. Only in state reassigning (else
   *  unchanged, nothing written). */
  moveIntents(fence: LeaseToken[], changeId: string, moves: PartitionMove[], progress: ReassignProgress): Promise<Fenced<PartitionChange>>;
  /** reassigning → completed (completedAt := database time) and every lease in `fence` released (expired in place,
   *  conditional on holder and epoch, a `released` event each), in one transaction fenced by every lease. Already
   *  completed: unchanged (and the fence is not required). */
  completeChange(fence: LeaseToken[], changeId: string): Promise<Fenced<PartitionChange>>;
  /** Cancels a change in state preparing or pending (cancelledAt := database time, cancelledBy), the change row locked
   *  as every step locks it, so a step either ran before (and a switch that committed makes this `switched`) or finds
   *  the change cancelled and does not switch (every fenced step checks the state under the same lock). The count is
   *  unchanged. No row moved yet: cancelled now (completedAt = cancelledAt). Else the finished rows its preparing pass
   *  moved go back: state preparing with toCount := fromCount and the cursor reset (leaders resume: no drain while
   *  preparing), and the pass's last batch ends it as cancelled instead of pending. Unfenced (an operator's ask, from
   *  any instance). Idempotent. Leases are not touched here. */
  cancelChange(changeId: string, cancelledBy: string): Promise<CancelChangeOutcome>;
  /** A changer's step failed: failedSteps + 1, lastStepError, lastFailedAt := database time, unfenced (a report, not a
   *  step: any changer may write it, even one holding no lease). Only an active change; null if none such. */
  recordStepFailure(changeId: string, error: string): Promise<PartitionChange | null>;
  /** A step that did not fail: failedSteps := 0 (lastStepError and lastFailedAt stay, as history). Unfenced. */
  clearStepFailures(changeId: string): Promise<void>;
}
