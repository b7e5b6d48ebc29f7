// The public intent contract: request schemas (zod), the request hash behind idempotency, and the
// response DTOs. Guarantees:
// - Bodies are strict: unknown keys are rejected, never silently dropped.
// - `requestHash` is a pure function of the *validated meaning* of a submit: same payload (any key order),
//   same instant for notBefore (any offset), same resolved maxAttempts, same partitionKey → same hash (a submit
//   without a partitionKey hashes exactly as before the field existed).
// - Views never expose internals (idempotency key, request hash, lease epoch, provider URL).
//   The single-intent view carries `payload`; list items do not (keeps pages small).
import { hash } from 'node:crypto';
import { z } from 'zod';
import type { AttemptRow, IntentRow, IntentStatus } from '../store/intentPorts.js';
import { PARTITION_KEY_MAX_LENGTH } from '../store/partitionPorts.js';
import { isUuid } from './ids.js';

export const INTENT_STATUSES = ['scheduled', 'in_flight', 'succeeded', 'failed', 'cancelled'] as const satisfies readonly IntentStatus[];
export const MAX_ATTEMPTS_LIMIT = 50;
export const LIST_LIMIT_DEFAULT = 50;
export const LIST_LIMIT_MAX = 500;

const isJsonObject = (v: unknown): v is Record<string, unknown> =>
  typeof v === 'object' && v !== null && !Array.isArray(v);

export const MAX_PAYLOAD_DEPTH = 64;

/** NUL (PostgreSQL jsonb cannot hold it) or a lone UTF-16 surrogate (not valid Unicode: jsonb rejects it). */
function stringProblem(s: string): string | null {
  if (s.includes('\u0000')) return 'must not contain NUL (\\u0000) characters';
  if (/\p{Cs}/u.test(s)) return 'must not contain unpaired UTF-16 surrogates';
  return null;
}

/** null when every dialect can store `v` as-is; otherwise why not. Recursion stops at the depth limit. */
function payloadProblem(v: unknown, depth = 0): string | null {
  if (depth > MAX_PAYLOAD_DEPTH) return `must not nest deeper than ${MAX_PAYLOAD_DEPTH} levels`;
  if (typeof v === 'string') return stringProblem(v);
  if (typeof v === 'number') return Number.isFinite(v) ? null : 'must contain only finite numbers';
  if (Array.isArray(v)) {
    for (const x of v) {
      const p = payloadProblem(x, depth + 1);
      if (p) return p;
    }
  } else if (isJsonObject(v)) {
    for (const [k, x] of Object.entries(v)) {
      const p = stringProblem(k) ?? payloadProblem(x, depth + 1);
      if (p) return p;
    }
  }
  return null;
}

/** The caller's own object is kept as-is (no copy), so the stored payload is exactly what was sent.
 *  Rejected up front (400, not a store failure): NUL characters and unpaired surrogates (PostgreSQL jsonb
 *  cannot hold them), non-finite numbers (1e999), nesting deeper than MAX_PAYLOAD_DEPTH. */
const payloadSchema = z
  .custom<Record<string, unknown>>(isJsonObject, {
    error: (i) => (i.input === undefined ? 'is required (a JSON object)' : 'must be a JSON object (not an array, null or a scalar)'),
  })
  .superRefine((v, ctx) => {
    const p = payloadProblem(v);
    if (p) ctx.addIssue({ code: 'custom', message: p });
  });

const MAX_INSTANT = Date.parse('9999-12-31T23:59:59.999Z');

/** ISO-8601 date-time with seconds and an explicit offset or Z (e.g. 2030-01-01T00:00:00Z), as an instant in
 *  1970..9999 UTC (every dialect can store it; an earlier instant would only mean "now"). */
export const isoDateTime = z
  .string({ error: 'must be an ISO-8601 date-time string with an offset or Z' })
  .pipe(z.iso.datetime({ offset: true, abort: true, error: 'must be an ISO-8601 date-time with seconds and an offset or Z, e.g. 2030-01-01T00:00:00Z' }))
  .refine((s) => { const t = Date.parse(s); return t >= 0 && t <= MAX_INSTANT; }, 'must be between 1970-01-01 and 9999-12-31 (UTC)');

