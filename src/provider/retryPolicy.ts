// Retry policy: exponential backoff with full jitter, capped; Retry-After honoured (never retry sooner).
import { budgetExhausted, sentAttempts } from '../store/attemptBudget.js';
import type { AttemptCompletion } from '../store/intentPorts.js';
import type { ProviderResult } from './provider.js';

export interface RetrySettings {
  baseDelayMs: number;
  maxDelayMs: number;
}

/** Longest Retry-After we honour (a provider asking for more is capped here). */
export const MAX_RETRY_AFTER_MS = 24 * 3600_000;

/** Retry-After as delta-seconds or an HTTP date (relative to `nowMs`, wall clock of the response). */
export function parseRetryAfter(value: string | undefined, nowMs = Date.now()): number | null {
  if (!value) return null;
  const v = value.trim();
  if (/^\d+$/.test(v)) return Math.min(Number(v) * 1000, MAX_RETRY_AFTER_MS);
  // An HTTP-date starts with a day name; anything else ("-1", "1.5", "+5") is invalid, not a date that
  // V8's lenient Date.parse happens to accept (it reads "-1" as 2001-01-01).
  if (!/^[A-Za-z]{3}/.test(v)) return null;
  const at = Date.parse(v);
  if (Number.isNaN(at)) return null;
  return Math.min(Math.max(0, at - nowMs), MAX_RETRY_AFTER_MS);
}

/** Full jitter: uniform in [0, min(max, base · 2^(attemptNo−1))]. */
export function backoffMs(attemptNo: number, s: RetrySettings, random: () => number = Math.random): number {
  const ceiling = Math.min(s.maxDelayMs, s.baseDelayMs * 2 ** Math.min(attemptNo - 1, 30));
  return Math.floor(random() * ceiling);
}

/** The completion to record for an attempt's result, given the intent's own (snapshot) policy. */
export function decide(
  result: ProviderResult,
  attempt: { intentId: string; attemptNo: number; maxAttempts: number; durationMs: number; abortedBefore?: number },
  s: RetrySettings,
  random: () => number = Math.random,
): AttemptCompletion {
  const base = { intentId: attempt.intentId, attemptNo: attempt.attemptNo, durationMs: attempt.durationMs };
  if (result.kind === 'success') {
    return { ...base, outcome: 'succeeded', httpStatus: result.httpStatus, error: null, next: { status: 'succeeded' } };
  }
  if (result.kind === 'notSent') return aborted(attempt, result.error);
  if (result.kind === 'permanent') {
    return { ...base, outcome: 'permanent_error', httpStatus: result.httpStatus, error: result.error, next: { status: 'failed' } };
  }
  // Attempts that were aborted before sending never reached the provider and do not count (the attempt budget).
  const sent = sentAttempts(attempt.attemptNo, attempt.abortedBefore ?? 0);
  if (budgetExhausted(attempt.attemptNo, attempt.abortedBefore ?? 0, attempt.maxAttempts)) {
    return { ...base, outcome: 'retryable_error', httpStatus: result.httpStatus,
      error: `${result.error} (attempts exhausted: ${sent}/${attempt.maxAttempts})`, next: { status: 'failed' } };
  }
  const delay = Math.max(backoffMs(sent, s, random), result.retryAfterMs ?? 0);
  return { ...base, outcome: 'retryable_error', httpStatus: result.httpStatus, error: result.error,
    next: { status: 'scheduled', retryDelayMs: delay } };
}

/** An attempt started but never sent (leadership lost first): closed as aborted; it does not use up the
 *  intent's attempts (see StartedAttempt.abortedBefore), so the intent is simply due again now. */
export function aborted(attempt: { intentId: string; attemptNo: number }, reason: string): AttemptCompletion {
  return { intentId: attempt.intentId, attemptNo: attempt.attemptNo, durationMs: 0, outcome: 'aborted', httpStatus: null,
    error: `aborted before the provider call: ${reason}`, next: { status: 'scheduled', retryDelayMs: 0 } };
}
