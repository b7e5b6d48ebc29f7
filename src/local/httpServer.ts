// The local host's HTTP front: node:http on 127.0.0.1, route prefix `/api` (host.json
// extensions.http.routePrefix when present), serving exactly the registered HTTP functions. Each request
// goes to the next instance round-robin (response header `x-instance: <holderId>`), as a load balancer
// would; the handler gets real HttpRequest / InvocationContext objects from @azure/functions and runs
// inside runWithApp(instance) so getApp() resolves to that instance. Function keys are enforced when
// FUNCTION_KEY is set (authLevel function/admin: `x-functions-key` header or `code` query), as the
// Functions host does; anonymous routes never need one.
import http from 'node:http';
import { randomUUID, timingSafeEqual } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { runWithApp } from '../app.js';
import type { RegisteredFunction } from './functionsCore.js';
import type { HostInstance } from './instances.js';
import { invocationLogHandler, type LogSink } from './logSink.js';
import { bySpecificity, compileRoute, type CompiledRoute } from './routeTemplate.js';

type Azf = typeof import('@azure/functions');

const ALL_METHODS = ['GET', 'POST', 'PUT', 'PATCH', 'DELETE', 'HEAD', 'OPTIONS', 'TRACE'];
/** The Functions host accepts up to 100 MB; the app's own limits (256 KiB) answer before that. */
const MAX_REQUEST_BYTES = 4 * 1024 * 1024;

const MATCH_CACHE = 1024;

interface RouteMatch {
  r: HttpRoute;
  params: Record<string, string>;
}

interface HttpRoute {
  fn: RegisteredFunction;
  route: CompiledRoute;
  methods: string[];
  authLevel: string;
}

export interface HttpHostOptions {
  azf: Azf;
  functions: RegisteredFunction[];
  instances: HostInstance[];
  functionKey: string | null;
  /** Required on admin routes when set (else FUNCTION_KEY); also accepted on function routes. */
  adminKey?: string | null;
  routePrefix: string;
  sink: LogSink;
}

/** host.json `extensions.http.routePrefix` (default `api`), as the Functions host reads it. */
export function readRoutePrefix(projectRoot: string): string {
  try {
    const host = JSON.parse(readFileSync(path.join(projectRoot, 'host.json'), 'utf8')) as { extensions?: { http?: { routePrefix?: unknown } } };
    const p = host.extensions?.http?.routePrefix;
    return typeof p === 'string' ? p.replace(/^\/+|\/+$/g, '') : 'api';
  } catch {
    return 'api';
  }
}

/** The HTTP-triggered functions as routes, most specific first (throws on an unsupported template). */
export function httpRoutes(functions: RegisteredFunction[]): HttpRoute[] {
  return functions.filter((f) => f.trigger.type === 'httpTrigger').map((fn) => ({
    fn,
    route: compileRoute(typeof fn.trigger.route === 'string' ? fn.trigger.route : fn.name),
    methods: (fn.trigger.methods?.length ? fn.trigger.methods : ALL_METHODS).map((m) => m.toUpperCase()),
    authLevel: String(fn.trigger.authLevel ?? 'function').toLowerCase(),
  })).sort((a, b) => bySpecificity(a.route, b.route));
}

const problem = (status: number, title: string, detail: string, extra: Record<string, string> = {}) => ({
  status,
  headers: { 'content-type': 'application/problem+json', ...extra },
  body: Buffer.from(JSON.stringify({ type: 'about:blank', title, status, detail })),
});

function keyMatches(expected: string, given: string | null): boolean {
  if (given === null) return false;
  const a = Buffer.from(expected);
  const b = Buffer.from(given);
  return a.length === b.length && timingSafeEqual(a, b);
}

function readBody(req: http.IncomingMessage): Promise<Buffer | null> {
  return new Promise((resolve, reject) => {
    const chunks: Buffer[] = [];
    let size = 0;
    req.on('data', (c: Buffer) => {
      size += c.length;
      if (size <= MAX_REQUEST_BYTES) chunks.push(c);
    });
    req.on('end', () => resolve(size > MAX_REQUEST_BYTES ? null : Buffer.concat(chunks)));
    req.on('error', reject);
  });
}