const partitionKeyRule = `must be a string of 1 to ${PARTITION_KEY_MAX_LENGTH} characters`;

/** Intents with one partitionKey share an executor partition (src/intents/partition.ts). Compared exactly as sent
 *  (no trimming or Unicode normalisation); length in code points, as zod counts; NUL and unpaired surrogates are
 *  refused as in payloads. */
export const partitionKeySchema = z
  .string({ error: partitionKeyRule })
  .min(1, partitionKeyRule)
  .max(PARTITION_KEY_MAX_LENGTH, partitionKeyRule)
  .superRefine((v, ctx) => {
    const p = stringProblem(v);
    if (p) ctx.addIssue({ code: 'custom', message: p });
  });

export const submitBodySchema = z.strictObject(
  {
    payload: payloadSchema,
    partitionKey: partitionKeySchema.optional().describe('Intents with the same partitionKey get the same executor partition '
      + '(one executor runs them, in due order); without one the partition follows from the intent id. Exact text, 1 to '
      + `${PARTITION_KEY_MAX_LENGTH} characters; part of the idempotent request (another key under the same Idempotency-Key is a 409)`),
    notBefore: isoDateTime.optional(),
    maxAttempts: z
      .number({ error: `must be an integer from 1 to ${MAX_ATTEMPTS_LIMIT}` })
      .int(`must be an integer from 1 to ${MAX_ATTEMPTS_LIMIT}`)
      .min(1, `must be an integer from 1 to ${MAX_ATTEMPTS_LIMIT}`)
      .max(MAX_ATTEMPTS_LIMIT, `must be an integer from 1 to ${MAX_ATTEMPTS_LIMIT}`)
      .optional(),
  },
  { error: (i) => (i.code === 'unrecognized_keys' ? undefined : 'the body must be a JSON object') },
);
export type SubmitBody = z.infer<typeof submitBodySchema>;

export const rescheduleBodySchema = z.strictObject(
  { notBefore: isoDateTime },
  { error: (i) => (i.code === 'unrecognized_keys' ? undefined : 'the body must be a JSON object') },
);
export type RescheduleBody = z.infer<typeof rescheduleBodySchema>;

/** Query values arrive as strings; absent parameters are undefined. */
export const listQuerySchema = z.object({
  status: z.enum(INTENT_STATUSES, { error: `must be one of ${INTENT_STATUSES.join(', ')}` }).optional(),
  limit: z
    .string()
    .regex(/^\d{1,4}$/, `must be an integer from 1 to ${LIST_LIMIT_MAX}`)
    .transform(Number)
    .pipe(z.number().int().min(1, `must be an integer from 1 to ${LIST_LIMIT_MAX}`).max(LIST_LIMIT_MAX, `must be an integer from 1 to ${LIST_LIMIT_MAX}`))
    .default(LIST_LIMIT_DEFAULT),
  after: z.string().refine(isUuid, 'must be an intent id (UUID)').transform((s) => s.toLowerCase()).optional(),
});
export type ListQuery = z.infer<typeof listQuerySchema>;

/** 1..255 printable ASCII characters (0x20–0x7E). */
export const idempotencyKeySchema = z
  .string()
  .regex(/^[\x20-\x7e]{1,255}$/, 'must be 1 to 255 printable ASCII characters');

export const IDEMPOTENCY_HEADER = 'Idempotency-Key';

/** One validation problem: `path` names the field ("payload", "maxAttempts", "status", "Idempotency-Key"). */
export interface FieldError {
  path: string;
  message: string;
}

/** zod issues → field errors; unknown keys become one error per key, named by the key itself. */
export function fieldErrors(error: z.ZodError, root = 'body'): FieldError[] {
  const out: FieldError[] = [];
  for (const issue of error.issues) {
    const base = issue.path.map(String).join('.');
    if (issue.code === 'unrecognized_keys') {
      for (const k of issue.keys) out.push({ path: base ? `${base}.${k}` : k, message: 'is not a known field' });
    } else {
      out.push({ path: base || root, message: issue.message });
    }
  }
  return out;
}

