// The intents API and GET /lease (framework-neutral; functions/ registers them, the local host serves the same).
// Guarantees: transport checks first (request.ts: 413, 415, 413, 400), then the use-case validates (400
// problem+json naming each field); bad input never reaches the store. Every error is an RFC 9457 problem
// (application/problem+json); successes are application/json. Failures go through `guarded` (503 for the
// store, else 500), logged with the route and the error only — never the request body or payload.
import type { Config } from '../config.js';
import { silentLogger, type Logger } from '../observability/logger.js';
import { withSubmitSpan } from '../observability/tracing.js';
import type { IntentStore } from '../store/intentPorts.js';
import type { LeaseStore } from '../store/ports.js';
import { IDEMPOTENCY_HEADER, toAttemptView, toIntentView } from '../intents/contract.js';
import * as uc from '../intents/useCases.js';
import { guarded } from './guarded.js';
import { idempotencyConflict, json, notFound, problem, stateConflict, validationProblem, type ApiResponse } from './problem.js';
import { parseUrl, readJsonBody, type ApiHandler, type ApiRequest } from './request.js';

export interface IntentHandlerDeps {
  intents: IntentStore;
  lease: LeaseStore;
  leaseName: string;
  config: Pick<Config, 'retry' | 'provider'>;
  logger?: Logger;
  metrics?: uc.IntentDeps['metrics'];
}

export interface IntentHandlers {
  postIntent: ApiHandler;
  getIntent: ApiHandler;
  getIntentAttempts: ApiHandler;
  postCancel: ApiHandler;
  postReschedule: ApiHandler;
  listIntents: ApiHandler;
  getLease: ApiHandler;
}

export const intentLocation = (intentId: string) => `/api/intents/${intentId}`;

function queryOf(url: URL): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [k, v] of url.searchParams) (out[k] ??= []).push(v);
  return out;
}

export function createIntentHandlers(deps: IntentHandlerDeps): IntentHandlers {
  const log = deps.logger ?? silentLogger;
  const ucDeps: uc.IntentDeps = { intents: deps.intents, config: deps.config, ...(deps.metrics ? { metrics: deps.metrics } : {}) };

  const route = (name: string, fn: (req: ApiRequest, instance: string) => Promise<ApiResponse>): ApiHandler =>
    guarded(log, 'intents', name, fn);

  const idParam = (req: ApiRequest) => req.params.id ?? '';

  return {
    // One `intent.submit` span per request (a child of the caller's traceparent); its context is stored in the
    // intent so each attempt span links back to it.
    postIntent: route('postIntent', (req, instance) => withSubmitSpan(req.headers, async (span) => {
      const body = await readJsonBody(req, instance);
      if (!body.ok) return body.response;
      const r = await uc.submitIntent(ucDeps, { body: body.value, idempotencyKey: req.headers.get(IDEMPOTENCY_HEADER) });
      span.setAttribute('submit.outcome', r.kind);
      if (r.kind === 'created' || r.kind === 'replayed') span.setAttribute('intent.id', r.intent.intentId);
      switch (r.kind) {
        case 'invalid':
          return validationProblem(r.errors, instance);
        case 'conflict':
          return idempotencyConflict(r.intentId, instance);
        case 'created':
          log.debug({ event: 'intent_submitted', intent_id: r.intent.intentId }, 'intent submitted');
          return json(201, toIntentView(r.intent, { includePayload: true }), { location: intentLocation(r.intent.intentId) });
        case 'replayed':
          return json(200, toIntentView(r.intent, { includePayload: true }), { location: intentLocation(r.intent.intentId) });
      }
    })),

    getIntent: route('getIntent', async (req, instance) => {
      const r = await uc.getIntent(ucDeps, idParam(req));
      return r.kind === 'ok' ? json(200, toIntentView(r.intent, { includePayload: true })) : notFound(instance);
    }),

    getIntentAttempts: route('getIntentAttempts', async (req, instance) => {
      const r = await uc.listAttempts(ucDeps, idParam(req));
      if (r.kind !== 'ok') return notFound(instance);
      return json(200, { intentId: r.intent.intentId, attempts: r.attempts.map(toAttemptView) });
    }),

    postCancel: route('postCancel', async (req, instance) => {
      const r = await uc.cancelIntent(ucDeps, idParam(req));
      if (r.kind === 'notFound') return notFound(instance);
      if (r.kind === 'conflict') return stateConflict('cancel', r.intent.intentId, r.intent.status, instance);
      return json(200, toIntentView(r.intent, { includePayload: true }));
    }),

    postReschedule: route('postReschedule', async (req, instance) => {
      const body = await readJsonBody(req, instance);
      if (!body.ok) return body.response;
      const r = await uc.rescheduleIntent(ucDeps, idParam(req), body.value);
      if (r.kind === 'invalid') return validationProblem(r.errors, instance);
      if (r.kind === 'notFound') return notFound(instance);
      if (r.kind === 'conflict') return stateConflict('reschedule', r.intent.intentId, r.intent.status, instance);
      return json(200, toIntentView(r.intent, { includePayload: true }));
    }),

    listIntents: route('listIntents', async (req, instance) => {
      const r = await uc.listIntents(ucDeps, queryOf(parseUrl(req.url)));
      if (r.kind === 'invalid') return validationProblem(r.errors, instance);
      return json(200, { items: r.intents.map((i) => toIntentView(i)), nextAfter: r.nextAfter });
    }),

    /** The lease as the database holds it (for downstream fencing checks); `expired` is judged by database time. */
    getLease: route('getLease', async (_req, instance) => {
      const row = await deps.lease.get(deps.leaseName);
      if (!row) return problem(404, 'lease-not-found', 'Not found', `no lease named ${deps.leaseName} has been acquired yet`, { instance });
      return json(200, {
        leaseName: row.leaseName,
        holderId: row.holderId,
        leaseEpoch: row.leaseEpoch,
        acquiredAt: row.acquiredAt.toISOString(),
        renewedAt: row.renewedAt.toISOString(),
        expiresAt: row.expiresAt.toISOString(),
        dbNow: row.dbNow.toISOString(),
        expired: row.expiresAt.getTime() <= row.dbNow.getTime(),
      });
    }),
  };
}
