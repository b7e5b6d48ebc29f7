// POST /ops/partitions/{changeId}/cancel (admin, any instance: SQL only). The way out of a count change that does not
// progress before its switch (docs/operations.md, "A count change that does not progress"): the change ends as
// cancelled under the change row's lock (a changer mid-step finds it ended and writes nothing: every step checks the
// state under that lock, and its fenced writes also need the leases released here), the count stays fromCount, and
// the leaders resume at their next layout read. After the switch intents live under the new count: 409, roll forward.
import { isUuid } from '../intents/ids.js';
import { liveOlderReleases } from '../lease/olderReleases.js';
import { PARTITION_CHANGER_SUFFIX, partitionLeaseName } from '../limits.js';
import type { PartitionChange } from '../store/partitionPorts.js';
import { guarded } from './guarded.js';
import { optionalReason } from './ops.js';
import { describeChange, olderReleaseProblem, partitionChangeView, type PartitionsContext } from './partitions.js';
import { json, problem } from './problem.js';
import { requester, type ApiHandler } from './request.js';

/** Releases the partition leases 0..max(from, to)−1 that a changer (any: PARTITION_CHANGER_SUFFIX) holds, each
 *  conditional on holder and epoch, unless a newer change is active (its changer's leases are its own). Returns how
 *  many. A changer that takes one afterwards lets it go at its next step (the change cancelled). `c` as it was asked
 *  for: its toCount is the one it had (a cancel moving rows back records toCount := fromCount). */
async function releaseChangerLeases(app: PartitionsContext, c: PartitionChange): Promise<number> {
  const active = (await app.stores.partitions.readLayout()).active;
  if (active !== null && active.changeId !== c.changeId) return 0;
  const released = await Promise.all(Array.from({ length: Math.max(c.fromCount, c.toCount, app.config.partitions.count) }, async (_, k) => {
    const row = await app.stores.lease.get(partitionLeaseName(app.config.lease.name, k));
    if (!row || row.expiresAt.getTime() <= row.dbNow.getTime() || !row.holderId.endsWith(PARTITION_CHANGER_SUFFIX)) return false;
    return app.stores.lease.release({ leaseName: row.leaseName, holderId: row.holderId, leaseEpoch: row.leaseEpoch });
  }));
  return released.filter(Boolean).length;
}

/** 200 cancelled (also a retry: alreadyCancelled), 404 no such change, 409 switched or completed (nothing written),
 *  400/413/415 for a bad body (nothing written). */
export function cancelPartitionChangeHandler(app: PartitionsContext): ApiHandler {
  return guarded(app.logger, 'ops', 'cancelPartitionChange', async (req, instance) => {
    const id = req.params.changeId ?? '';
    const notFound = () => problem(404, 'partition-change-not-found', 'Not found', `no partition change with id ${JSON.stringify(id.slice(0, 40))}`, { instance });
    if (!isUuid(id)) return notFound();
    const body = await optionalReason(req, instance);
    if (!body.ok) return body.response;
    // An older release's changer takes no part in a cancel: before 0.2.0 it knows none (it could drive a change moving
    // rows back on to its switch, or move rows by the toCount it read before); from 0.2.0 on the database refuses its
    // move-back batches of this release's changes (the release guards). As for a request: refused while one is live,
    // nothing written.
    const older = await liveOlderReleases(app.stores.instances, app.config.instances.liveWindowMs);
    if (older.length > 0) return olderReleaseProblem(older, 'whose changer takes no part in a cancel', 'cancel again', { instance });
    const out = await app.stores.partitions.cancelChange(id.toLowerCase(), requester(req, app.lease.holderId));
    if (out.kind === 'notFound') return notFound();
    const view = (c: PartitionChange) => partitionChangeView(c, app.config.partitions.stuckSteps);
    if (out.kind === 'switched') {
      const c = out.change;
      return c.state === 'completed'
        ? problem(409, 'partition-change-completed', 'The change has completed', `${describeChange(c)} has completed: nothing to cancel; ` +
            `to go back, request the previous count (POST /api/ops/partitions {"count": ${c.fromCount}})`, { instance, change: view(c) })
        : problem(409, 'partition-change-switched', 'The change has switched the count: it rolls forward',
          `${describeChange(c)} switched the count to ${c.toCount} at ${c.switchedAt?.toISOString() ?? '?'}: intents already live under the new ` +
            'count, so it can only roll forward (each step resumes from its recorded cursor). If it does not progress, its lastStepError names ' +
            'the cause (a lock another session holds, a statement timeout): remove it (docs/operations.md, "A count change that does not ' +
            `progress"). Once completed, request count ${c.fromCount} to go back.`, { instance, change: view(c) });
    }
    const leasesReleased = await releaseChangerLeases(app, out.change);
    const c = out.change;
    const movingBack = c.state === 'preparing';
    app.logger.warn({ event: 'partition_change_cancelled', change_id: c.changeId, from_count: c.fromCount, cancelled_by: c.cancelledBy,
      reason: body.reason, already: out.kind === 'alreadyCancelled', leases_released: leasesReleased, rows_moved: c.rowsMoved, moving_back: movingBack },
    `partition change cancelled before its switch: the count stays ${c.fromCount}; leaders resume` +
      (movingBack ? '; the finished intents its preparing pass moved go back (the change ends once they have)' : ''));
    return json(200, { cancelled: true, alreadyCancelled: out.kind === 'alreadyCancelled', movingBack, leasesReleased, change: view(c) });
  });
}
