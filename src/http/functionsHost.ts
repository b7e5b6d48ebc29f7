// Glue between @azure/functions and the framework-neutral handlers: request/response mapping, the app for this
// invocation (the function file passes the composition root's getApp), and pino records routed to the
// InvocationContext. Function files stay thin.
import type { HttpRequest, HttpResponseInit, InvocationContext } from '@azure/functions';
import { withInvocationLog } from '../observability/invocationLog.js';
import type { ApiResponse } from './problem.js';
import type { ApiHandler, ApiRequest } from './request.js';

/** The body as text, as `req.text()` gives it (UTF-8, leading BOMs dropped as undici does, bad bytes replaced), read
 *  straight from the request's stream: the same bytes without the library's promise layers around it. */
export async function bodyText(req: HttpRequest): Promise<string> {
  const stream = req.body;
  if (stream === null) return '';
  const reader = stream.getReader();
  const chunks: Uint8Array[] = [];
  for (;;) {
    const r = await reader.read();
    if (r.done) break;
    chunks.push(r.value);
  }
  const one = chunks.length === 1 ? chunks[0]! : Buffer.concat(chunks);
  const text = Buffer.from(one.buffer, one.byteOffset, one.byteLength).toString('utf8');
  // undici drops a UTF-8 BOM and then decodes with a TextDecoder that drops one more.
  const once = text.charCodeAt(0) === 0xfeff ? text.slice(1) : text;
  return once.charCodeAt(0) === 0xfeff ? once.slice(1) : once;
}

export function toApiRequest(req: HttpRequest): ApiRequest {
  return {
    method: req.method,
    url: req.url,
    headers: { get: (name) => req.headers.get(name) },
    params: { ...req.params },
    text: () => bodyText(req),
  };
}

export function toResponseInit(res: ApiResponse): HttpResponseInit {
  return { status: res.status, headers: res.headers, ...(res.body !== undefined ? { body: res.body } : {}) };
}

const unavailable = (detail: string): HttpResponseInit => ({
  status: 503,
  headers: { 'content-type': 'application/problem+json', 'retry-after': '5' },
  body: JSON.stringify({ type: 'urn:submission-manager:problem:unavailable', title: 'Service Unavailable', status: 503, detail }),
});

/** An HTTP function body: resolve the app (503 while it cannot start), run `pick(app)` with logs routed to the
 *  invocation. */
export function httpHandler<A>(getApp: () => Promise<A>, pick: (app: A) => ApiHandler) {
  return async (req: HttpRequest, context: InvocationContext): Promise<HttpResponseInit> =>
    withInvocationLog(context, async () => {
      let app: A;
      try {
        app = await getApp();
      } catch (e) {
        context.error(`startup failed: ${(e as Error).message}`);
        return unavailable('the service is starting or its database is unreachable');
      }
      return toResponseInit(await pick(app)(toApiRequest(req)));
    });
}
