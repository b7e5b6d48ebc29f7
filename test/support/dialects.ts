// The one list of SQL dialects the tests run against, and the subsets the suites pick from it by capability.
// A new dialect is ONE line in `dialects` below. Its harness (a file of its own, e.g. test/support/mysqlHarness.ts)
// says what it can do: contexts for the in-process suites (own schema or database, migrated), `server` for the
// process-level tests (a fresh database + URL + raw SQL; `serverDatabases` is derived from it, no list of its own),
// `sqlFaults` for the suites that make the server misbehave. Suites pick dialects by these fields, never by a
// per-dialect map of their own; a pick by name is left only where the test is about that dialect itself (SQL
// Server's RCSI, PostgreSQL's cancel code 57014, the PGlite-only partition test).
// Availability: every suite lists every dialect it applies to; one not available here is skipped with one line, and
// an unreachable server FAILS under CI=true. The probe runs once in test/support/globalSetup.ts, which provides the
// reason the harness's unavailable() returns (`pgUnavailable`, `mysqlUnavailable`); SQL Server runs where
// MSSQL_TEST_URL points (its line says how to set it), the process-level suites on a SQL login only.
import { it } from 'vitest';
import type { Fenced, LeaseToken } from '../../src/store/ports.js';
import type { Stores } from '../../src/store/stores.js';
import type { AttemptOutcome, AttemptRow, IntentContract, IntentRow, IntentStatus, NewIntent } from '../../src/store/intentPorts.js';
import type { PgTestDatabase } from './localHostProcess.js';
import type { HeldLock } from './heldLock.js';
import type { Examined, SeedOptions } from './largeTable.js';
import { pglite, postgres } from './pgHarness.js';
import { mssql } from './mssqlHarness.js';
import { mysql } from './mysqlHarness.js';

/** An intent row as stored, normalised to JS types, with last_modified_at also as full-precision database text. */
export interface IntentDbView extends IntentRow {
  lastModifiedText: string;
}

/** An attempt row to arrange directly (started_at = database now). */
export interface AttemptSeed {
  intentId: string;
  attemptNo: number;
  leaseEpoch: number;
  holderId: string;
  outcome: AttemptOutcome;
}

export interface DialectContext {
  name: string;
  /** A new set of stores on its own connection(s) in this context (one per simulated instance). */
  openStores(opts?: { poolMax?: number; statementTimeoutMs?: number }): Promise<Stores>;
  /** Run a fenced transaction for `token` that writes an audit row, waits for `hold`, then commits.
   *  Resolves with the audit row's sequence number, or leaseLost. */
  fencedHold(stores: Stores, token: LeaseToken, hold: Promise<void>, onFenced?: () => void): Promise<Fenced<number>>;
  /** Audit sequence numbers with their epochs (fenced writes), oldest first. */
  auditLog(): Promise<{ seq: number; leaseEpoch: number; action: string }[]>;

