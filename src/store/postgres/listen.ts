// LISTEN for the PostgreSQL pool (db.ts): a connection of its own per subscription, with client deadlines and
// keep-alive probes; driver errors map to StoreError. Imports nothing of db.ts, so db.ts and notices.ts (the
// due-notice protocol over it) depend on it one way.
import pg from 'pg';
import type { NoticeSubscription } from '../intentPorts.js';
import { withDeadline } from '../deadline.js';
import { mapPgError } from './errors.js';

export type ListenFn = (channel: string, onNotice: () => void, onError: (e: unknown) => void) => Promise<NoticeSubscription>;

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
