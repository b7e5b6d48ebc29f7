// GET /api/dashboard: the operator dashboard (HTML) and, with ?data=overview|search|intent, its JSON views.
// Reads SQL only, so any instance serves it. Protected like the ops routes (admin level: a key, `?code=`
// works in a browser); the page passes its own `code` on to the API calls it makes.
import { validate } from '../../intents/contract.js';
import type { HttpContext } from '../context.js';
import { guarded } from '../guarded.js';
import { json, notFound, validationProblem } from '../problem.js';
import { parseUrl, type ApiHandler } from '../request.js';
import { dashboardQuerySchema, intentPage, overview, search } from './data.js';
import { dashboardPage } from './page.js';

/** The page is inline-only (no third-party origin); no referrer, so the `?code=` key never leaves in a Referer. */
const PAGE_HEADERS = {
  'content-type': 'text/html; charset=utf-8',
  'cache-control': 'no-store',
  'content-security-policy': "default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; connect-src 'self'; img-src 'self' data:; frame-ancestors 'none'; form-action 'none'; base-uri 'none'",
  'referrer-policy': 'no-referrer',
  'x-content-type-options': 'nosniff',
};

export function dashboardHandler(app: HttpContext): ApiHandler {
  return guarded(app.logger, 'ops', 'dashboard', async (req, instance) => {
    const url = parseUrl(req.url);
    if (!url.searchParams.has('data')) return { status: 200, headers: PAGE_HEADERS, body: dashboardPage() };
    const v = validate(dashboardQuerySchema, Object.fromEntries(url.searchParams), 'query');
    if (!v.ok) return validationProblem(v.errors, instance);
    const q = v.value;
    if (q.data === 'overview') return json(200, await overview(app));
    if (q.data === 'search') return json(200, await search(app, q));
    const page = await intentPage(app, q);
    return page ? json(200, page) : notFound(instance);
  });
}