  // Dialect-neutral arrangement and inspection helpers (each dialect implements them in its own SQL).
  /** Width of the full-precision database time text ('YYYY-MM-DD hh:mm:ss.' + fraction, UTC): 26 for
   *  PostgreSQL (microseconds), 27 for SQL Server (100 ns). Fixed width per dialect, so texts compare as times. */
  readonly timeTextWidth: number;
  /** Readers never wait for an open writer (MVCC; SQL Server with READ_COMMITTED_SNAPSHOT ON). */
  readonly snapshotReads: boolean;
  /** The database clock now (clock_timestamp() / SYSUTCDATETIME()) as full-precision text. */
  dbNowText(): Promise<string>;
  /** The row's last_modified_at as full-precision database text (the refresh cursor's form). */
  modifiedAtText(intentId: string): Promise<string>;
  /** Set status directly (arrangement only): last_modified_at is left as is, or moved `ageMs` into the past (a row
   *  that settled long ago, without waiting for it). */
  setIntentStatus(intentId: string, status: IntentStatus, ageMs?: number): Promise<void>;
  /** Number of intents, optionally only those in `status`. */
  countIntents(status?: IntentStatus): Promise<number>;
  /** Intents per status, from one snapshot (statuses without rows are absent). */
  statusCounts(): Promise<Partial<Record<IntentStatus, number>>>;
  /** Every intent, ordered by intent_id. */
  intentRows(): Promise<IntentDbView[]>;
  /** Every attempt, ordered by intent_id, attempt_no. */
  attemptRows(): Promise<AttemptRow[]>;
  /** Insert attempt rows directly, in one statement (started_at = database now). */
  insertAttempts(rows: AttemptSeed[]): Promise<void>;
  /** Insert `n` due, scheduled intents (random ids) in ONE statement: one shared created_at/last_modified_at. */
  insertIntentsOneStatement(n: number, contract: IntentContract): Promise<void>;
  /** Expire every lease row in place (expires_at = database now − 1 s), as if its holder had stalled. */
  expireLeases(): Promise<void>;
  /** Take the lease behind its holder's back (as another instance after a pause): holder := `holderId`,
   *  epoch + 1, expires in 1 h, and the 'acquired' event (shared sequence) — one transaction. Throws if no row. */
  stealLease(leaseName: string, holderId: string): Promise<void>;
  /** On a separate connection: BEGIN; next_attempt_at = last_modified_at = database now for `intentId`;
   *  wait `holdMs`; COMMIT (an older timestamp that commits late). Not possible on PGlite (one session). */
  holdLateReschedule(intentId: string, holdMs: number): Promise<void>;
  /** On a separate connection: BEGIN and lock the intent's row (FOR UPDATE) until the returned function is called
   *  (it commits). Resolves once the lock is held. Not possible on PGlite (one session). */
  lockIntentRow?(intentId: string): Promise<() => Promise<void>>;
  /** On a separate connection: BEGIN and lock one attempt row (intentId, attemptNo) against writers (FOR UPDATE; on
   *  SQL Server a U key lock, no range) until the returned function is called (it commits). Resolves once held. The
   *  purge skips locked intents but deletes their attempts: a lock the purge waits on. Absent: PGlite (one session). */
  lockAttemptRow?(intentId: string, attemptNo: number): Promise<() => Promise<void>>;
  /** On a separate connection: BEGIN and the dialect's own intake insert of `n`, left uncommitted (its locks held) until
   *  commit() is called. Resolves once inserted, with the partition it took. Not possible on PGlite (one session). */
  insertHeldOpen(n: NewIntent): Promise<{ partition: number; commit: () => Promise<void> }>;
  /** From now on, record every version (last_modified_at text) that UPDATEs give `intentId`. */
  startVersionLog(intentId: string): Promise<void>;
  /** The versions recorded since startVersionLog, in update order, as full-precision database text. */
  versionLog(): Promise<string[]>;

  /** Insert `n` settled (succeeded) intents a day old in one set-based statement, ids before any the app makes, then
   *  fresh statistics; `opts` as SeedOptions (test/support/largeTable.ts). Absent: not written for this dialect (SQL Server). */
  seedSettled?(n: number, opts?: SeedOptions): Promise<void>;
  /** The rows the database examined while `run` used stores on one session of their own (largeTable.ts says how it
   *  counts). Absent: not written for this dialect (SQL Server). */
  examined?: Examined;

  /** Raw SQL in this context (dialect-specific text; shared suites use the neutral helpers above instead). */
  sql<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
  /** Raw SQL statements, as `fn` issues them, in one transaction on one session: committed when `fn` resolves,
   *  rolled back when it or a statement fails. Absent: SQL Server, whose batches hold their own transaction. */
  transaction?<T>(fn: (sql: RawSql) => Promise<T>): Promise<T>;
  close(): Promise<void>;
}

/** Raw SQL on a session (dialect-specific text, the context's placeholders). */
export type RawSql = <R = Record<string, unknown>>(text: string, params?: unknown[]) => Promise<R[]>;

export interface DialectHarness {
  name: 'pglite' | 'postgres' | 'mssql' | 'mysql';
  /** Due-intent notices (LISTEN/NOTIFY) exist on this dialect; elsewhere the refresh interval bounds pickup. */
  notices: boolean;
  /** More than one session: a transaction can stay open while others commit (PGlite is one session). */
  manySessions: boolean;
  /** null = usable; otherwise the reason the suite is skipped. */
  unavailable(): string | null;
  createContext(): Promise<DialectContext>;
  /** A database server the process-level tests can point hosts at (absent: PGlite, one embedded session). */
  server?: ServerCapability;
  /** Test-only SQL that makes the server misbehave, in the dialect's own text (absent: not written for it). */
  sqlFaults?: SqlFaults;
  /** Empty databases to migrate, for the migration contract (test/support/migrationTargets.ts). */
  migrations: MigrationCapability;
}

/** What the migration contract (test/store/migrationContract.test.ts) needs of a dialect. */
export interface MigrationCapability {
  /** A fresh, empty database (or schema) of this dialect, nothing migrated; drop() removes it. */
  create(): Promise<MigrationDatabase>;
  /** The schema description query for snapshot() (test/support/schemaSnapshot.ts). */
  schemaSql: string;
  /** The dialect's migrations in order, with the number of statements (batches) the runner sends for each. */
  migrations: { id: number; statements: number }[];
  /** A migration's statements commit one by one (MySQL DDL), so a migrator can die between two of them; otherwise a
   *  migration is one transaction with its ledger row, and a crash leaves none of it. */
  statementCommits: boolean;
}

