// POST /api/ops/intents/redrive: failed intents back to `scheduled` with a fresh attempt budget, by explicit
// ids or by a filter (failed between failedFrom and failedTo, last error containing a text), at most `limit`
// per call (repeat the call while `more` is true). Idempotent: an intent that is no longer failed is left alone.
// Every call is recorded (who, when, selector, how many) in submission_manager_redrives.
import { z } from 'zod';
import type { App } from '../app.js';
import { isoDateTime, validate } from '../intents/contract.js';
import { readJsonBody, type ApiRequest, type ApiResponse } from '../intents/http.js';
import { isUuid, uuidv7 } from '../intents/ids.js';
import { json, validationProblem } from '../intents/problem.js';
import { guarded } from '../opsHandlers.js';
import type { RedriveResult } from '../store/redrivePorts.js';

export const REDRIVE_LIMIT_DEFAULT = 100;
export const REDRIVE_LIMIT_MAX = 1_000;

const intentId = z.string().refine(isUuid, 'must be an intent id (UUID)').transform((s) => s.toLowerCase());

export const redriveBodySchema = z.strictObject({
  ids: z.array(intentId).min(1).max(REDRIVE_LIMIT_MAX).optional()
    .describe(`Explicit intent ids (1 to ${REDRIVE_LIMIT_MAX}); ids that are not failed are reported in notRedriven`),
  filter: z.strictObject({
    status: z.literal('failed').default('failed').describe('Only failed intents are ever redriven'),
    failedFrom: isoDateTime.optional().describe('Failed (last modified) at or after this instant'),
    failedTo: isoDateTime.optional().describe('Failed (last modified) before this instant'),
    errorContains: z.string().min(1).max(200).optional().describe('Case-insensitive substring of the last error'),
  }).optional().describe('Select failed intents, oldest failure first'),
  limit: z.int().min(1).max(REDRIVE_LIMIT_MAX).default(REDRIVE_LIMIT_DEFAULT)
    .describe(`At most this many intents per call (default ${REDRIVE_LIMIT_DEFAULT})`),
  reason: z.string().min(1).max(500).optional().describe('Why (kept with the record and logged)'),
}, { error: (i) => (i.code === 'unrecognized_keys' ? undefined : 'the body must be a JSON object') })
  .refine((b) => (b.ids === undefined) !== (b.filter === undefined), { message: 'give exactly one of ids or filter', path: ['ids'] })
  .refine((b) => !b.filter?.failedFrom || !b.filter.failedTo || Date.parse(b.filter.failedFrom) < Date.parse(b.filter.failedTo),
    { message: 'failedFrom must be before failedTo', path: ['filter', 'failedFrom'] });

export const redriveResultSchema = z.strictObject({
  redriveId: z.uuid().describe('Id of the recorded redrive'),
  requestedAt: z.iso.datetime({ offset: true }).describe('Database time of the redrive; the intents are due from then'),
  requestedBy: z.string(),
  redriven: z.int().min(0),
  intents: z.array(z.strictObject({
    intentId: z.uuid(),
    attemptsBefore: z.int().min(0).describe('Attempts made before; the next one is attemptsBefore + 1'),
    maxAttempts: z.int().min(1).describe('The new budget: attempts sent so far + the submitted maxAttempts'),
  })),
  notRedriven: z.array(z.uuid()).describe('Explicit ids left alone: unknown, or not failed (already redriven, still active, succeeded, cancelled)'),
  more: z.boolean().describe('The limit was reached: more matching intents may remain (call again)'),
});
export type RedriveView = z.infer<typeof redriveResultSchema>;

export function toRedriveView(r: RedriveResult, requestedBy: string, ids: string[] | null, limit: number): RedriveView {
  const moved = new Set(r.redriven.map((x) => x.intentId));
  return {
    redriveId: r.redriveId, requestedAt: r.requestedAt.toISOString(), requestedBy, redriven: r.redriven.length,
    intents: r.redriven.map((x) => ({ intentId: x.intentId, attemptsBefore: x.attemptsBefore, maxAttempts: x.maxAttempts })),
    notRedriven: ids === null ? [] : [...new Set(ids)].filter((id) => !moved.has(id)),
    more: r.redriven.length >= limit,
  };
}

/** Who asked: the Easy Auth principal when present (else "admin"), at the instance that served the request. */
export const requester = (app: App, req: ApiRequest): string =>
  `${req.headers.get('x-ms-client-principal-name') ?? 'admin'}@${app.lease.holderId}`.slice(0, 128);

export function redriveHandler(app: App): (req: ApiRequest) => Promise<ApiResponse> {
  return guarded(app, 'redriveIntents', async (req, instance) => {
    const body = await readJsonBody(req, instance);
    if (!body.ok) return body.response;
    const v = validate(redriveBodySchema, body.value);
    if (!v.ok) return validationProblem(v.errors, instance);
    const b = v.value;
    const ids = b.ids ?? null;
    const requestedBy = requester(app, req);
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
