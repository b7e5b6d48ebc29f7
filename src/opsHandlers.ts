// Operations endpoints, framework-neutral like healthHandlers.ts: GET /metrics (Prometheus text of this
// instance), GET /openapi.json, and the admin routes — leader drain requests (POST/GET /ops/lease/release),
// cluster-wide pause/resume (POST /ops/execution/pause|resume) and the control row (GET /ops/execution). All of
// them work on any instance: they read and write SQL, which the leader consults at its refresh.
// Errors are problem+json like the intents API: store failures 503, anything else 500 (logged, no body data).
import type { App } from './app.js';
import { validate } from './intents/contract.js';
import { readJsonBody, type ApiRequest, type ApiResponse } from './intents/http.js';
import { internalError, json, storeUnavailable, validationProblem } from './intents/problem.js';
import { sqlErrorField } from './observability/logger.js';
import { renderClusterMetrics } from './http/metrics.js';
import { PROMETHEUS_CONTENT_TYPE } from './observability/prometheus.js';
import { buildOpenApiDocument } from './openapi/document.js';
import { executionChangeBodySchema } from './openapi/schemas.js';
import { uuidv7 } from './intents/ids.js';
import type { ExecutionControl, HandoverRequest } from './store/opsPorts.js';
import { isStoreError } from './store/ports.js';

type Handler = (req: ApiRequest) => Promise<ApiResponse>;

/** Store failures → 503, anything else → 500 (logged without request data). */
export function guarded(app: App, route: string, fn: (req: ApiRequest, instance: string) => Promise<ApiResponse>): Handler {
  return async (req) => {
    let instance = '';
    try {
      instance = new URL(req.url, 'http://localhost').pathname;
      return await fn(req, instance);
    } catch (e) {
      if (isStoreError(e)) {
        app.logger.warn({ event: 'ops_api_store_error', route, store_error_kind: e.kind, sql_error: sqlErrorField(e) }, 'store failure on an operations route');
        return storeUnavailable(instance || undefined);
      }
      app.logger.error({ event: 'ops_api_error', route, error: { name: String((e as Error)?.name), message: String((e as Error)?.message) } },
        'unexpected error on an operations route');
      return internalError(instance || undefined);
    }
  };
}

/** This instance's series (labelled holder_id; per instance) followed by the cluster gauges read from SQL. A failed
 *  SQL read still serves the instance's series, with cluster_overview_up 0. */
export function metricsHandler(app: App): Handler {
  return guarded(app, 'metrics', async () => {
    const leaseName = app.config.lease.name;
    const overview = await app.stores.ops.getClusterOverview(leaseName).catch((e: unknown) => {
      app.logger.warn({ event: 'cluster_overview_failed', sql_error: sqlErrorField(e) }, 'cluster overview read failed; serving instance metrics only');
      return null;
    });
    return {
      status: 200,
      headers: { 'content-type': PROMETHEUS_CONTENT_TYPE, 'cache-control': 'no-store' },
      body: (await app.metricsRegistry.renderPrometheus()) + renderClusterMetrics(leaseName, overview),
    };
  });
}

let openApiJson: string | null = null;

/** No database: served even while the app cannot start. */
export async function openApiHandler(): Promise<ApiResponse> {
  openApiJson ??= JSON.stringify(buildOpenApiDocument());
  return { status: 200, headers: { 'content-type': 'application/json', 'cache-control': 'public, max-age=300' }, body: openApiJson };
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

/** Who: the Easy Auth principal when present, and the instance that served the request. */
const callerOf = (app: App, req: ApiRequest) => `${req.headers.get('x-ms-client-principal-name') ?? 'admin'}@${app.lease.holderId}`.slice(0, 128);

/**
 * Leader drain as a request recorded in SQL, from any instance (on Flex, HTTP instances never lead): 202 with the
 * request. The leader reads it at its next schedule refresh, starts nothing more, finishes and fences what is in
 * flight, marks it completed and releases the lease; any instance may acquire at its next tick (no stand-down).
 */
export function releaseLeaseHandler(app: App): Handler {
  return guarded(app, 'releaseLease', async (req, instance) => {
    const body = await optionalReason(req, instance);
    if (!body.ok) return body.response;
    const { request, created } = await app.stores.ops.requestHandover(app.config.lease.name, uuidv7(), callerOf(app, req), body.reason);
    app.logger.warn({ event: 'handover_requested', lease_name: request.leaseName, request_id: request.requestId, requested_by: request.requestedBy,
      requested_epoch: request.requestedEpoch, reason: request.reason, created }, created ? 'leader handover requested' : 'leader handover already pending');
    return json(202, handoverView(request));
  });
}

/** GET: the pending request (if any) and the newest requests, `?limit=` (1–100, default 20). */
export function handoversHandler(app: App): Handler {
  return guarded(app, 'getHandovers', async (req, instance) => {
    const raw = new URL(req.url, 'http://localhost').searchParams.get('limit');
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
export function executionControlHandler(app: App, change: 'pause' | 'resume' | null): Handler {
  return guarded(app, change ? `${change}Execution` : 'getExecution', async (req, instance) => {
    const leaseName = app.config.lease.name;
    if (change === null) return json(200, controlView(await app.stores.ops.getExecutionControl(leaseName)));
    const body = await optionalReason(req, instance);
    if (!body.ok) return body.response;
    const c = await app.stores.ops.setPaused(leaseName, change === 'pause', callerOf(app, req), body.reason);
    app.logger.warn({ event: change === 'pause' ? 'execution_paused' : 'execution_resumed', lease_name: leaseName, changed_by: c.changedBy,
      reason: c.reason }, change === 'pause' ? 'execution paused cluster-wide' : 'execution resumed cluster-wide');
    return json(200, controlView(c));
  });
}
