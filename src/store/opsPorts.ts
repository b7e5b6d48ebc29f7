// Operations port: the cluster-wide execution control row (pause/resume) and retention purge. Every dialect
// implements all of it (postgres/opsStore.ts, mssql/opsStore.ts). Same rules as ports.ts: database time
// only; ordinary outcomes are values; failures throw StoreError.
import type { Fenced, LeaseToken } from './ports.js';

/** The execution control row of one lease name (one cluster). No row = running (never paused). */
export interface ExecutionControl {
  leaseName: string;
  paused: boolean;
  /** When the flag last changed (database time); null when it never did. */
  changedAt: Date | null;
  /** Who changed it (the admin caller's description, e.g. the instance that served the request). */
  changedBy: string | null;
  reason: string | null;
  /** Database time when the row was read. */
  dbNow: Date;
}

export interface PurgeResult {
  /** Terminal intents deleted. */
  intents: number;
  /** Their attempt rows deleted. */
  attempts: number;
}

export interface OpsStore {
  /** One primary-key read (cheap enough for every refresh interval). */
  getExecutionControl(leaseName: string): Promise<ExecutionControl>;
  /** Upsert the flag (idempotent: pausing a paused cluster keeps the original changedAt). */
  setPaused(leaseName: string, paused: boolean, changedBy: string, reason: string | null): Promise<ExecutionControl>;
  /**
   * Fenced by `token` (lease row locked to commit, audited as `purge_retention`): delete up to `limit`
   * intents whose status is terminal (succeeded, failed, cancelled) and whose last_modified_at is older than
   * database now − `olderThanMs`, oldest first, with their attempts, in one statement. Never touches a
   * scheduled or in_flight intent.
   */
  fencedPurgeTerminal(token: LeaseToken, olderThanMs: number, limit: number): Promise<Fenced<PurgeResult>>;
}
