// The partition-count routes (issue 26), admin level like the other ops routes, on any instance (they read and write
// SQL only): POST /ops/partitions {count} records a change that partition 0's changer then executes (drain, take every
// lease, switch, move rows, complete); GET /ops/partitions shows the recorded count, the change in progress, the
// recent ones and the partition leases; GET /ops/partitions/{changeId} one change. Errors are problem+json.
import { COUNT_CHANGE_MIN_VERSION } from '../config.js';
import { liveOlderReleases } from '../lease/olderReleases.js';
import { validate } from '../intents/contract.js';
import { isUuid, uuidv7 } from '../intents/ids.js';
import { leaseNameRoomProblem, partitionLeaseName } from '../limits.js';
import { isChangeActive, type PartitionChange } from '../store/partitionPorts.js';
import type { HttpContext } from './context.js';
import { guarded } from './guarded.js';
import { partitionCountBodySchema, type ChangeLeaseView, type PartitionChangeView } from './openapi/partitionSchemas.js';
import { json, problem, validationProblem, type ApiResponse } from './problem.js';
import { readJsonBody, requester, type ApiHandler } from './request.js';

/** Changes listed by GET /ops/partitions. */
export const RECENT_CHANGES = 20;

export type PartitionsContext = Pick<HttpContext, 'config' | 'logger' | 'lease'> & { stores: Pick<HttpContext['stores'], 'partitions' | 'lease' | 'instances'> };

/** The change as the API shows it; `stuckSteps` is PARTITION_CHANGE_STUCK_STEPS (failed steps in a row that make it stuck). */
export const partitionChangeView = (c: PartitionChange, stuckSteps: number): PartitionChangeView => ({
  changeId: c.changeId,
  fromCount: c.fromCount,
  toCount: c.toCount,
  state: c.state,
  requestedAt: c.requestedAt.toISOString(),
  requestedBy: c.requestedBy,
  prepareCursor: c.prepareCursor,
  preparedAt: c.preparedAt?.toISOString() ?? null,
  changer: c.changer,
  claimedAt: c.claimedAt?.toISOString() ?? null,
  switchedAt: c.switchedAt?.toISOString() ?? null,
  scanCursor: c.scanCursor,
  scanDoneAt: c.scanDoneAt?.toISOString() ?? null,
  rowsMoved: c.rowsMoved,
  completedAt: c.completedAt?.toISOString() ?? null,
  failedSteps: c.failedSteps,
  stuck: isChangeActive(c) && c.failedSteps >= stuckSteps,
  lastStepError: c.lastStepError,
  lastFailedAt: c.lastFailedAt?.toISOString() ?? null,
  cancelledAt: c.cancelledAt?.toISOString() ?? null,
  cancelledBy: c.cancelledBy,
});

export const describeChange = (c: PartitionChange) =>
  `${c.changeId} from ${c.fromCount} to ${c.toCount} (${c.state}, requested at ${c.requestedAt.toISOString()} by ${c.requestedBy})`;

/** The lease rows of partitions 0..n−1 (one read each, in parallel); held and heldByChanger by database time. */
async function changeLeases(app: PartitionsContext, n: number, changer: string | null): Promise<ChangeLeaseView[]> {
  return Promise.all(Array.from({ length: n }, async (_, partition) => {
    const leaseName = partitionLeaseName(app.config.lease.name, partition);
    const row = await app.stores.lease.get(leaseName);
    const held = row !== null && row.expiresAt.getTime() > row.dbNow.getTime();
    return {
      partition, leaseName, holderId: row?.holderId ?? null, leaseEpoch: row?.leaseEpoch ?? 0,
      expiresAt: row?.expiresAt.toISOString() ?? null, held, heldByChanger: held && changer !== null && row!.holderId === changer,
    };
  }));
}

/** The live instances (instances registry, INSTANCE_LIVE_WINDOW_MS) of a release older than COUNT_CHANGE_MIN_VERSION,
 *  when the request could start a change; none when it cannot (N is the recorded count and nothing is active: 200
 *  unchanged; or the active change is to N: its retry), so those answers stay as they were. A change that both starts
 *  and completes between this read and the request's own is the one case it misses. */
async function olderInstances(app: PartitionsContext, n: number): Promise<{ holderId: string; version: string }[]> {
  const layout = await app.stores.partitions.readLayout();
  if (layout.active ? layout.active.toCount === n : layout.count === n) return [];
  return liveOlderReleases(app.stores.instances, app.config.instances.liveWindowMs);
}

/** 409 older-release-live naming the live instances of a release older than COUNT_CHANGE_MIN_VERSION: `why` that
 *  matters, `retry` what to do once none is live. */
export function olderReleaseProblem(older: { holderId: string; version: string }[], why: string, retry: string,
  extra: Record<string, unknown>): ApiResponse {
  return problem(409, 'older-release-live', 'An instance runs a release older than count changes need',
    `${older.map((i) => `${i.holderId} (${i.version})`).join(', ')} ${older.length === 1 ? 'runs' : 'run'} a release older than ` +
      `${COUNT_CHANGE_MIN_VERSION}, ${why}: finish the deployment (or stop them) and ${retry} once no such instance is live ` +
      '(GET /api/instances)', { ...extra, minimumVersion: COUNT_CHANGE_MIN_VERSION, olderInstances: older });
}

