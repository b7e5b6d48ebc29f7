// Instance port (issue 25): each process heartbeats one row (holder, app version, roles, the partitions it leads), so
// `every-instance` timers can take a fair share of the partitions (src/lease/fairShare.ts) and the dashboard can list
// the instances. Every dialect implements it (postgres/, mssql/, mysql/ instanceStore.ts); test/store/
// instanceContract.test.ts runs the same cases on each. Same rules as ports.ts: database time only (a row's age is
// measured against the database clock, never a process clock); ordinary outcomes are values; failures throw StoreError.
import { StoreError } from './ports.js';

/** Widths of the row's text columns (the stores refuse longer values rather than cut an identity). */
export const INSTANCE_HOLDER_MAX_LENGTH = 128;
export const INSTANCE_VERSION_MAX_LENGTH = 64;
export const INSTANCE_ROLES_MAX_LENGTH = 64;
/** partitions_led is the ascending comma list of partition numbers ('' = none): 64 partitions take 181 characters. */
export const INSTANCE_PARTITIONS_MAX_LENGTH = 400;

/** What an instance says about itself at each beat. */
export interface InstanceBeat {
  holderId: string;
  /** The app version it runs (package.json `version`). */
  version: string;
  /** What it runs, e.g. ['http', 'timer'] (stored comma-joined; no commas inside a role). */
  roles: readonly string[];
  /** The partitions it leads at this beat (any order; stored ascending, without duplicates). */
  partitions: readonly number[];
}

export interface InstanceRow {
  holderId: string;
  version: string;
  roles: string[];
  /** Database time of the row's first beat (kept by later beats; a removed and re-added row starts again). */
  startedAt: Date;
  /** Database time of the latest beat. */
  lastSeenAt: Date;
  /** Ascending. */
  partitions: number[];
}

export interface InstanceStore {
  /** Upsert the row of `beat.holderId`: last_seen_at = database now, started_at kept when the row exists. */
  heartbeat(beat: InstanceBeat): Promise<InstanceRow>;
  /** Rows whose last beat is at most `withinMs` before database now, by holder id, with that now. */
  listLive(withinMs: number): Promise<{ instances: InstanceRow[]; dbNow: Date }>;
  /** Delete the row (graceful stop); false when there was none. */
  remove(holderId: string): Promise<boolean>;
  /** Delete every row not seen for more than `olderThanMs` (instances that stopped without removing theirs). */
  prune(olderThanMs: number): Promise<number>;
}

/** The stored form of a beat's lists, shared by every dialect (so they agree on the text). */
export function instanceColumns(beat: InstanceBeat): { holder: string; version: string; roles: string; partitions: string } {
  const invalid = (message: string) => new StoreError('fatal', message, 'EARGS');
  const check = (name: string, value: string, max: number) => {
    if (value.length > max) throw invalid(`instance ${name} longer than ${max} characters: "${value.slice(0, 40)}…"`);
    return value;
  };
  for (const r of beat.roles) if (r.includes(',') || r.trim() === '') throw invalid(`instance role "${r}": empty or containing a comma`);
  for (const p of beat.partitions) if (!Number.isInteger(p) || p < 0) throw invalid(`instance partition ${p}: not a partition number`);
  return {
    holder: check('holder id', beat.holderId, INSTANCE_HOLDER_MAX_LENGTH),
    version: check('version', beat.version, INSTANCE_VERSION_MAX_LENGTH),
    roles: check('roles', beat.roles.join(','), INSTANCE_ROLES_MAX_LENGTH),
    partitions: check('partitions', [...new Set(beat.partitions)].sort((a, b) => a - b).join(','), INSTANCE_PARTITIONS_MAX_LENGTH),
  };
}

export interface InstanceDbRow { holder_id: string; version: string; roles: string; started_at: Date; last_seen_at: Date; partitions_led: string }

export const toInstance = (r: InstanceDbRow): InstanceRow => ({
  holderId: r.holder_id,
  version: r.version,
  roles: r.roles === '' ? [] : r.roles.split(','),
  startedAt: r.started_at,
  lastSeenAt: r.last_seen_at,
  partitions: (r.partitions_led ?? '') === '' ? [] : r.partitions_led.split(',').map(Number),
});
