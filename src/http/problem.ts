// RFC 9457 problem details. Every error response of the API is one of these, served as
// `application/problem+json`. `type` is a stable URN per problem kind (clients branch on it, not on
// `title`/`detail`); extension members carry machine-readable context (`errors`, `intentId`, `intentStatus`).
import type { FieldError } from '../intents/contract.js';

export interface Problem {
  type: string;
  title: string;
  status: number;
  detail: string;
  instance?: string;
  [extension: string]: unknown;
}

export interface ApiResponse {
  status: number;
  headers: Record<string, string>;
  body?: string;
}

export const PROBLEM_CONTENT_TYPE = 'application/problem+json';
export const JSON_CONTENT_TYPE = 'application/json';

const typeUri = (slug: string) => `urn:submission-manager:problem:${slug}`;

export function problem(
  status: number,
  slug: string,
  title: string,
  detail: string,
  extra: { instance?: string | undefined } & Record<string, unknown> = {},
): ApiResponse {
  const { instance, ...ext } = extra;
  const body: Problem = { type: typeUri(slug), title, status, detail, ...(instance ? { instance } : {}), ...ext };
  return { status, headers: { 'content-type': PROBLEM_CONTENT_TYPE, 'cache-control': 'no-store' }, body: JSON.stringify(body) };
}

export function json(status: number, value: unknown, headers: Record<string, string> = {}): ApiResponse {
  return { status, headers: { 'content-type': JSON_CONTENT_TYPE, 'cache-control': 'no-store', ...headers }, body: JSON.stringify(value) };
}

/** 400 whose `detail` names every offending field and whose `errors` lists them. */
export function validationProblem(errors: FieldError[], instance?: string): ApiResponse {
  const detail = errors.map((e) => `${e.path}: ${e.message}`).join('; ');
  return problem(400, 'validation-error', 'Invalid request', detail, { instance, errors });
}

export const malformedJson = (instance?: string): ApiResponse =>
  problem(400, 'malformed-json', 'Malformed JSON', 'body: the request body is not valid JSON', {
    instance, errors: [{ path: 'body', message: 'is not valid JSON' }],
  });

export const payloadTooLarge = (limitBytes: number, instance?: string): ApiResponse =>
  problem(413, 'payload-too-large', 'Payload too large', `body: the request body exceeds ${limitBytes} bytes`, { instance, limitBytes });

export const unsupportedMediaType = (got: string | null, instance?: string): ApiResponse =>
  problem(415, 'unsupported-media-type', 'Unsupported media type',
    `content-type: expected application/json (optionally with charset=utf-8), got ${got === null ? 'none' : JSON.stringify(got.slice(0, 100))}`,
    { instance });

export const notFound = (instance?: string): ApiResponse =>
  problem(404, 'not-found', 'Not found', 'no intent with this id', { instance });

export const idempotencyConflict = (intentId: string, instance?: string): ApiResponse =>
  problem(409, 'idempotency-key-reused', 'Idempotency key reused',
    'Idempotency-Key: this key was already used for a different request body', { instance, intentId });

export const stateConflict = (action: 'cancel' | 'reschedule', intentId: string, intentStatus: string, instance?: string): ApiResponse =>
  problem(409, 'invalid-state', 'Invalid intent state', `cannot ${action} an intent whose status is ${intentStatus}`,
    { instance, intentId, intentStatus });

export function storeUnavailable(instance?: string): ApiResponse {
  const r = problem(503, 'store-unavailable', 'Service unavailable', 'the database is unavailable; retry later', { instance });
  return { ...r, headers: { ...r.headers, 'retry-after': '1' } };
}

export const internalError = (instance?: string): ApiResponse =>
  problem(500, 'internal-error', 'Internal error', 'an unexpected error occurred', { instance });
