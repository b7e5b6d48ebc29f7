// Operations endpoints, framework-neutral like healthHandlers.ts: GET /metrics (Prometheus text of this
// instance), GET /openapi.json, and the admin routes — leader drain (POST /ops/lease/release), cluster-wide
// pause/resume (POST /ops/execution/pause|resume) and the control row (GET /ops/execution).
// Errors are problem+json like the intents API: store failures 503, anything else 500 (logged, no body data).
import type { App } from './app.js';
import { validate } from './intents/contract.js';
import { readJsonBody, type ApiRequest, type ApiResponse } from './intents/http.js';
import { internalError, json, problem, storeUnavailable, validationProblem } from './intents/problem.js';
import { sqlErrorField } from './observability/logger.js';
import { PROMETHEUS_CONTENT_TYPE } from './observability/prometheus.js';
import { buildOpenApiDocument } from './openapi/document.js';
import { executionChangeBodySchema } from './openapi/schemas.js';
import type { ExecutionControl } from './store/opsPorts.js';
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

export function metricsHandler(app: App): Handler {
  return guarded(app, 'metrics', async () => ({
    status: 200,
    headers: { 'content-type': PROMETHEUS_CONTENT_TYPE, 'cache-control': 'no-store' },
    body: await app.metricsRegistry.renderPrometheus(),
  }));
}

let openApiJson: string | null = null;

/** No database: served even while the app cannot start. */
export async function openApiHandler(): Promise<ApiResponse> {
  openApiJson ??= JSON.stringify(buildOpenApiDocument());
  return { status: 200, headers: { 'content-type': 'application/json', 'cache-control': 'public, max-age=300' }, body: openApiJson };
}

/** 409: the request reached a follower (requests are load-balanced). Names the leader when the database knows one. */
async function notLeader(app: App, instance: string, detail: string): Promise<ApiResponse> {
  const row = await app.stores.lease.get(app.config.lease.name);
  const live = row && row.expiresAt.getTime() > row.dbNow.getTime() ? row : null;
  return problem(409, 'not-leader', 'Not the leader', detail, {
    instance, holderId: app.lease.holderId, leaderHolderId: live?.holderId ?? null, leaderEpoch: live?.leaseEpoch ?? null,
  });
}

/**
 * Leader drain: stop starting attempts, let in-flight ones finish (their completions commit, fenced), release
 * the lease, and stay out of acquisition for one lease duration so a follower takes over at its next tick.
 * Answers when the lease is released (at most one tick budget + provider timeout later).
 */
export function releaseLeaseHandler(app: App): Handler {
  return guarded(app, 'releaseLease', async (_req, instance) => {
    const token = app.lease.requireLeader();
    const followerDetail = `this instance (${app.lease.holderId}) does not hold the lease; requests are load-balanced: ` +
      'retry until one reaches the leader (GET /api/lease names it)';
    if (!token) return notLeader(app, instance, followerDetail);
    const standDownMs = app.config.lease.durationMs;
    const fields = { holder_id: token.holderId, lease_epoch: token.leaseEpoch, stand_down_ms: standDownMs };
    app.logger.warn({ event: 'leader_drain_requested', ...fields }, 'leader drain requested: starting nothing, finishing in-flight attempts');
    const out = await app.executor.handOver(standDownMs);
    if (out !== 'released') {
      return notLeader(app, instance, `this instance (${app.lease.holderId}) lost the lease before it could release it; nothing to drain`);
    }
    app.logger.warn({ event: 'leader_drained', ...fields }, 'lease released after drain; a follower takes over at its next tick');
    return json(200, { released: true, holderId: token.holderId, leaseEpoch: token.leaseEpoch, standDownMs });
  });
}

const controlView = (c: ExecutionControl) => ({
  leaseName: c.leaseName,
  paused: c.paused,
  changedAt: c.changedAt?.toISOString() ?? null,
  changedBy: c.changedBy,
  reason: c.reason,
  dbNow: c.dbNow.toISOString(),
});

/** GET (change null): the control row. POST pause/resume: set the flag (idempotent); every leader reads it
 *  at its next tick or schedule refresh and starts nothing while it is set. Optional body {reason}. */
export function executionControlHandler(app: App, change: 'pause' | 'resume' | null): Handler {
  return guarded(app, change ? `${change}Execution` : 'getExecution', async (req, instance) => {
    const leaseName = app.config.lease.name;
    if (change === null) return json(200, controlView(await app.stores.ops.getExecutionControl(leaseName)));
    const text = await req.text();
    let reason: string | null = null;
    if (text.trim() !== '') {
      const body = await readJsonBody({ ...req, text: async () => text }, instance);
      if (!body.ok) return body.response;
      const v = validate(executionChangeBodySchema, body.value);
      if (!v.ok) return validationProblem(v.errors, instance);
      reason = v.value.reason ?? null;
    }
    // Who: the Easy Auth principal when present, and the instance that served the request.
    const principal = req.headers.get('x-ms-client-principal-name') ?? 'admin';
    const changedBy = `${principal}@${app.lease.holderId}`.slice(0, 128);
    const c = await app.stores.ops.setPaused(leaseName, change === 'pause', changedBy, reason);
    app.logger.warn({ event: change === 'pause' ? 'execution_paused' : 'execution_resumed', lease_name: leaseName, changed_by: c.changedBy,
      reason: c.reason }, change === 'pause' ? 'execution paused cluster-wide' : 'execution resumed cluster-wide');
    return json(200, controlView(c));
  });
}