/**
 * POST /ops/partitions {"count": N}. Checked before anything is recorded: the body (400), N ≤ this instance's
 * EXECUTOR_PARTITIONS (409: a count no timer function of this deployment runs), LEASE_NAME has room for N partitions'
 * names (409), no live instance (instances registry, INSTANCE_LIVE_WINDOW_MS) runs a release older than
 * COUNT_CHANGE_MIN_VERSION (409 naming them: the database refuses its changer the steps of a change this release
 * requests, and before 0.2.0 its intake is not excluded from the switch). Then the store
 * records it, serialized with other requests: 202 created; 202 the active change to the
 * same N (a retried POST, also after a lost reply, finds its change: idempotent); 200 when N is the recorded count
 * and nothing is active; 409 naming another active change.
 */
export function requestPartitionCountHandler(app: PartitionsContext): ApiHandler {
  return guarded(app.logger, 'ops', 'postPartitions', async (req, instance) => {
    const body = await readJsonBody(req, instance);
    if (!body.ok) return body.response;
    const v = validate(partitionCountBodySchema, body.value);
    if (!v.ok) return validationProblem(v.errors, instance);
    const n = v.value.count;
    const capacity = app.config.partitions.count;
    if (n > capacity) {
      return problem(409, 'partition-capacity', 'Count above EXECUTOR_PARTITIONS',
        `count ${n} is more than this instance's EXECUTOR_PARTITIONS (${capacity}): partitions ${capacity}..${n - 1} would have no timer ` +
          `function here; deploy with EXECUTOR_PARTITIONS ≥ ${n} first, then request count ${n}`,
        { instance, count: n, executorPartitions: capacity });
    }
    const room = leaseNameRoomProblem(app.config.lease.name, n, `count ${n}`);
    if (room !== null) return problem(409, 'lease-name-room', 'LEASE_NAME too long for the count', room, { instance, count: n });
    const older = await olderInstances(app, n);
    if (older.length > 0) {
      return olderReleaseProblem(older, 'whose changer cannot take part in this release\'s count changes', `request count ${n} again`,
        { instance, count: n });
    }
    const by = requester(req, app.lease.holderId);
    const out = await app.stores.partitions.requestChange(n, by, uuidv7());
    if (out.kind === 'unchanged') {
      return json(200, { unchanged: true, count: out.count.count, recordedAt: out.count.recordedAt.toISOString(), recordedBy: out.count.recordedBy });
    }
    if (out.kind === 'conflict') {
      const a = out.active;
      return problem(409, 'partition-change-active', 'Another partition change is active',
        `another change is in progress: ${describeChange(a)}; ` + (a.cancelledAt === null
          ? `it completes first (GET /api/ops/partitions/${a.changeId}), or, before its switch, cancel it (POST /api/ops/partitions/${a.changeId}/cancel)`
          : `it was cancelled and moves the finished intents its preparing pass had moved back under count ${a.fromCount}, then ends by itself ` +
            `(GET /api/ops/partitions/${a.changeId}): request count ${n} once it has`),
        { instance, activeChange: partitionChangeView(a, app.config.partitions.stuckSteps) });
    }
    if (out.kind === 'existing' && out.change.cancelledAt !== null) {
      // A cancelled change moving rows back runs from the count to itself: asking for that count changes nothing.
      const layout = await app.stores.partitions.readLayout();
      return json(200, { unchanged: true, count: layout.count, recordedAt: layout.recordedAt.toISOString(), recordedBy: layout.recordedBy });
    }
    const c = out.change;
    app.logger.warn({ event: 'partition_change_requested', change_id: c.changeId, from_count: c.fromCount, to_count: c.toCount,
      requested_by: c.requestedBy, state: c.state, created: out.kind === 'created' },
    out.kind === 'created' ? 'partition count change requested' : 'partition count change already active');
    return json(202, { created: out.kind === 'created', change: partitionChangeView(c, app.config.partitions.stuckSteps) });
  });
}

/** GET /ops/partitions: the layout, the newest changes and the lease of every partition the count or a change spans. */
export function partitionLayoutHandler(app: PartitionsContext): ApiHandler {
  return guarded(app.logger, 'ops', 'getPartitions', async () => {
    const [layout, changes] = await Promise.all([app.stores.partitions.readLayout(), app.stores.partitions.listChanges(RECENT_CHANGES)]);
    const active = layout.active;
    const leases = await changeLeases(app, Math.max(layout.count, active?.toCount ?? 0, active?.fromCount ?? 0), active?.changer ?? null);
    return json(200, {
      count: layout.count, recordedAt: layout.recordedAt.toISOString(), recordedBy: layout.recordedBy, generation: layout.generation,
      executorPartitions: app.config.partitions.count, dbNow: layout.dbNow.toISOString(),
      active: active && partitionChangeView(active, app.config.partitions.stuckSteps),
      changes: changes.map((c) => partitionChangeView(c, app.config.partitions.stuckSteps)), leases,
    });
  });
}

/** GET /ops/partitions/{changeId}: 404 for an id that is not a change (also one that is not a UUID). */
export function partitionChangeHandler(app: PartitionsContext): ApiHandler {
  return guarded(app.logger, 'ops', 'getPartitionChange', async (req, instance) => {
    const id = req.params.changeId ?? '';
    const change = isUuid(id) ? await app.stores.partitions.getChange(id.toLowerCase()) : null;
    if (!change) return problem(404, 'partition-change-not-found', 'Not found', `no partition change with id ${JSON.stringify(id.slice(0, 40))}`, { instance });
    return json(200, partitionChangeView(change, app.config.partitions.stuckSteps));
  });
}
