// Intent use-cases, independent of HTTP. Guarantees:
// - Input is validated before any store call: invalid input returns {kind:'invalid'} and writes nothing.
// - Idempotency: one intent per Idempotency-Key. A replay with the same request hash returns the stored
//   intent (`replayed`); a different body under the same key is a `conflict`, and the stored row is untouched.
//   Concurrent submits with one key are settled by the database's unique index (the store never throws for it).
// - The contract snapshot (provider URL, payload, retry policy) is taken once at submit and never changes; so is the
//   partition (by partitionKey, else by id: partition.ts; the insert takes the hash mod the count the database
//   records, issue 26). The key is part of the request hash: the same Idempotency-Key with another partitionKey is
//   a conflict, like another payload.
// - Ordinary outcomes are values; only store failures (StoreError) and bugs are thrown.
import { activeTraceparent } from '../observability/tracing.js';
import type { Config } from '../config.js';
import type { AttemptRow, IntentContract, IntentRow, IntentStore } from '../store/intentPorts.js';
import {
  IDEMPOTENCY_HEADER, idempotencyKeySchema, listQuerySchema, normaliseSubmit, requestHash, rescheduleBodySchema,
  submitBodySchema, validate, type FieldError, type ListQuery,
} from './contract.js';
import { isUuid, uuidv7 } from './ids.js';
import { partitionHash } from './partition.js';

/** A counter-style metric event; `outcome` is the use-case result kind. */
export interface IntentMetricEvent {
  name: 'intent_submit' | 'intent_cancel' | 'intent_reschedule';
  outcome: string;
}

export interface IntentDeps {
  intents: IntentStore;
  config: Pick<Config, 'retry' | 'provider'>;
  metrics?: (e: IntentMetricEvent) => void;
}

export type Invalid = { kind: 'invalid'; errors: FieldError[] };
export type NotFound = { kind: 'notFound' };

export type SubmitOutcome =
  | { kind: 'created'; intent: IntentRow }
  | { kind: 'replayed'; intent: IntentRow }
  /** The key already names an intent submitted with a different body; `intentId` is that intent. */
  | { kind: 'conflict'; intentId: string }
  | Invalid;

export type MutationResult = { kind: 'ok'; intent: IntentRow } | { kind: 'conflict'; intent: IntentRow } | NotFound;

function emit(deps: IntentDeps, name: IntentMetricEvent['name'], outcome: string): void {
  try {
    deps.metrics?.({ name, outcome });
  } catch {
    // metrics never change an outcome
  }
}

/** `body` is the parsed JSON (unknown); `idempotencyKey` is the header value or null when absent. */
export async function submitIntent(
  deps: IntentDeps,
  input: { body: unknown; idempotencyKey: string | null },
): Promise<SubmitOutcome> {
  const errors: FieldError[] = [];
  if (input.idempotencyKey !== null) {
    const k = validate(idempotencyKeySchema, input.idempotencyKey, IDEMPOTENCY_HEADER);
    if (!k.ok) errors.push(...k.errors.map((e) => ({ ...e, path: IDEMPOTENCY_HEADER })));
  }
  const b = validate(submitBodySchema, input.body);
  if (!b.ok) errors.push(...b.errors);
  if (errors.length > 0 || !b.ok) {
    emit(deps, 'intent_submit', 'invalid');
    return { kind: 'invalid', errors };
  }

  const n = normaliseSubmit(b.value, deps.config.retry.defaultMaxAttempts);
  const hash = requestHash(n);
  const contract: IntentContract = {
    provider: { url: deps.config.provider.url },
    payload: n.payload,
    retry: { maxAttempts: n.maxAttempts, baseDelayMs: deps.config.retry.baseDelayMs, maxDelayMs: deps.config.retry.maxDelayMs },
  };
  const traceparent = activeTraceparent(); // null unless the submit span is recording
  if (traceparent) contract.trace = { traceparent };
  const intentId = uuidv7();
  const partitionKey = n.partitionKey ?? null;
  const r = await deps.intents.insert({
    intentId,
    partitionHash: partitionHash(partitionKey ?? intentId.toLowerCase()),
    partitionKey,
    idempotencyKey: input.idempotencyKey,
    requestHash: hash,
    contract,
    maxAttempts: n.maxAttempts,
    notBefore: n.notBefore === null ? null : new Date(n.notBefore),
  });
  if (r.kind === 'created') {
    emit(deps, 'intent_submit', 'created');
    return { kind: 'created', intent: r.intent };
  }
  if (r.intent.requestHash === hash) {
    emit(deps, 'intent_submit', 'replayed');
    return { kind: 'replayed', intent: r.intent };
  }
  emit(deps, 'intent_submit', 'conflict');
  return { kind: 'conflict', intentId: r.intent.intentId };
}