export interface MigrationDatabase {
  /** The product's cold-start migrator (the dialect's migrate…IfNeeded: version check, lock, pending migrations) on a
   *  pool of its own, closed after; `upTo`: only the migrations up to that id. Resolves with the ids it applied. */
  migrate(upTo?: number): Promise<number[]>;
  /** Stores on a pool of their own (not migrated; stores.close() ends the pool). */
  openStores(): Promise<Stores>;
  /** Raw SQL (`$n` placeholders) on a connection of the test's own. */
  sql: <R = Record<string, unknown>>(text: string, params?: unknown[]) => Promise<R[]>;
  /** On a connection of its own, the lock every migrator takes first, held until release(); waiters() counts the
   *  sessions waiting for it. Absent: one session (PGlite), where migrators queue for the session itself. */
  holdMigrationLock?(): Promise<HeldLock>;
  /** As a migrator that died after the first `n` statements of migration `id`: runs them on one session, unrecorded. */
  runStatements(id: number, n: number): Promise<void>;
  drop(): Promise<void>;
}

/** What the process-level system tests need of a database server. */
export interface ServerCapability {
  /** The reason the process-level tests skip, where it differs from the dialect's (absent: the dialect's). */
  unavailable?(): string | null;
  /** A fresh database (the hosts migrate it concurrently at start): its URL for DATABASE_URL, raw SQL (`$n`
   *  placeholders, neutral SQL) for the test's own checks, dropped by drop(). */
  create(): Promise<PgTestDatabase>;
  /** The dialect's stores on a new pool of two connections to `url` (not migrated; stores.close() ends the pool). */
  openStores(url: string, statementTimeoutMs: number): Promise<Stores>;
  /** An SQL expression for the database's time now, or `secondsAgo` seconds before (the stored timestamps' type). */
  dbTimeSql(secondsAgo?: number): string;
  /** The statements that insert `n` settled intents a day old (ids settledId(1..n), before any the app makes) and
   *  refresh the statistics, for `db.sql` (test/support/largeTable.ts). */
  seedSettledSql(n: number): string[];
  /** On a connection of its own, a transaction holding the rows of `table` whose `column` is one of `keys` locked
   *  FOR UPDATE (every key must match a row) until release(): writers and locking readers of them wait, plain reads
   *  do not. `shared`: FOR SHARE / LOCK IN SHARE MODE instead (writers wait, shared lockers do not); its waiters()
   *  may miss them on MariaDB (a read-only transaction has no id of its own to find its waiters by). */
  holdRowLock(db: PgTestDatabase, table: string, column: string, keys: (string | number)[], mode?: 'exclusive' | 'shared'): Promise<HeldLock>;
}

/** A database server of the list, as the process-level tests iterate them (describe.each(serverDatabases)). */
export interface ServerDatabase extends ServerCapability {
  name: DialectHarness['name'];
  unavailable(): string | null;
}

export interface SqlFaults {
  /** Statements that make every DELETE on submission_intents sleep `seconds` on the server (a trigger). Absent
   *  where a sleep would stall every session (PGlite) or the purge's cap would not end it (SQL Server: LOCK_TIMEOUT). */
  slowDelete?(seconds: number): string[];
  /** Statements that make every DELETE on submission_intents fail with a real SQL error whose message is
   *  'permission denied: retention disabled by the test'; `code`: the error code the store reports, when fixed. */
  refuseDelete?: { statements: string[]; code?: string };
}

/** Every dialect, one line each. SQL Server joins when configured (test/support/mssqlHarness.ts); MySQL/MariaDB
 *  when reachable (test/support/mysqlHarness.ts). */
export const dialects: DialectHarness[] = [pglite, postgres, mssql, mysql];

// The subsets the suites pick by capability, never by name.
/** Suites that hold a transaction open while others commit (late commits). */
export const manySessionDialects = dialects.filter((d) => d.manySessions);
/** The database servers the process-level system tests run against (separate OS processes, DATABASE_URL). */
export const serverDatabases: ServerDatabase[] = dialects.flatMap((d) =>
  d.server ? [{ ...d.server, name: d.name, unavailable: () => d.unavailable() ?? d.server!.unavailable?.() ?? null }] : []);

/** `it` where the test applies to this dialect, else nothing registered (a dialect it cannot apply to is no skip). */
export const itWhere = (applies: boolean): typeof it => (applies ? it : ((() => {}) as unknown as typeof it));
