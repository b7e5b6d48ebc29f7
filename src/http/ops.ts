// The admin routes of operations: leader drain requests (POST/GET /ops/lease/release), pause/resume of the cluster or of
// one partition (POST /ops/execution/pause|resume) and the control rows (GET /ops/execution). They work on any instance:
// they read and write SQL (the recorded layout says which partitions exist), which every leader consults at its
// refresh. Errors are problem+json through `guarded`.
import { validate } from '../intents/contract.js';
import { uuidv7 } from '../intents/ids.js';
import type { HandoverRequest, PauseFlag } from '../store/opsPorts.js';
import type { PartitionControl } from '../store/insightPorts.js';
import type { HttpContext } from './context.js';
import { guarded } from './guarded.js';
import { executionChangeBodySchema } from './openapi/schemas.js';
import { json, problem, validationProblem, type ApiResponse } from './problem.js';
import { parseUrl, readJsonBody, requester, type ApiHandler, type ApiRequest } from './request.js';
import { clusterControlName, partitionLeaseName } from '../limits.js';
import { clusterPauseNote, controlParam, partitionControlRows, partitionPauseNote, partitionParam, recordedPartitions,
  type RecordedPartitions } from './opsScope.js';

const handoverView = (r: HandoverRequest) => ({
  requestId: r.requestId,
  leaseName: r.leaseName,
  status: r.status,
  requestedAt: r.requestedAt.toISOString(),
  requestedBy: r.requestedBy,
  reason: r.reason,
  requestedEpoch: r.requestedEpoch,
  completedAt: r.completedAt?.toISOString() ?? null,
  completedEpoch: r.completedEpoch,
  completedBy: r.completedBy,
});

/** Optional `{reason}` body of the admin POSTs: the reason, or the problem response. */
export async function optionalReason(req: ApiRequest, instance: string): Promise<{ ok: true; reason: string | null } | { ok: false; response: ApiResponse }> {
  const text = await req.text();
  if (text.trim() === '') return { ok: true, reason: null };
  const body = await readJsonBody({ ...req, text: async () => text }, instance);
  if (!body.ok) return body;
  const v = validate(executionChangeBodySchema, body.value);
  if (!v.ok) return { ok: false, response: validationProblem(v.errors, instance) };
  return { ok: true, reason: v.value.reason ?? null };
}

/**
 * Leader drain as a request recorded in SQL, from any instance (on Flex, HTTP instances never lead): 202 with the
 * request. Without ?partition=: one request per partition of the recorded layout (the count, or an active change's
 * larger count), whatever this instance's EXECUTOR_PARTITIONS. Each leader reads its request at its next schedule
 * refresh, starts nothing more, finishes and fences what is in flight, marks it completed and releases the lease; any
 * instance may acquire at its next tick (no stand-down).
 */
export function releaseLeaseHandler(app: HttpContext): ApiHandler {
  return guarded(app.logger, 'ops', 'releaseLease', async (req, instance) => {
    const rec = await recordedPartitions(app);
    const target = partitionParam(req, rec, instance);
    if (!target.ok) return target.response;
    const body = await optionalReason(req, instance);
    if (!body.ok) return body.response;
    const partitions = target.partition === null ? Array.from({ length: rec.span }, (_, k) => k) : [target.partition];
    const scope = target.partition === null ? 'cluster' : 'partition';
    const views = [];
    for (const k of partitions) {
      const { request, created } = await app.stores.ops.requestHandover(partitionLeaseName(app.config.lease.name, k), uuidv7(),
        requester(req, app.lease.holderId), body.reason);
      app.logger.warn({ event: 'handover_requested', lease_name: request.leaseName, request_id: request.requestId, requested_by: request.requestedBy,
        requested_epoch: request.requestedEpoch, reason: request.reason, created, scope }, created ? 'leader handover requested' : 'leader handover already pending');
      views.push(handoverView(request));
    }
    // One partition: the request itself (as before partitions). Several: the first, and every partition's request.
    return json(202, views.length === 1 ? { ...views[0], scope } : { ...views[0], scope, partitions: views });
  });
}