export type Validated<T> = { ok: true; value: T } | { ok: false; errors: FieldError[] };

export function validate<S extends z.ZodType>(schema: S, input: unknown, root?: string): Validated<z.output<S>> {
  const r = schema.safeParse(input);
  return r.success ? { ok: true, value: r.data } : { ok: false, errors: fieldErrors(r.error, root) };
}

/** Canonical JSON: object keys sorted (recursively, by code unit), no whitespace, arrays in order. */
export function canonicalJson(v: unknown): string {
  if (Array.isArray(v)) return `[${v.map((x) => (x === undefined ? 'null' : canonicalJson(x))).join(',')}]`;
  if (isJsonObject(v)) {
    const keys = Object.keys(v).filter((k) => v[k] !== undefined).sort();
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonicalJson(v[k])}`).join(',')}}`;
  }
  return JSON.stringify(v) ?? 'null';
}

/** The submit as stored: defaults resolved, notBefore as an instant (ISO, UTC, milliseconds) or null. */
export interface NormalisedSubmit {
  payload: Record<string, unknown>;
  notBefore: string | null;
  maxAttempts: number;
  /** Absent (not null) without one, so a submit without a key hashes as it did before keys existed. */
  partitionKey?: string;
}

export function normaliseSubmit(body: SubmitBody, defaultMaxAttempts: number): NormalisedSubmit {
  return {
    payload: body.payload,
    notBefore: body.notBefore === undefined ? null : new Date(body.notBefore).toISOString(),
    maxAttempts: body.maxAttempts ?? defaultMaxAttempts,
    ...(body.partitionKey === undefined ? {} : { partitionKey: body.partitionKey }),
  };
}

/** sha256 hex of the canonical JSON of the normalised submit (what an idempotent replay must match). */
export function requestHash(n: NormalisedSubmit): string {
  return hash('sha256', canonicalJson(n), 'hex');
}

export interface IntentView {
  intentId: string;
  status: IntentStatus;
  attemptCount: number;
  maxAttempts: number;
  nextAttemptAt: string;
  createdAt: string;
  lastModifiedAt: string;
  lastError: string | null;
  /** The executor partition assigned at submit (0 with one partition). */
  partition: number;
  /** The submitted partitionKey, or null (the partition then follows from the intent id). */
  partitionKey: string | null;
  /** Only in the single-intent representation (GET /intents/{id} and mutation responses). */
  payload?: Record<string, unknown>;
}

export function toIntentView(row: IntentRow, opts: { includePayload?: boolean } = {}): IntentView {
  return {
    intentId: row.intentId,
    status: row.status,
    attemptCount: row.attemptCount,
    maxAttempts: row.maxAttempts,
    nextAttemptAt: row.nextAttemptAt.toISOString(),
    createdAt: row.createdAt.toISOString(),
    lastModifiedAt: row.lastModifiedAt.toISOString(),
    lastError: row.lastError,
    partition: row.partition,
    partitionKey: row.partitionKey,
    ...(opts.includePayload ? { payload: row.contract.payload } : {}),
  };
}

export interface AttemptView {
  attemptNo: number;
  leaseEpoch: number;
  holderId: string;
  startedAt: string;
  finishedAt: string | null;
  outcome: AttemptRow['outcome'];
  httpStatus: number | null;
  error: string | null;
  durationMs: number | null;
}

export function toAttemptView(row: AttemptRow): AttemptView {
  return {
    attemptNo: row.attemptNo,
    leaseEpoch: row.leaseEpoch,
    holderId: row.holderId,
    startedAt: row.startedAt.toISOString(),
    finishedAt: row.finishedAt ? row.finishedAt.toISOString() : null,
    outcome: row.outcome,
    httpStatus: row.httpStatus,
    error: row.error,
    durationMs: row.durationMs,
  };
}
