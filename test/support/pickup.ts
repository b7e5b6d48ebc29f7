// The pickup guarantee in the leader's own terms, not wall time: an intent committed before an interval refresh's
// read began is taken by that refresh, so its attempt starts before the next refresh reads. Judged by database
// times: the refresh reads' (ScheduleRefresher.lastReadAt, logged as schedule_refreshed read_at by a host), a
// database time taken after the intake replied (so after the commit), and the attempt's started_at.
import type { ScheduleRefresher } from '../../src/schedule/refresher.js';

/** Full-precision database time text ('YYYY-MM-DD hh:mm:ss.ffffff', UTC) as a Date (to the millisecond). */
export const dbTextToDate = (text: string): Date => new Date(`${text.slice(0, 23).replace(' ', 'T')}Z`);

/** The refresh reads that began after `committedBy` and before `startedAt`: at most one when the guarantee holds
 *  (the first after the commit took it; the intent may also be started before any, by an earlier read or a notice). */
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