/** GET: the pending request (if any) and the newest requests, `?limit=` (1–100, default 20). */
export function handoversHandler(app: HttpContext): ApiHandler {
  return guarded(app.logger, 'ops', 'getHandovers', async (req, instance) => {
    const raw = parseUrl(req.url).searchParams.get('limit');
    const limit = raw === null ? 20 : Number(raw);
    if (!Number.isInteger(limit) || limit < 1 || limit > 100) {
      return validationProblem([{ path: 'limit', message: 'must be an integer from 1 to 100' }], instance);
    }
    const target = partitionParam(req, await recordedPartitions(app), instance);
    if (!target.ok) return target.response;
    // Without ?partition=, partition 0 (LEASE_NAME itself): the answer is today's with one partition.
    const leaseName = partitionLeaseName(app.config.lease.name, target.partition ?? 0);
    const list = await app.stores.ops.listHandovers(leaseName, limit);
    const pending = list.find((r) => r.status === 'pending') ?? null;
    return json(200, { leaseName, pending: pending && handoverView(pending), requests: list.map(handoverView) });
  });
}

/** Which pause keeps a partition from sending: the cluster's (it wins), its own, or none (a row beyond the layout: none). */
const heldBy = (own: boolean, cluster: PauseFlag, inLayout = true) => (!inLayout ? null : cluster.paused ? 'cluster' : own ? 'partition' : null);

const flagView = (f: PauseFlag) => ({ paused: f.paused, changedAt: f.changedAt?.toISOString() ?? null, changedBy: f.changedBy, reason: f.reason });

const partitionView = (c: PartitionControl, cluster: PauseFlag, inLayout: boolean) => ({
  scope: 'partition' as const, partition: c.partition, leaseName: c.leaseName, ...flagView(c),
  pendingHandoverId: c.pendingHandover?.requestId ?? null, heldBy: heldBy(c.paused, cluster, inLayout), inLayout,
});

/** The cluster's flag, every partition of the recorded layout with its own flag and what holds it, and the paused rows
 *  beyond the layout (two statements). `stillHeld`: the layout's partitions held by their own flag (a cluster resume
 *  leaves them held); `running`: nothing holds any partition of the layout. */
async function clusterControlView(app: HttpContext, rec: RecordedPartitions) {
  const name = clusterControlName(app.config.lease.name);
  const [cluster, { rows, beyond }] = await Promise.all([app.stores.ops.getExecutionControl(name), partitionControlRows(app, rec)]);
  const a = rec.layout.active;
  const stillHeld = rows.filter((c) => c.paused).map((c) => c.partition);
  return {
    scope: 'cluster' as const, leaseName: name, ...flagView(cluster), dbNow: cluster.dbNow.toISOString(),
    running: !cluster.paused && stillHeld.length === 0, stillHeld,
    // Partition 0's pending drain (as before partitions); every partition's is in `partitions`.
    pendingHandoverId: rows[0]?.pendingHandover?.requestId ?? null,
    partitionCount: rec.layout.count,
    partitionChange: a && { changeId: a.changeId, fromCount: a.fromCount, toCount: a.toCount, state: a.state },
    partitions: [...rows.map((c) => partitionView(c, cluster, true)), ...beyond.map((c) => partitionView(c, cluster, false))],
    note: clusterPauseNote,
  };
}

/** Partition k's flag, the cluster's read in the same statement, and what the pause of k holds. */
async function partitionControlView(app: HttpContext, rec: RecordedPartitions, k: number) {
  const leaseName = partitionLeaseName(app.config.lease.name, k);
  const c = await app.stores.ops.getExecutionControl(leaseName, clusterControlName(app.config.lease.name));
  const cluster = c.cluster!;
  const inLayout = k < rec.span;
  return {
    scope: 'partition' as const, partition: k, leaseName, ...flagView(c), dbNow: c.dbNow.toISOString(), pendingHandoverId: c.pendingHandoverId,
    heldBy: heldBy(c.paused, cluster, inLayout), inLayout, clusterPaused: cluster.paused, note: partitionPauseNote(k, rec.layout, inLayout),
  };
}

/** Resume everything: every partition's own flag that is set (the layout's and beyond it), then the cluster's, so the
 *  partitions held by the cluster's flag resume together. The partitions and whether the cluster's flag were cleared. */
