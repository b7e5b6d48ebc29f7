// The admin routes of operations: leader drain requests (POST/GET /ops/lease/release), cluster-wide pause/resume
// (POST /ops/execution/pause|resume) and the control row (GET /ops/execution). They work on any instance: they
// read and write SQL, which the leader consults at its refresh. Errors are problem+json through `guarded`.
import { validate } from '../intents/contract.js';
import { uuidv7 } from '../intents/ids.js';
import type { ExecutionControl, HandoverRequest } from '../store/opsPorts.js';
import type { HttpContext } from './context.js';
import { guarded } from './guarded.js';
import { executionChangeBodySchema } from './openapi/schemas.js';
import { json, validationProblem, type ApiResponse } from './problem.js';
import { parseUrl, readJsonBody, requester, type ApiHandler, type ApiRequest } from './request.js';
import { partitionLeaseName } from '../limits.js';

/** The partitions an admin request is about: `?partition=k` names one, none means every partition (with one
 *  partition, LEASE_NAME itself, as before partitions existed). */
function targetPartitions(req: ApiRequest, app: HttpContext, instance: string): { ok: true; partitions: number[] } | { ok: false; response: ApiResponse } {
  const count = app.config.partitions.count;
  const raw = parseUrl(req.url).searchParams.get('partition');
  if (raw === null) return { ok: true, partitions: Array.from({ length: count }, (_, k) => k) };
  const k = /^\d{1,3}$/.test(raw) ? Number(raw) : NaN;
  if (!Number.isInteger(k) || k >= count) {
    return { ok: false, response: validationProblem([{ path: 'partition', message: `must be an integer from 0 to ${count - 1} (EXECUTOR_PARTITIONS is ${count})` }], instance) };
  }
  return { ok: true, partitions: [k] };
}


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
 * request. The leader reads it at its next schedule refresh, starts nothing more, finishes and fences what is in
 * flight, marks it completed and releases the lease; any instance may acquire at its next tick (no stand-down).
 */
export function releaseLeaseHandler(app: HttpContext): ApiHandler {
  return guarded(app.logger, 'ops', 'releaseLease', async (req, instance) => {
    const target = targetPartitions(req, app, instance);
    if (!target.ok) return target.response;
    const body = await optionalReason(req, instance);
    if (!body.ok) return body.response;
    const views = [];
    for (const k of target.partitions) {
      const { request, created } = await app.stores.ops.requestHandover(partitionLeaseName(app.config.lease.name, k), uuidv7(),
        requester(req, app.lease.holderId), body.reason);
      app.logger.warn({ event: 'handover_requested', lease_name: request.leaseName, request_id: request.requestId, requested_by: request.requestedBy,
        requested_epoch: request.requestedEpoch, reason: request.reason, created }, created ? 'leader handover requested' : 'leader handover already pending');
      views.push(handoverView(request));
    }
    // One partition: the request itself (as before partitions). Several: the first, and every partition's request.
    return json(202, views.length === 1 ? views[0] : { ...views[0], partitions: views });
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
    const rawPartition = parseUrl(req.url).searchParams.get('partition');
    const target = targetPartitions(req, app, instance);
    if (!target.ok) return target.response;
    // Without ?partition=, partition 0 (LEASE_NAME itself): the answer is today's with one partition.
    const leaseName = partitionLeaseName(app.config.lease.name, rawPartition === null ? 0 : target.partitions[0]!);
    const list = await app.stores.ops.listHandovers(leaseName, limit);
    const pending = list.find((r) => r.status === 'pending') ?? null;
    return json(200, { leaseName, pending: pending && handoverView(pending), requests: list.map(handoverView) });
  });
}

const controlView = (c: ExecutionControl) => ({
  leaseName: c.leaseName,
  paused: c.paused,
  changedAt: c.changedAt?.toISOString() ?? null,
  changedBy: c.changedBy,
  reason: c.reason,
  dbNow: c.dbNow.toISOString(),
  pendingHandoverId: c.pendingHandoverId,
});

/** GET (change null): the control row. POST pause/resume: set the flag (idempotent); every leader reads it
 *  at its next tick or schedule refresh and starts nothing while it is set. Optional body {reason}. */
export function executionControlHandler(app: HttpContext, change: 'pause' | 'resume' | null): ApiHandler {
  return guarded(app.logger, 'ops', change ? `${change}Execution` : 'getExecution', async (req, instance) => {
    const target = targetPartitions(req, app, instance);
    if (!target.ok) return target.response;
    const names = target.partitions.map((k) => partitionLeaseName(app.config.lease.name, k));
    const views = [];
    if (change === null) {
      for (const leaseName of names) views.push(controlView(await app.stores.ops.getExecutionControl(leaseName)));
    } else {
      const body = await optionalReason(req, instance);
      if (!body.ok) return body.response;
      for (const leaseName of names) {
        const c = await app.stores.ops.setPaused(leaseName, change === 'pause', requester(req, app.lease.holderId), body.reason);
        app.logger.warn({ event: change === 'pause' ? 'execution_paused' : 'execution_resumed', lease_name: leaseName, changed_by: c.changedBy,
          reason: c.reason }, `execution ${change === 'pause' ? 'paused' : 'resumed'} ${names.length === app.config.partitions.count ? 'cluster-wide' : `on ${leaseName}`}`);
        views.push(controlView(c));
      }
    }
    // One partition: its control row (as before partitions). Several: the first, and every partition's row.
    return json(200, views.length === 1 ? views[0] : { ...views[0], partitions: views });
  });
}
