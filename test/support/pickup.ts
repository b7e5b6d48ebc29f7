// The pickup guarantee in the leader's own terms, not wall time: an intent committed before an interval refresh's
// read began is taken by that refresh and started (src/schedule/cadence.ts). Judged by database times: the refresh
// reads' (ScheduleRefresher.lastReadAt, logged as schedule_refreshed read_at by a host), a database time taken after
// the intake replied (so after the commit), and the attempt's started_at. At most two reads begin between the commit
// and the start: the one that took the intent, and the next one when the START lands after it (a START is sent
// right after the read but may return late on a loaded machine) or when that read ended a batch (the next batch
// starts it after its own first refresh). A pickup left to a later refresh, or to the next tick, shows three or more.
import { readFileSync } from 'node:fs';
import type { ScheduleRefresher } from '../../src/schedule/refresher.js';

/** Full-precision database time text ('YYYY-MM-DD hh:mm:ss.ffffff', UTC) as a Date (to the millisecond). */
export const dbTextToDate = (text: string): Date => new Date(`${text.slice(0, 23).replace(' ', 'T')}Z`);

/** At most this many refresh reads begin between an intent's commit and its attempt's start. */
export const MAX_READS_BEFORE_START = 2;

/** The refresh reads that began after `committedBy` and before `startedAt` (none: started by an earlier read, or on
 *  a notice). */
export function readsBetween(reads: Date[], committedBy: Date, startedAt: Date): Date[] {
  return reads.filter((r) => r > committedBy && r < startedAt);
}

export function describePickup(id: string, committedBy: Date, startedAt: Date, between: Date[]): string {
  return `intent ${id} committed by ${committedBy.toISOString()}, started ${startedAt.toISOString()}; ` +
    `refreshes read in between: ${between.map((r) => r.toISOString()).join(', ')}`;
}

/** Records the database time of every interval refresh's read of an in-process leader (its own record). */
export function recordRefreshReads(refresher: ScheduleRefresher): Date[] {
  const reads: Date[] = [];
  const refresh = refresher.refresh.bind(refresher);
  refresher.refresh = async (...args) => {
    const stats = await refresh(...args);
    if (refresher.lastReadAt && reads.at(-1) !== refresher.lastReadAt) reads.push(refresher.lastReadAt);
    return stats;
  };
  return reads;
}

/** The interval refreshes' read times a host process logged (schedule_refreshed read_at, at LOG_LEVEL=debug); of one
 *  partition when given (a partitioned host's lines carry their partition). */
export function refreshReadsInLog(file: string, partition?: number): Date[] {
  const reads = readFileSync(file, 'utf8').split('\n').filter((l) => l.includes('"schedule_refreshed"')).flatMap((l) => {
    try {
      const r = JSON.parse(l) as { read_at?: string; partition?: number };
      return r.read_at !== undefined && (partition === undefined || r.partition === partition) ? [r.read_at] : [];
    } catch {
      return []; // a line cut by SIGKILL
    }
  });
  return [...new Set(reads)].map((t) => new Date(t));
}
