// Due-intent notices on PostgreSQL: intent writes (insert, reschedule, redrive) NOTIFY a channel and the
// leader LISTENs, so a new intent reaches the provider in milliseconds instead of up to a refresh interval.
// Best effort on both ends: the refresh interval stays the guarantee. The NOTIFY is its own small statement,
// sent after the write commits and coalesced (at most one in flight per process, one more queued), because
// a NOTIFY inside the write's transaction would serialise every intake commit on the notify queue lock; it
// commits with synchronous_commit off, as a notice needs no durability.
import pg from 'pg';
import type { DueNotices, NoticeSubscription } from '../intentPorts.js';
import { withDeadline } from '../deadline.js';
import { mapPgError } from './errors.js';
import type { PgDatabase, PgQueryable } from './db.js';

/** One channel per database; listeners in other schemas of the same database only refresh once more. */
export const DUE_CHANNEL = 'submission_manager_due';

export type ListenFn = (channel: string, onNotice: () => void, onError: (e: unknown) => void) => Promise<NoticeSubscription>;

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

/** LISTEN on a connection of its own (never a pooled one: the pool recycles connections). */
export function listenOnOwnConnection(config: pg.ClientConfig, deadlineMs: number): ListenFn {
  return async (channel, onNotice, onError) => {
    // Keep-alive probes from 10 s (not the OS's 2 h) so a dropped peer surfaces; the leader also probes (check()).
    const client = new pg.Client({ ...config, keepAlive: true, keepAliveInitialDelayMillis: 10_000 });
    let stopped = false;
    const destroy = () => (client as unknown as { connection?: { stream?: { destroy(): void } } }).connection?.stream?.destroy();
    const fail = (e: unknown) => {
      if (stopped) return;
      stopped = true;
      destroy();
      onError(mapPgError(e));
    };
    client.on('notification', (m) => {
      if (m.channel === channel) onNotice();
    });
    client.on('error', fail);
    client.on('end', () => fail(new Error('notice connection ended')));
    try {
      await withDeadline(client.connect(), deadlineMs, destroy);
      await withDeadline(client.query(`LISTEN ${client.escapeIdentifier(channel)}`), deadlineMs, destroy);
    } catch (e) {
      stopped = true;
      destroy();
      throw mapPgError(e);
    }
    return {
      async stop() {
        stopped = true;
        await withDeadline(client.end(), deadlineMs, destroy).catch(() => {});
      },
      async check() {
        try {
          await withDeadline(client.query('SELECT 1'), deadlineMs, destroy);
        } catch (e) {
          fail(e);
          throw mapPgError(e);
        }
      },
    };
  };
}
