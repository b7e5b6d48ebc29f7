// POST /api/ops/intents/redrive: failed intents back to `scheduled` with a fresh attempt budget, by explicit
// ids or by a filter (failed between failedFrom and failedTo, last error containing a text), at most `limit`
// per call (repeat the call while `more` is true). Idempotent: an intent that is no longer failed is left alone.
// Every call is recorded (who, when, selector, how many) in submission_manager_redrives.
import { validate } from '../intents/contract.js';
import { uuidv7 } from '../intents/ids.js';
import type { RedriveResult } from '../store/redrivePorts.js';
import type { HttpContext } from './context.js';
import { guarded } from './guarded.js';
import { redriveBodySchema, type RedriveView } from './openapi/schemas.js';
import { json, validationProblem } from './problem.js';
import { readJsonBody, requester, type ApiHandler } from './request.js';

export function toRedriveView(r: RedriveResult, requestedBy: string, ids: string[] | null, limit: number): RedriveView {
  const moved = new Set(r.redriven.map((x) => x.intentId));
  return {
    redriveId: r.redriveId, requestedAt: r.requestedAt.toISOString(), requestedBy, redriven: r.redriven.length,
    intents: r.redriven.map((x) => ({ intentId: x.intentId, attemptsBefore: x.attemptsBefore, maxAttempts: x.maxAttempts })),
    notRedriven: ids === null ? [] : [...new Set(ids)].filter((id) => !moved.has(id)),
    more: r.redriven.length >= limit,
  };
}

export function redriveHandler(app: HttpContext): ApiHandler {
  return guarded(app.logger, 'ops', 'redriveIntents', async (req, instance) => {
    const body = await readJsonBody(req, instance);
    if (!body.ok) return body.response;
    const v = validate(redriveBodySchema, body.value);
    if (!v.ok) return validationProblem(v.errors, instance);
    const b = v.value;
    const ids = b.ids ?? null;
    const requestedBy = requester(req, app.lease.holderId);
    const r = await app.stores.redrive.redrive({
      redriveId: uuidv7(), requestedBy, reason: b.reason ?? null, ids, limit: b.limit,
      failedFrom: b.filter?.failedFrom ? new Date(b.filter.failedFrom) : null,
      failedTo: b.filter?.failedTo ? new Date(b.filter.failedTo) : null,
      errorContains: b.filter?.errorContains ?? null,
    });
    app.logger.warn({ event: 'intents_redriven', redrive_id: r.redriveId, requested_by: requestedBy, redriven: r.redriven.length,
      selector: ids ? 'ids' : 'filter', reason: b.reason ?? null }, 'failed intents redriven');
    return json(200, toRedriveView(r, requestedBy, ids, b.limit));
  });
}
