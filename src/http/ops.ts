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
import { json, validationProblem, type ApiResponse } from './problem.js';
import { parseUrl, readJsonBody, requester, type ApiHandler, type ApiRequest } from './request.js';
import { clusterControlName, partitionLeaseName } from '../limits.js';
import { partitionRef } from './leases.js';
import { clusterPauseNote, partitionPauseNote, partitionParam, recordedPartitions, type RecordedPartitions } from './opsScope.js';

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
async function optionalReason(req: ApiRequest, instance: string): Promise<{ ok: true; reason: string | null } | { ok: false; response: ApiResponse }> {
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

/** Which pause keeps a partition from sending: the cluster's (it wins), its own, or none. */
const heldBy = (own: boolean, cluster: PauseFlag) => (cluster.paused ? 'cluster' : own ? 'partition' : null);

const flagView = (f: PauseFlag) => ({ paused: f.paused, changedAt: f.changedAt?.toISOString() ?? null, changedBy: f.changedBy, reason: f.reason });

const partitionView = (c: PartitionControl, cluster: PauseFlag) => ({
  scope: 'partition' as const, partition: c.partition, leaseName: c.leaseName, ...flagView(c),
  pendingHandoverId: c.pendingHandover?.requestId ?? null, heldBy: heldBy(c.paused, cluster),
});

/** The cluster's flag, and every partition of the recorded layout with its own flag and what holds it (two statements). */
async function clusterControlView(app: HttpContext, rec: RecordedPartitions) {
  const refs = Array.from({ length: rec.span }, (_, k) => partitionRef(app, k));
  const name = clusterControlName(app.config.lease.name);
  const [cluster, controls] = await Promise.all([app.stores.ops.getExecutionControl(name), app.stores.insights.partitionControls(refs)]);
  const a = rec.layout.active;
  return {
    scope: 'cluster' as const, leaseName: name, ...flagView(cluster), dbNow: cluster.dbNow.toISOString(),
    // Partition 0's pending drain (as before partitions); every partition's is in `partitions`.
    pendingHandoverId: controls[0]?.pendingHandover?.requestId ?? null,
    partitionCount: rec.layout.count,
    partitionChange: a && { changeId: a.changeId, fromCount: a.fromCount, toCount: a.toCount, state: a.state },
    partitions: controls.map((c) => partitionView(c, cluster)),
    note: clusterPauseNote,
  };
}

/** Partition k's flag, the cluster's read in the same statement, and what the pause of k holds. */
async function partitionControlView(app: HttpContext, rec: RecordedPartitions, k: number) {
  const leaseName = partitionLeaseName(app.config.lease.name, k);
  const c = await app.stores.ops.getExecutionControl(leaseName, clusterControlName(app.config.lease.name));
  const cluster = c.cluster!;
  return {
    scope: 'partition' as const, partition: k, leaseName, ...flagView(c), dbNow: c.dbNow.toISOString(), pendingHandoverId: c.pendingHandoverId,
    heldBy: heldBy(c.paused, cluster), clusterPaused: cluster.paused, note: partitionPauseNote(k, rec.layout),
  };
}

/** GET (change null): the cluster's control and every partition's (?partition=k: that partition's). POST pause/resume:
 *  set the flag (idempotent) of the cluster, or with ?partition=k of partition k alone (k within the recorded layout);
 *  the two are independent. Every leader reads both at its next tick or schedule refresh and starts (and sends) nothing
 *  while either is set. Optional body {reason}. */
export function executionControlHandler(app: HttpContext, change: 'pause' | 'resume' | null): ApiHandler {
  return guarded(app.logger, 'ops', change ? `${change}Execution` : 'getExecution', async (req, instance) => {
    const rec = await recordedPartitions(app);
    const target = partitionParam(req, rec, instance);
    if (!target.ok) return target.response;
    if (change !== null) {
      const body = await optionalReason(req, instance);
      if (!body.ok) return body.response;
      const name = target.partition === null ? clusterControlName(app.config.lease.name) : partitionLeaseName(app.config.lease.name, target.partition);
      const c = await app.stores.ops.setPaused(name, change === 'pause', requester(req, app.lease.holderId), body.reason);
      app.logger.warn({ event: change === 'pause' ? 'execution_paused' : 'execution_resumed', lease_name: name,
        scope: target.partition === null ? 'cluster' : 'partition', changed_by: c.changedBy, reason: c.reason },
      `execution ${change === 'pause' ? 'paused' : 'resumed'} ${target.partition === null ? 'for the cluster (every partition)' : `on partition ${target.partition}`}`);
    }
    return json(200, target.partition === null ? await clusterControlView(app, rec) : await partitionControlView(app, rec, target.partition));
  });
}