async function resumeAll(app: HttpContext, rec: RecordedPartitions, by: string, reason: string | null) {
  const { rows, beyond } = await partitionControlRows(app, rec);
  const partitions = [...rows, ...beyond].filter((c) => c.paused).map((c) => c.partition);
  for (const k of partitions) await app.stores.ops.setPaused(partitionLeaseName(app.config.lease.name, k), false, by, reason);
  const name = clusterControlName(app.config.lease.name);
  const before = await app.stores.ops.getExecutionControl(name);
  if (before.paused) await app.stores.ops.setPaused(name, false, by, reason);
  return { cluster: before.paused, partitions };
}

/** A cluster resume that leaves partitions held by their own flag: 409, so no caller takes it for running. The
 *  cluster's flag is cleared (a retry answers the same); ?partition=all resumes everything. */
function stillHeldProblem(view: Awaited<ReturnType<typeof clusterControlView>>, instance: string): ApiResponse {
  const list = view.stillHeld.join(', ');
  return problem(409, 'execution-still-held', 'Execution still held by partition pauses',
    `the cluster's pause is lifted, but partition${view.stillHeld.length === 1 ? '' : 's'} ${list} ${view.stillHeld.length === 1 ? 'is' : 'are'} ` +
    'still paused by ' + (view.stillHeld.length === 1 ? 'its' : 'their') + ' own flag and send nothing (a pause recorded by an earlier release is ' +
    'partition 0\'s own flag, or every partition\'s): POST /api/ops/execution/resume?partition=all resumes everything, ?partition=k one partition',
    { instance, stillHeld: view.stillHeld, execution: view });
}

/** GET (change null): the cluster's control and every partition's (?partition=k: that partition's, beyond the layout
 *  too). POST pause/resume: set the flag (idempotent) of the cluster, or with ?partition=k of partition k alone (a pause:
 *  k within the recorded layout; a resume: any partition row, as a shrink leaves them); the two are independent, and a
 *  cluster resume that leaves a partition held answers 409 (stillHeld). POST resume?partition=all clears every flag.
 *  Every leader reads both flags at its next tick or schedule refresh and starts (and sends) nothing while either is
 *  set. Optional body {reason}. */
export function executionControlHandler(app: HttpContext, change: 'pause' | 'resume' | null): ApiHandler {
  return guarded(app.logger, 'ops', change ? `${change}Execution` : 'getExecution', async (req, instance) => {
    const rec = await recordedPartitions(app);
    const target = controlParam(req, rec, instance, change);
    if (!target.ok) return target.response;
    if (change === null) {
      return json(200, target.partition === null ? await clusterControlView(app, rec) : await partitionControlView(app, rec, target.partition as number));
    }
    const body = await optionalReason(req, instance);
    if (!body.ok) return body.response;
    const by = requester(req, app.lease.holderId);
    if (target.partition === 'all') {
      const resumed = await resumeAll(app, rec, by, body.reason);
      app.logger.warn({ event: 'execution_resumed', scope: 'all', changed_by: by, reason: body.reason, cluster: resumed.cluster,
        partitions: resumed.partitions }, 'execution resumed everywhere: every partition\'s own pause and the cluster\'s');
      return json(200, { ...await clusterControlView(app, rec), resumed });
    }
    const name = target.partition === null ? clusterControlName(app.config.lease.name) : partitionLeaseName(app.config.lease.name, target.partition);
    const c = await app.stores.ops.setPaused(name, change === 'pause', by, body.reason);
    const view = target.partition === null ? await clusterControlView(app, rec) : await partitionControlView(app, rec, target.partition);
    app.logger.warn({ event: change === 'pause' ? 'execution_paused' : 'execution_resumed', lease_name: name,
      scope: target.partition === null ? 'cluster' : 'partition', changed_by: c.changedBy, reason: c.reason,
      ...('stillHeld' in view ? { still_held: view.stillHeld } : {}) },
    `execution ${change === 'pause' ? 'paused' : 'resumed'} ${target.partition === null ? 'for the cluster (every partition)' : `on partition ${target.partition}`}` +
      ('stillHeld' in view && change === 'resume' && view.stillHeld.length ? `; partitions ${view.stillHeld.join(', ')} still held by their own pause` : ''));
    if ('stillHeld' in view && change === 'resume' && view.stillHeld.length > 0) return stillHeldProblem(view, instance);
    return json(200, view);
  });
}
