// GET /api/instances (issue 25): the instances as their heartbeat rows in SQL report them — holder, app version,
// roles, when they started, how long ago they last beat (database time), the partitions they lead — so any instance
// answers the same. Rows seen within INSTANCE_LIVE_WINDOW_MS are `live`; those seen within RECENT_FACTOR windows are
// listed too, not live (an instance that just died stays visible for a while). Read-only.
import type { InstanceRow } from '../store/instancePorts.js';
import type { HttpContext } from './context.js';
import { guarded } from './guarded.js';
import { json } from './problem.js';
import type { ApiHandler } from './request.js';

/** Rows not seen for up to this many liveness windows are still listed (as not live). */
export const RECENT_FACTOR = 20;

export async function instancesView(app: Pick<HttpContext, 'stores' | 'config'>) {
  const liveWindowMs = app.config.instances.liveWindowMs;
  const { instances, dbNow } = await app.stores.instances.listLive(liveWindowMs * RECENT_FACTOR);
  const now = dbNow.getTime();
  const view = (r: InstanceRow) => {
    const lastSeenAgeMs = Math.max(0, now - r.lastSeenAt.getTime());
    return { holderId: r.holderId, version: r.version, roles: r.roles, startedAt: r.startedAt.toISOString(),
      lastSeenAt: r.lastSeenAt.toISOString(), lastSeenAgeMs, live: lastSeenAgeMs <= liveWindowMs, partitions: r.partitions };
  };
  return { dbNow: dbNow.toISOString(), liveWindowMs, instances: instances.map(view) };
}

export function instancesHandler(app: HttpContext): ApiHandler {
  return guarded(app.logger, 'ops', 'getInstances', async () => json(200, await instancesView(app)));
}
