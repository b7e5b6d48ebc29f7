// Ports between the core (lease, intents, schedule, executor) and the SQL dialects (postgres/, mssql/).
// Guarantees every adapter must give are stated here; test/store/contract runs them against each dialect.
// Queries return ordinary outcomes (null, {kind:'leaseLost'}); they throw only for failures (StoreError).

/** The lease row as the database holds it, plus the database clock when it was read. */
export interface LeaseRow {
  leaseName: string;
  holderId: string;
  leaseEpoch: number;
  acquiredAt: Date;
  renewedAt: Date;
  expiresAt: Date;
  /** Database time (clock_timestamp()/SYSUTCDATETIME()) when the statement ran. */
  dbNow: Date;
}

export type AcquireOutcome =
  | { acquired: true; lease: LeaseRow }
  /** `current` is the row that blocked us (may be null if it was created after our snapshot). */
  | { acquired: false; current: LeaseRow | null; dbNow: Date };

/** Identity of a held lease: what every fenced write is conditional on. */
export interface LeaseToken {
  leaseName: string;
  holderId: string;
  leaseEpoch: number;
}

/**
 * Lease persistence. Every operation is one conditional statement (or one short transaction) decided by
 * database time; local clocks are never compared with database time.
 */
export interface LeaseStore {
  get(leaseName: string): Promise<LeaseRow | null>;
  /** Succeeds iff the row is missing or expired; epoch + 1 (1 on insert); logs an `acquired` event. */
  tryAcquire(leaseName: string, holderId: string, durationMs: number): Promise<AcquireOutcome>;
  /** Extends expiry iff held by (holder, epoch) and not expired; epoch unchanged. null = not renewed. */
  renew(token: LeaseToken, durationMs: number): Promise<LeaseRow | null>;
  /** Expires the row in place (never deletes it) iff held by token and not expired. false = not held. */
  release(token: LeaseToken): Promise<boolean>;
  /** Append-only transition log, oldest first (for audits and tests). */
  listEvents(leaseName: string): Promise<LeaseEvent[]>;
}

export interface LeaseEvent {
  seq: number;
  leaseName: string;
  leaseEpoch: number;
  holderId: string;
  event: 'acquired' | 'released';
  at: Date;
}

/** Outcome of a fenced transaction: the fence (lease row locked to commit) held, or the lease is lost. */
export type Fenced<T> = { kind: 'ok'; value: T } | { kind: 'leaseLost' };

/** Neutral error type every dialect maps its driver errors into, once. 'data': the database refuses a value of
 *  this statement (a data exception, a constraint other than a unique key): the same write fails every time. */
export type StoreErrorKind = 'transient' | 'conflict' | 'data' | 'fatal';

export class StoreError extends Error {
  override name = 'StoreError';
  constructor(
    readonly kind: StoreErrorKind,
    message: string,
    /** Driver code (SQLSTATE, SQL Server error number, errno) for logs. */
    readonly code: string | undefined,
    options?: { cause?: unknown },
  ) {
    super(message, options);
  }
}

export function isStoreError(e: unknown): e is StoreError {
  return e instanceof StoreError;
}
