// Due-intent notices on PostgreSQL: intent writes (insert, reschedule, redrive) NOTIFY a channel and the
// leader LISTENs, so a new intent reaches the provider in milliseconds instead of up to a refresh interval.
// Best effort on both ends: the refresh interval stays the guarantee. The NOTIFY is its own small statement,
// sent after the write commits and coalesced (at most one in flight per process, one more queued), because
// a NOTIFY inside the write's transaction would serialise every intake commit on the notify queue lock; it
// commits with synchronous_commit off, as a notice needs no durability.
import type { DueNotices } from '../intentPorts.js';
import type { PgDatabase, PgQueryable } from './db.js';

/** One channel per database; listeners in other schemas of the same database only refresh once more. */
export const DUE_CHANNEL = 'submission_manager_due';

/** Sends coalesced notices; `notify()` never throws and never delays the caller. */
export class DueNotifier {
  private sending = false;
  private again = false;

  constructor(private readonly db: PgQueryable) {}

  notify(): void {
    if (this.sending) {
      this.again = true;
      return;
    }
    this.sending = true;
    void this.send();
  }

  private async send(): Promise<void> {
    do {
      this.again = false;
      try {
        await this.db.query(`SELECT set_config('synchronous_commit', 'off', true), pg_notify($1, '')`, [DUE_CHANNEL]);
      } catch {
        // Lost notice: the leader's refresh interval still picks the intent up.
      }
    } while (this.again);
    this.sending = false;
  }
}

/** The listening side, for the executor (null when the database cannot LISTEN). */
export function dueNotices(db: PgDatabase): DueNotices | null {
  const listen = db.listen;
  if (!listen) return null;
  return { listen: (onNotice, onError) => listen(DUE_CHANNEL, onNotice, onError) };
}