/** A non-UUID id is simply not found (no query is sent). */
export async function getIntent(deps: IntentDeps, intentId: string): Promise<{ kind: 'ok'; intent: IntentRow } | NotFound> {
  if (!isUuid(intentId)) return { kind: 'notFound' };
  const intent = await deps.intents.get(intentId.toLowerCase());
  return intent ? { kind: 'ok', intent } : { kind: 'notFound' };
}

/** Attempts of a known intent, oldest first; unknown intent → notFound (not an empty list). */
export async function listAttempts(
  deps: IntentDeps,
  intentId: string,
): Promise<{ kind: 'ok'; intent: IntentRow; attempts: AttemptRow[] } | NotFound> {
  const found = await getIntent(deps, intentId);
  if (found.kind !== 'ok') return found;
  return { kind: 'ok', intent: found.intent, attempts: await deps.intents.listAttempts(found.intent.intentId) };
}

/**
 * `query`: raw query parameters (each name → all its values). Unknown names are ignored (hosts add their
 * own, e.g. Azure Functions' `code`); a known name given twice is invalid.
 * `nextAfter` is the cursor for the next page, or null when this page is the last.
 */
export async function listIntents(
  deps: IntentDeps,
  query: Record<string, readonly string[]>,
): Promise<{ kind: 'ok'; intents: IntentRow[]; nextAfter: string | null; query: ListQuery } | Invalid> {
  const raw: Record<string, string> = {};
  const errors: FieldError[] = [];
  for (const name of ['status', 'limit', 'after'] as const) {
    const values = query[name] ?? [];
    if (values.length > 1) errors.push({ path: name, message: 'must be given at most once' });
    else if (values[0] !== undefined) raw[name] = values[0];
  }
  const q = validate(listQuerySchema, raw, 'query');
  if (!q.ok) errors.push(...q.errors);
  if (errors.length > 0 || !q.ok) return { kind: 'invalid', errors };
  const intents = await deps.intents.list({
    limit: q.value.limit,
    ...(q.value.status ? { status: q.value.status } : {}),
    ...(q.value.after ? { after: q.value.after } : {}),
  });
  const last = intents[intents.length - 1];
  return { kind: 'ok', intents, nextAfter: intents.length === q.value.limit && last ? last.intentId : null, query: q.value };
}

/** scheduled|in_flight → cancelled. Terminal → conflict (carrying the current row). Idempotent by outcome, not by status code. */
export async function cancelIntent(deps: IntentDeps, intentId: string): Promise<MutationResult> {
  if (!isUuid(intentId)) return { kind: 'notFound' };
  const r = await deps.intents.cancel(intentId.toLowerCase());
  emit(deps, 'intent_cancel', r.kind);
  return r;
}

/**
 * scheduled → next_attempt_at = notBefore (a past instant means "due now"). in_flight or terminal → conflict.
 * Id first (unknown/non-UUID → notFound), then the body (invalid → nothing written).
 */
export async function rescheduleIntent(deps: IntentDeps, intentId: string, body: unknown): Promise<MutationResult | Invalid> {
  if (!isUuid(intentId)) return { kind: 'notFound' };
  const b = validate(rescheduleBodySchema, body);
  if (!b.ok) {
    emit(deps, 'intent_reschedule', 'invalid');
    return { kind: 'invalid', errors: b.errors };
  }
  const r = await deps.intents.reschedule(intentId.toLowerCase(), new Date(b.value.notBefore));
  emit(deps, 'intent_reschedule', r.kind);
  return r;
}

