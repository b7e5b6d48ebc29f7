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
    const body = await optionalReason(req, instance);
    if (!body.ok) return body.response;
    const { request, created } = await app.stores.ops.requestHandover(app.config.lease.name, uuidv7(), requester(req, app.lease.holderId), body.reason);
    app.logger.warn({ event: 'handover_requested', lease_name: request.leaseName, request_id: request.requestId, requested_by: request.requestedBy,
      requested_epoch: request.requestedEpoch, reason: request.reason, created }, created ? 'leader handover requested' : 'leader handover already pending');
    return json(202, handoverView(request));
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
    const list = await app.stores.ops.listHandovers(app.config.lease.name, limit);
    const pending = list.find((r) => r.status === 'pending') ?? null;
    return json(200, { leaseName: app.config.lease.name, pending: pending && handoverView(pending), requests: list.map(handoverView) });
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
    const leaseName = app.config.lease.name;
    if (change === null) return json(200, controlView(await app.stores.ops.getExecutionControl(leaseName)));
    const body = await optionalReason(req, instance);
    if (!body.ok) return body.response;
    const c = await app.stores.ops.setPaused(leaseName, change === 'pause', requester(req, app.lease.holderId), body.reason);
    app.logger.warn({ event: change === 'pause' ? 'execution_paused' : 'execution_resumed', lease_name: leaseName, changed_by: c.changedBy,
      reason: c.reason }, change === 'pause' ? 'execution paused cluster-wide' : 'execution resumed cluster-wide');
    return json(200, controlView(c));
  });
}
