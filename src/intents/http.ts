// Framework-neutral HTTP handlers for the intents API (functions/ adapts them to @azure/functions, the
// local host to node:http). Guarantees:
// - Transport checks run before anything else, in this order: Content-Length > 256 KiB → 413; content type
//   not application/json (charset=utf-8 allowed) → 415; actual body > 256 KiB → 413; malformed JSON → 400.
//   Then the use-case validates (400 problem+json naming each field). Bad input never reaches the store.
// - Every error is an RFC 9457 problem (application/problem+json); successes are application/json.
// - Store failures (StoreError) → 503 with a generic detail; anything else → 500. Both are logged with the
//   route and the error's message/code only — never the request body or payload.
// - Route parameter: `params.id` (routes `intents/{id}`, `intents/{id}/cancel`, …).
import type { Config } from '../config.js';
import { silentLogger, sqlErrorField, type Logger } from '../observability/logger.js';
import type { IntentStore } from '../store/intentPorts.js';
import { isStoreError, type LeaseStore } from '../store/ports.js';
import { IDEMPOTENCY_HEADER, toAttemptView, toIntentView } from './contract.js';
import {
  idempotencyConflict, internalError, json, malformedJson, notFound, payloadTooLarge, problem, stateConflict,
  storeUnavailable, unsupportedMediaType, validationProblem, type ApiResponse,
} from './problem.js';
import * as uc from './useCases.js';
import { withSubmitSpan } from '../observability/tracing.js';

export type { ApiResponse } from './problem.js';

export interface ApiRequest {
  method: string;
  /** Full URL including the query string. */
  url: string;
  headers: { get(name: string): string | null };
  params: Record<string, string>;
  text(): Promise<string>;
}

export type ApiHandler = (req: ApiRequest) => Promise<ApiResponse>;

export const MAX_BODY_BYTES = 256 * 1024;

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

/** application/json, optionally with charset=utf-8 (any case, optionally quoted); other parameters ignored. */
export function isJsonContentType(value: string | null): boolean {
  if (value === null) return false;
  if (value === 'application/json') return true; // the usual form, without splitting
  const [type, ...params] = value.split(';').map((p) => p.trim().toLowerCase());
  if (type !== 'application/json') return false;
  return params.every((p) => !p.startsWith('charset=') || p.replace(/^charset=\s*"?|"?$/g, '') === 'utf-8');
}

type BodyResult = { ok: true; value: unknown } | { ok: false; response: ApiResponse };

/** Reads a JSON body under the size and media-type rules above; never throws for bad input. */
export async function readJsonBody(req: ApiRequest, instance: string): Promise<BodyResult> {
  const declared = req.headers.get('content-length');
  if (declared !== null && /^\s*\d+\s*$/.test(declared) && Number(declared) > MAX_BODY_BYTES) {
    return { ok: false, response: payloadTooLarge(MAX_BODY_BYTES, instance) };
  }
  const contentType = req.headers.get('content-type');
  if (!isJsonContentType(contentType)) return { ok: false, response: unsupportedMediaType(contentType, instance) };
  const text = await req.text();
  // UTF-16 units never outnumber UTF-8 bytes, so the cheap length test can only short-cut a true 413.
  if (text.length > MAX_BODY_BYTES || Buffer.byteLength(text, 'utf8') > MAX_BODY_BYTES) {
    return { ok: false, response: payloadTooLarge(MAX_BODY_BYTES, instance) };
  }
  try {
    return { ok: true, value: JSON.parse(text) as unknown };
  } catch {
    return { ok: false, response: malformedJson(instance) };
  }
}

function parseUrl(raw: string): URL {
  return new URL(raw, 'http://localhost');
}

/** `scheme://authority/plain/path[?…]`: a path of unreserved characters and `/` only, which URL parsing
 *  leaves as it is (no dot segments, no percent-encoding); anything else goes through URL. */
const PLAIN_PATH = /^[A-Za-z][A-Za-z0-9+.-]*:\/\/[^/?#\\]*(\/[A-Za-z0-9\-_~/]*)(?:[?#]|$)/;

/** The request's path (problem `instance`), exactly URL's pathname. */
export function pathOf(raw: string): string {
  return PLAIN_PATH.exec(raw)?.[1] ?? parseUrl(raw).pathname;
}

function queryOf(url: URL): Record<string, string[]> {
  const out: Record<string, string[]> = {};
  for (const [k, v] of url.searchParams) (out[k] ??= []).push(v);
  return out;
}

export function createIntentHandlers(deps: IntentHandlerDeps): IntentHandlers {
  const log = deps.logger ?? silentLogger;
  const ucDeps: uc.IntentDeps = { intents: deps.intents, config: deps.config, ...(deps.metrics ? { metrics: deps.metrics } : {}) };

  /** Maps failures to 503/500 and logs them without request data. */
  const route = (name: string, fn: (req: ApiRequest, instance: string) => Promise<ApiResponse>): ApiHandler =>
    async (req) => {
      let instance = '';
      try {
        instance = pathOf(req.url);
        return await fn(req, instance);
      } catch (e) {
        if (isStoreError(e)) {
          log.warn({ event: 'intent_api_store_error', route: name, store_error_kind: e.kind, sql_error: sqlErrorField(e) },
            'store failure while serving an intents request');
          return storeUnavailable(instance || undefined);
        }
        const err = e as { name?: unknown; message?: unknown };
        log.error({ event: 'intent_api_error', route: name, error: { name: String(err?.name), message: String(err?.message) } },
          'unexpected error while serving an intents request');
        return internalError(instance || undefined);
      }
    };

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
