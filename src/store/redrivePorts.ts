// Redrive port: failed intents back to `scheduled` with a fresh attempt budget. A client write like cancel
// (any instance, not fenced: it only ever touches `failed` rows, which no leader writes). The attempt log is
// never rewritten: attempt numbers continue, and max_attempts becomes the attempts sent so far plus the
// contract's maxAttempts. last_modified_at moves, so the leader's refresh picks the intent up.

/** Which failed intents: explicit ids, or a filter (status is always `failed`). At most `limit` per call. */
export interface RedriveSelector {
  ids: string[] | null;
  /** last_modified_at (when the intent failed) ≥ from; null = unbounded. */
  failedFrom: Date | null;
  /** last_modified_at < to; null = unbounded. */
  failedTo: Date | null;
  /** Case-insensitive substring of last_error; null = any. */
  errorContains: string | null;
  limit: number;
}

export interface RedriveRequest extends RedriveSelector {
  /** Client-chosen or generated id of this redrive call (its record's primary key). */
  redriveId: string;
  requestedBy: string;
  reason: string | null;
}

export interface RedrivenIntent {
  intentId: string;
  /** Attempts made before this redrive (the next attempt is number attemptsBefore + 1). */
  attemptsBefore: number;
  /** The new budget: attemptsBefore − aborted + the contract's maxAttempts. */
  maxAttempts: number;
}

export interface RedriveResult {
  redriveId: string;
  /** Database time of the redrive (the record's requested_at and the intents' next_attempt_at). */
  requestedAt: Date;
  redriven: RedrivenIntent[];
}

/** One recorded redrive call. */
export interface RedriveRecord {
  redriveId: string;
  requestedAt: Date;
  requestedBy: string;
  reason: string | null;
  /** The selector as JSON text (ids or filter, and the limit). */
  selector: string;
  redriven: number;
}

export interface RedriveStore {
  /**
   * One transaction: select up to `limit` failed intents matching the selector (oldest failure first, rows
   * locked), move each to scheduled / due now / fresh budget, record the call and its intents. Intents not
   * `failed` (any more) are left alone, so repeating a redrive is a no-op. Always records the call.
   */
  redrive(req: RedriveRequest): Promise<RedriveResult>;
  /** Newest first (ix_redrives_requested). */
  listRedrives(limit: number): Promise<RedriveRecord[]>;
}
