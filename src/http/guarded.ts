// The one error wrapper of every handler that reads or writes SQL: a StoreError becomes 503 (store-unavailable,
// Retry-After), anything else 500; both are logged with the route and the error's kind/code/message only, never
// the request body or a payload. The problem's `instance` is the request path.
import { sqlErrorField, type Logger } from '../observability/logger.js';
import { isStoreError } from '../store/ports.js';
import { internalError, storeUnavailable, type ApiResponse } from './problem.js';
import { pathOf, type ApiHandler, type ApiRequest } from './request.js';

/** Which family a route belongs to: it names the log events (`intent_api_*`, `ops_api_*`). */
export type RouteFamily = 'intents' | 'ops';

const LOGGED = {
  intents: {
    storeEvent: 'intent_api_store_error', storeMessage: 'store failure while serving an intents request',
    errorEvent: 'intent_api_error', errorMessage: 'unexpected error while serving an intents request',
  },
  ops: {
    storeEvent: 'ops_api_store_error', storeMessage: 'store failure on an operations route',
    errorEvent: 'ops_api_error', errorMessage: 'unexpected error on an operations route',
  },
} as const;

export function guarded(logger: Logger, family: RouteFamily, route: string,
  fn: (req: ApiRequest, instance: string) => Promise<ApiResponse>): ApiHandler {
  const words = LOGGED[family];
  return async (req) => {
    let instance = '';
    try {
      instance = pathOf(req.url);
      return await fn(req, instance);
    } catch (e) {
      if (isStoreError(e)) {
        logger.warn({ event: words.storeEvent, route, store_error_kind: e.kind, sql_error: sqlErrorField(e) }, words.storeMessage);
        return storeUnavailable(instance || undefined);
      }
      const err = e as { name?: unknown; message?: unknown };
      logger.error({ event: words.errorEvent, route, error: { name: String(err?.name), message: String(err?.message) } }, words.errorMessage);
      return internalError(instance || undefined);
    }
  };
}