export function createHttpHost(o: HttpHostOptions): http.Server {
  const routes = httpRoutes(o.functions);
  const prefix = o.routePrefix === '' ? '' : `/${o.routePrefix}`;
  let next = 0;
  // The routes matching a path (with its params) never change while the host runs: matched once per path,
  // remembered for up to MATCH_CACHE paths (then forgotten all at once; ids make the key space unbounded).
  const matchCache = new Map<string, RouteMatch[]>();
  const matchesFor = (rel: string): RouteMatch[] => {
    let m = matchCache.get(rel);
    if (m === undefined) {
      m = routes.flatMap((r) => {
        const params = r.route.match(rel);
        return params ? [{ r, params }] : [];
      });
      if (matchCache.size >= MATCH_CACHE) matchCache.clear();
      matchCache.set(rel, m);
    }
    return m;
  };

  async function handle(req: http.IncomingMessage, inst: HostInstance) {
    const method = (req.method ?? 'GET').toUpperCase();
    const url = new URL(req.url ?? '/', `http://${req.headers.host ?? '127.0.0.1'}`);
    const pathname = url.pathname;
    const underPrefix = prefix === '' || pathname === prefix || pathname.startsWith(`${prefix}/`);
    const matches = underPrefix ? matchesFor(pathname.slice(prefix.length)) : [];
    if (matches.length === 0) return problem(404, 'Not Found', `no function serves ${pathname}`);
    const hit = matches.find((m) => m.r.methods.includes(method));
    if (!hit) {
      const allow = [...new Set(matches.flatMap((m) => m.r.methods))].join(', ');
      return problem(405, 'Method Not Allowed', `${method} is not allowed on ${pathname}; use ${allow}`, { allow });
    }
    const adminKey = o.adminKey ?? null;
    const accepted = hit.r.authLevel === 'anonymous' ? []
      : hit.r.authLevel === 'admin' ? [adminKey ?? o.functionKey].filter((k): k is string => k !== null)
      : [o.functionKey, adminKey].filter((k): k is string => k !== null);
    if (accepted.length > 0) {
      const given = (req.headers['x-functions-key'] as string | undefined) ?? url.searchParams.get('code');
      if (!accepted.some((k) => keyMatches(k, given))) {
        return problem(401, 'Unauthorized', 'this function requires a key: send the x-functions-key header or the code query parameter');
      }
    }
    const body = await readBody(req);
    if (body === null) return problem(413, 'Payload Too Large', `request bodies are limited to ${MAX_REQUEST_BYTES} bytes by the local host`);
    const headers: Record<string, string> = {};
    for (const k in req.headers) {
      const v = req.headers[k];
      if (v !== undefined) headers[k] = Array.isArray(v) ? v.join(', ') : v;
    }
    const request = new o.azf.HttpRequest({
      method,
      url: url.toString(),
      headers,
      query: Object.fromEntries(url.searchParams),
      params: { ...hit.params }, // the cached match's own object is never handed out
      // bytes rather than string: a body without Content-Type must not gain a `text/plain` one.
      body: { bytes: body },
    });
    const invocationId = randomUUID();
    const context = new o.azf.InvocationContext({
      invocationId,
      functionName: hit.r.fn.name,
      logHandler: invocationLogHandler(o.sink, invocationId, hit.r.fn.name, inst.holderId),
      options: { trigger: hit.r.fn.trigger as never },
    });
    const result = await runWithApp(inst.app, () => hit.r.fn.handler(request, context));
    const res = result instanceof o.azf.HttpResponse ? result : new o.azf.HttpResponse((result ?? {}) as never);
    const out: Record<string, string | string[]> = {};
    res.headers.forEach((v, k) => {
      if (k !== 'set-cookie') out[k] = v;
    });
    const cookies = res.headers.getSetCookie();
    if (cookies.length > 0) out['set-cookie'] = cookies;
    return { status: res.status, headers: out, body: Buffer.from(await res.arrayBuffer()) };
  }

  return http.createServer((req, res) => {
    const inst = o.instances[next++ % o.instances.length]!;
    handle(req, inst).then(
      (r) => {
        res.writeHead(r.status, { ...r.headers, 'content-length': r.body.length, 'x-instance': inst.holderId });
        res.end(req.method === 'HEAD' ? undefined : r.body);
      },
      (e: unknown) => {
        inst.app.logger.error({ event: 'http_function_failed', url: req.url, err: e }, 'HTTP function threw');
        const p = problem(500, 'Internal Server Error', 'the function failed; see the host log');
        if (!res.headersSent) res.writeHead(p.status, { ...p.headers, 'x-instance': inst.holderId });
        res.end(p.body);
      },
    );
  });
}
