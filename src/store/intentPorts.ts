// Ports for intents (HTTP side, any instance) and execution (leader only, every write fenced).
// Every insert and update sets last_modified_at to database time in the same statement.
import type { Fenced, LeaseToken } from './ports.js';

export type IntentStatus = 'scheduled' | 'in_flight' | 'succeeded' | 'failed' | 'cancelled';
export const TERMINAL_STATUSES: readonly IntentStatus[] = ['succeeded', 'failed', 'cancelled'];
const sqlList = (statuses: readonly IntentStatus[]) => `(${statuses.map((s) => `'${s}'`).join(', ')})`;
/** `('succeeded', 'failed', 'cancelled')`: the terminal statuses as an SQL list (constant text, never user input). */
export const TERMINAL_SQL_LIST = sqlList(TERMINAL_STATUSES);
/** `('succeeded', 'cancelled')`: the statuses an intent never leaves (failed is terminal too, but a redrive reopens
 *  it), as an SQL list (constant text). */
export const SETTLED_SQL_LIST = sqlList(['succeeded', 'cancelled']);
/** Every status but the settled ones (still to execute, or failed: a redrive reopens it). */
export const UNSETTLED_STATUSES: readonly IntentStatus[] = ['scheduled', 'in_flight', 'failed'];
/** `('scheduled', 'in_flight', 'failed')`: UNSETTLED_STATUSES as an SQL list (constant text). */
export const UNSETTLED_SQL_LIST = sqlList(UNSETTLED_STATUSES);

/** Immutable snapshot taken at submit: never changes afterwards. */
export interface IntentContract {
  provider: { url: string | null };
  payload: Record<string, unknown>;
  retry: { maxAttempts: number; baseDelayMs: number; maxDelayMs: number };
  /** The submit span's W3C traceparent (only when the submit was traced): each attempt span links to it. */
  trace?: { traceparent: string };
}

export interface IntentRow {
  intentId: string;
  idempotencyKey: string | null;
  requestHash: string;
  contract: IntentContract;
  status: IntentStatus;
  attemptCount: number;
  maxAttempts: number;
  nextAttemptAt: Date;
  createdAt: Date;
  lastModifiedAt: Date;
  lastError: string | null;
  lastEpoch: number | null;
  /** Executor partition, assigned at insert (src/intents/partition.ts); never changed by an intent write. */
  partition: number;
  /** The submitted partitionKey (null: the partition was hashed from the intent id). */
  partitionKey: string | null;
}

export interface NewIntent {
  intentId: string;
  idempotencyKey: string | null;
  requestHash: string;
  contract: IntentContract;
  maxAttempts: number;
  /** null → due now (database time). */
  notBefore: Date | null;
  /** The 32-bit hash of the partition key (src/intents/partition.ts partitionHash): the insert statement itself sets
   *  partition_no = partitionHash mod the count recorded in the database (1 if none), so an intent always gets the
   *  current count's partition, also while a change is switching it (issue 26). */
  partitionHash?: number;
  /** An explicit executor partition instead (tests, tools); default: by partitionHash, else 0. */
  partition?: number;
  /** The partitionKey the partition was hashed from (default null). */
  partitionKey?: string | null;
}

export type AttemptOutcome = 'started' | 'succeeded' | 'retryable_error' | 'permanent_error' | 'abandoned' | 'aborted';

export interface AttemptRow {
  intentId: string;
  attemptNo: number;
  leaseEpoch: number;
  holderId: string;
  startedAt: Date;
  finishedAt: Date | null;
  outcome: AttemptOutcome;
  httpStatus: number | null;
  error: string | null;
  durationMs: number | null;
}

export type MutationOutcome =
  | { kind: 'ok'; intent: IntentRow }
  | { kind: 'notFound' }
  /** The intent is in a state that forbids the change (terminal, or in flight for reschedule). */
  | { kind: 'conflict'; intent: IntentRow };

/** Intent persistence used by the HTTP API on every instance (not fenced: these are client writes). */
export interface IntentStore {
  /** Inserts, or returns the existing row when the idempotency key is already taken (never throws for it). */
  insert(intent: NewIntent): Promise<{ kind: 'created' | 'existing'; intent: IntentRow }>;
  get(intentId: string): Promise<IntentRow | null>;
  /** Ordered by intent_id (UUIDv7, so creation order); `after` is an exclusive intent_id cursor. */
  list(q: { status?: IntentStatus; limit: number; after?: string }): Promise<IntentRow[]>;
  listAttempts(intentId: string): Promise<AttemptRow[]>;
  /** scheduled|in_flight → cancelled; terminal → conflict. */
  cancel(intentId: string): Promise<MutationOutcome>;
  /** scheduled → next_attempt_at = notBefore; in_flight or terminal → conflict. */
  reschedule(intentId: string, notBefore: Date): Promise<MutationOutcome>;
}

/** Opaque refresh cursor: last_modified_at as the database's own text (full precision) + intent_id. */
export interface RefreshCursor {
  modifiedAt: string;
  intentId: string;
}

/** What the in-memory schedule needs of an intent (never the payload). */
export interface ScheduleRow {
  intentId: string;
  status: IntentStatus;
  nextAttemptAt: Date;
  attemptCount: number;
  maxAttempts: number;
  /** last_modified_at as database text; newer state wins when applying rows. */
  version: string;
}

export interface RefreshPage {
  /** Rows after the cursor, ordered by (last_modified_at, intent_id); `settled` = older than db_now − grace. */
  rows: (ScheduleRow & { settled: boolean })[];
  dbNow: Date;
}

export interface StartRequest {
  intentId: string;
  /** Optimistic predicate: the start applies only if attempt_count still equals this and status is scheduled. */
  expectedAttemptCount: number;
}

export interface StartedAttempt {
  intentId: string;
  attemptNo: number;
  maxAttempts: number;
  /** Earlier attempts of this intent closed as `aborted` (never sent): they do not use up max_attempts. */
  abortedBefore: number;
  contract: IntentContract;
  version: string;
}

export interface AttemptCompletion {
  intentId: string;
  attemptNo: number;
  outcome: Exclude<AttemptOutcome, 'started' | 'abandoned'>;
  httpStatus: number | null;
  error: string | null;
  durationMs: number;
  /** Next intent state; `retryDelayMs` (from database now) only with `scheduled`. */
  next: { status: 'succeeded' | 'failed' } | { status: 'scheduled'; retryDelayMs: number };
  /** Epoch the attempt was started under (default: the fencing token's). A completion carried into a later
   *  epoch of the same holder is still written, if that attempt is still open (not abandoned meanwhile). */
  attemptEpoch?: number;
}

export interface CompletedAttempt {
  intentId: string;
  /** false = the intent changed meanwhile (cancelled…): its row was left alone (the attempt row is still closed). */
  applied: boolean;
  row: ScheduleRow | null;
}

/** Why the database refused a whole START: a pause (the partition's or the cluster's) or a pending handover request. */
export type StartHold = 'paused' | 'draining';

/** A fenced START: the attempts started, the lease lost (nothing written), or held by a pause or a drain (nothing written). */
export type StartOutcome = Fenced<StartedAttempt[]> | { kind: 'held'; by: StartHold };

/**
 * Leader-side persistence of ONE executor partition (issue 25; `Stores.executionFor(partition)`, partition 0 =
 * `Stores.execution`). Each fenced* call is one transaction that first locks the lease row named in its token to
 * commit: the caller passes its partition's token (lease `partitionLeaseName(LEASE_NAME, partition)`), so each
 * partition's writes are fenced by its own lease and epoch, and a lost lease of one partition stops only its writes.
 * Every read and write below is limited to intents whose partition_no is this store's partition (and to their
 * attempts): a partition's leader never sees, starts, completes, recovers or purges another partition's intents.
 */
export interface ExecutionStore {
  /** Database time now and the cursor a fresh schedule starts from: (db_now − grace, ''). Partition-independent. */
  rebuildStart(commitGraceMs: number): Promise<{ dbNow: Date; cursor: RefreshCursor }>;
  /** Scheduled intents of this partition ordered by intent_id after `afterId` (paged full rebuild). */
  loadScheduled(afterId: string | null, limit: number): Promise<ScheduleRow[]>;
  /** Rows of this partition after `cursor`: the cursor is per partition (another partition's rows never move it). */
  refreshPage(cursor: RefreshCursor, limit: number, commitGraceMs: number): Promise<RefreshPage>;
  /** in_flight intents of this partition whose started attempt is from an older epoch of the token's lease:
   *  attempt → abandoned, intent → scheduled now (or failed when attempts are exhausted). Epochs of different
   *  partitions are unrelated numbers, so only this partition's intents (and their attempts) are compared with the
   *  token's epoch: another partition's in-flight intent, whatever its epoch, is left alone. */
  fencedRecoverOrphans(token: LeaseToken): Promise<Fenced<{ recovered: number }>>;
  /** Inserts attempt rows and bumps attempt_count for every request whose optimistic predicate holds and is due,
   *  while attempt_count − aborted attempts < max_attempts (an abort never reached the provider). An intent of
   *  another partition is not started (as if its predicate failed: absent from the result), so an intent moved to
   *  another partition is never started by its former partition's leader. Nothing starts while the statement finds
   *  the partition held ('held'): its control row or the cluster's paused, or a handover request for the token's
   *  lease pending (the leader's own rules, judged by the database as the START runs, so a START that waited for a
   *  connection never starts after a pause or a drain was answered; a row-lock wait inside the statement can still
   *  follow the judgement: each dialect's store says where it is made). */
  fencedStartAttempts(token: LeaseToken, requests: StartRequest[]): Promise<StartOutcome>;
  /** Closes each attempt (still `started`, same holder, its attemptEpoch ≤ the token's) of an intent of this
   *  partition and moves its intent on if it did not change meanwhile; a completion of another partition's intent
   *  writes nothing (`applied` false, row null). */
  fencedCompleteAttempts(token: LeaseToken, completions: AttemptCompletion[]): Promise<Fenced<CompletedAttempt[]>>;
}

/** Push notices that intents became due (PostgreSQL LISTEN/NOTIFY), sent by the dialect's intent writes.
 *  Best effort by design: the leader's refresh interval stays the guarantee, so a lost notice loses nothing. */
export interface DueNotices {
  /** Listen until stop() is called. Resolves once listening; a connection lost later is reported to `onError`
   *  (the caller subscribes again). */
  listen(onNotice: () => void, onError: (e: unknown) => void): Promise<NoticeSubscription>;
}

export interface NoticeSubscription {
  stop(): Promise<void>;
  /** A cheap round trip on the listening connection (a silently dropped one is otherwise never noticed);
   *  rejects, and reports to `onError`, if it is gone. */
  check(): Promise<void>;
}
