// The retry policy, table-driven: classification of provider results into attempt completions, full-jitter
// backoff bounds, Retry-After parsing and its precedence over (and cap against) the jittered backoff.
import { describe, it, expect } from 'vitest';
import type { ProviderResult } from '../../src/provider/provider.js';
import { classify } from '../../src/provider/httpProvider.js';
import {
  MAX_RETRY_AFTER_MS, aborted, backoffMs, decide, parseRetryAfter, type RetrySettings,
} from '../../src/provider/retryPolicy.js';

const S: RetrySettings = { baseDelayMs: 1_000, maxDelayMs: 300_000 };
const ID = '0190f3c2-7d6a-7000-8000-000000000001';
const rnd = (v: number) => () => v;
const ceilingFor = (attemptNo: number, s: RetrySettings = S) => Math.min(s.maxDelayMs, s.baseDelayMs * 2 ** (attemptNo - 1));

const att = (attemptNo: number, maxAttempts: number) => ({ intentId: ID, attemptNo, maxAttempts, durationMs: 42 });

const retryable = (httpStatus: number | null, error: string, retryAfterMs: number | null = null): ProviderResult =>
  ({ kind: 'retryable', httpStatus, error, retryAfterMs });

// Results as the HTTP provider produces them (statuses go through the real classifier).
const RETRYABLE_RESULTS: [string, ProviderResult][] = [
  ...[408, 429, 500, 502, 503, 504].map((st): [string, ProviderResult] => [`HTTP ${st}`, classify(st, undefined, 'nope')]),
  ['timeout', retryable(null, 'timeout after 1000 ms')],
  ['connection error', retryable(null, 'connection error: connect ECONNREFUSED 127.0.0.1:1')],
];
const PERMANENT_STATUSES = [400, 401, 403, 404, 409, 422];
const SUCCESS_STATUSES = [200, 201, 202, 204, 299];
const ATTEMPT_MATRIX: [number, number][] = [[1, 1], [1, 5], [2, 5], [4, 5], [5, 5], [6, 5], [1, 50], [49, 50], [50, 50]];
const RANDOMS = [0, 0.5, 0.999];

describe('decide: success', () => {
  const cases = SUCCESS_STATUSES.flatMap((st) => ATTEMPT_MATRIX.map(([n, max]) => [st, n, max] as const));
  it.each(cases)('HTTP %i at attempt %i/%i → succeeded', (status, attemptNo, maxAttempts) => {
    const result = classify(status, undefined, '');
    expect(result).toEqual({ kind: 'success', httpStatus: status });
    const c = decide(result, att(attemptNo, maxAttempts), S, rnd(0.5));
    expect(c).toEqual({
      intentId: ID, attemptNo, durationMs: 42, outcome: 'succeeded', httpStatus: status, error: null, next: { status: 'succeeded' },
    });
  });
});

describe('decide: permanent errors', () => {
  const cases = PERMANENT_STATUSES.flatMap((st) => ATTEMPT_MATRIX.map(([n, max]) => [st, n, max] as const));
  it.each(cases)('HTTP %i at attempt %i/%i → permanent_error + failed (never retried)', (status, attemptNo, maxAttempts) => {
    const result = classify(status, '5', 'bad request body');
    expect(result.kind).toBe('permanent');
    const c = decide(result, att(attemptNo, maxAttempts), S, rnd(0));
    expect(c.outcome).toBe('permanent_error');
    expect(c.httpStatus).toBe(status);
    expect(c.error).toBe(`HTTP ${status}: bad request body`);
    expect(c.next).toEqual({ status: 'failed' });
    expect(c.durationMs).toBe(42);
  });
});

describe('decide: retryable errors', () => {
  const cases = RETRYABLE_RESULTS.flatMap(([name, r]) =>
    ATTEMPT_MATRIX.flatMap(([n, max]) => RANDOMS.map((x) => [name, n, max, x, r] as const)));

  it.each(cases)('%s at attempt %i/%i (random=%d)', (_name, attemptNo, maxAttempts, x, result) => {
    expect(result.kind).toBe('retryable');
    if (result.kind !== 'retryable') return;
    const c = decide(result, att(attemptNo, maxAttempts), S, rnd(x));
    expect(c.outcome).toBe('retryable_error');
    expect(c.httpStatus).toBe(result.httpStatus);
    expect(c.intentId).toBe(ID);
    expect(c.attemptNo).toBe(attemptNo);
    if (attemptNo >= maxAttempts) {
      expect(c.next).toEqual({ status: 'failed' });
      expect(c.error).toContain(result.error);
      expect(c.error).toContain(`attempts exhausted: ${attemptNo}/${maxAttempts}`);
    } else {
      expect(c.error).toBe(result.error);
      expect(c.next.status).toBe('scheduled');
      if (c.next.status !== 'scheduled') return;
      const ceiling = ceilingFor(attemptNo);
      expect(Number.isInteger(c.next.retryDelayMs)).toBe(true);
      expect(c.next.retryDelayMs).toBeGreaterThanOrEqual(0);
      expect(c.next.retryDelayMs).toBeLessThanOrEqual(ceiling);
      expect(c.next.retryDelayMs).toBe(Math.floor(x * ceiling)); // full jitter, exactly
    }
  });
});

describe('decide: Retry-After honoured', () => {
  const NOW = Date.UTC(2030, 5, 1, 12, 0, 0);
  const httpDate = (ms: number) => new Date(ms).toUTCString();
  // [label, Retry-After header, retryAfterMs expected from it]
  const headers: [string, string, number][] = [
    ['seconds 0', '0', 0],
    ['seconds 7', '7', 7_000],
    ['seconds 120', '120', 120_000],
    ['seconds 1 day', '86400', 86_400_000],
    ['seconds huge (capped)', '999999999', MAX_RETRY_AFTER_MS],
    ['seconds beyond 2^53 (capped)', '99999999999999999999999', MAX_RETRY_AFTER_MS],
    ['HTTP-date 30 s ahead', httpDate(NOW + 30_000), 30_000],
    ['HTTP-date 1 h ahead', httpDate(NOW + 3_600_000), 3_600_000],
    ['HTTP-date in the past', httpDate(NOW - 60_000), 0],
    ['HTTP-date a year ahead (capped)', httpDate(NOW + 365 * 86_400_000), MAX_RETRY_AFTER_MS],
  ];
  const cases = headers.flatMap(([label, h, ms]) =>
    [429, 503].flatMap((st) => [1, 3, 9].flatMap((n) => RANDOMS.map((x) => [label, st, n, x, h, ms] as const))));

  it.each(cases)('%s, HTTP %i, attempt %i, random=%d', (_label, status, attemptNo, x, header, expectedMs) => {
    const parsed = parseRetryAfter(header, NOW);
    expect(parsed).toBe(expectedMs);
    const result = classify(status, header, '');
    expect(result.kind).toBe('retryable');
    // Same header through the classifier (wall clock now): a date header is within a few ms of the table.
    if (result.kind !== 'retryable') return;
    const r: ProviderResult = { ...result, retryAfterMs: parsed };
    const c = decide(r, att(attemptNo, 10), S, rnd(x));
    expect(c.next.status).toBe('scheduled');
    if (c.next.status !== 'scheduled') return;
    const jitter = Math.floor(x * ceilingFor(attemptNo));
    expect(c.next.retryDelayMs).toBe(Math.max(jitter, expectedMs));
    expect(c.next.retryDelayMs).toBeGreaterThanOrEqual(expectedMs); // never sooner than asked
    expect(c.next.retryDelayMs).toBeLessThanOrEqual(Math.max(ceilingFor(attemptNo), MAX_RETRY_AFTER_MS));
  });

  it.each([
    ['array header: first value wins', ['5', '100'], 5_000],
    ['absent header', undefined, null],
    ['garbage header', 'later please', null],
  ] as const)('classify propagates Retry-After: %s', (_l, header, expected) => {
    const r = classify(503, header as string | string[] | undefined, '');
    expect(r).toMatchObject({ kind: 'retryable', httpStatus: 503, retryAfterMs: expected });
  });

  it('exhausted attempts fail even when the provider asks to retry later', () => {
    const c = decide(classify(429, '1', ''), att(3, 3), S, rnd(0));
    expect(c.next).toEqual({ status: 'failed' });
    expect(c.error).toContain('attempts exhausted: 3/3');
  });
});

describe('parseRetryAfter', () => {
  const NOW = Date.UTC(2030, 0, 1, 0, 0, 0);
  it.each([
    ['undefined', undefined, null],
    ['empty', '', null],
    ['blank', '   ', null],
    ['negative', '-1', null],
    ['signed positive', '+5', null],
    ['decimal', '1.5', null],
    ['word', 'abc', null],
    ['hex', '0x10', null],
    ['zero', '0', 0],
    ['integer', '120', 120_000],
    ['integer with whitespace', ' 120 ', 120_000],
    ['cap', String(MAX_RETRY_AFTER_MS / 1000 + 1), MAX_RETRY_AFTER_MS],
    ['IMF-fixdate in the past', 'Wed, 21 Oct 2015 07:28:00 GMT', 0],
    ['IMF-fixdate 30 s ahead', new Date(NOW + 30_000).toUTCString(), 30_000],
    ['IMF-fixdate 30.5 s ahead (second precision)', new Date(NOW + 30_500).toUTCString(), 30_000],
  ] as const)('%s (%j) → %j', (_l, value, expected) => {
    expect(parseRetryAfter(value, NOW)).toBe(expected);
  });

  it('defaults to the wall clock: a date 30 s ahead is ~30 000 ms', () => {
    const v = new Date(Date.now() + 30_000).toUTCString(); // toUTCString drops the milliseconds
    const ms = parseRetryAfter(v);
    expect(ms).not.toBeNull();
    expect(ms!).toBeGreaterThan(28_000);
    expect(ms!).toBeLessThanOrEqual(30_000);
  });

  it('a date in the past (wall clock) → 0', () => {
    expect(parseRetryAfter(new Date(Date.now() - 5_000).toUTCString())).toBe(0);
  });
});

describe('backoffMs', () => {
  const settings: RetrySettings[] = [
    { baseDelayMs: 1, maxDelayMs: 1 },
    { baseDelayMs: 1_000, maxDelayMs: 300_000 },
    { baseDelayMs: 250, maxDelayMs: 10_000 },
    { baseDelayMs: 60_000, maxDelayMs: 3_600_000 },
    { baseDelayMs: 2_147_483_647, maxDelayMs: Number.MAX_SAFE_INTEGER },
  ];
  const cases = settings.flatMap((s) => RANDOMS.concat([0.999999999]).map((x) => [s.baseDelayMs, s.maxDelayMs, x, s] as const));

  it.each(cases)('base=%i max=%i random=%d: in [0, min(max, base·2^(n−1))] for n = 1..100, finite', (_b, _m, x, s) => {
    let prev = -1;
    for (let n = 1; n <= 100; n++) {
      const d = backoffMs(n, s, rnd(x));
      expect(Number.isFinite(d)).toBe(true);
      expect(Number.isInteger(d)).toBe(true);
      expect(d).toBeGreaterThanOrEqual(0);
      expect(d).toBeLessThanOrEqual(s.maxDelayMs);
      expect(d).toBeLessThanOrEqual(Math.min(s.maxDelayMs, s.baseDelayMs * 2 ** (n - 1)));
      expect(d).toBeGreaterThanOrEqual(prev); // monotone in n for a fixed random draw
      prev = d;
    }
  });

  it.each([
    [1, 0.5, 500],
    [2, 0.5, 1_000],
    [3, 0.5, 2_000],
    [9, 0.5, 128_000],
    [10, 0.5, 150_000], // 256 000 > cap
    [100, 0.5, 150_000],
    [100, 0, 0],
  ] as const)('attempt %i, random=%d → %i ms (base 1 s, cap 300 s)', (n, x, expected) => {
    expect(backoffMs(n, S, rnd(x))).toBe(expected);
  });

  it('uses Math.random by default and stays within bounds', () => {
    for (let i = 0; i < 1_000; i++) {
      const d = backoffMs(4, S);
      expect(d).toBeGreaterThanOrEqual(0);
      expect(d).toBeLessThanOrEqual(8_000);
    }
  });
});

describe('aborted', () => {
  // An aborted attempt never reached the provider: it never fails the intent, whatever the count.
  it.each([
    [1, 5],
    [4, 5],
    [5, 5],
    [6, 5],
    [1, 1],
  ] as const)('attempt %i/%i → due again now, never failed', (attemptNo, maxAttempts) => {
    const c = aborted({ intentId: ID, attemptNo, maxAttempts } as { intentId: string; attemptNo: number }, 'leadership lost before the provider call');
    expect(c).toMatchObject({ intentId: ID, attemptNo, durationMs: 0, outcome: 'aborted', httpStatus: null });
    expect(c.error).toContain('aborted before the provider call: leadership lost before the provider call');
    expect(c.next).toEqual({ status: 'scheduled', retryDelayMs: 0 });
    expect(c.error).not.toContain('exhausted');
  });

  it.each([
    [3, 3, 1, 'scheduled'],
    [3, 3, 0, 'failed'],
    [4, 3, 1, 'failed'],
    [5, 3, 3, 'scheduled'],
  ] as const)('decide: attempt %i of %i with %i aborted before → %s', (attemptNo, maxAttempts, abortedBefore, next) => {
    const c = decide({ kind: 'retryable', httpStatus: 503, error: 'HTTP 503', retryAfterMs: null },
      { intentId: ID, attemptNo, maxAttempts, durationMs: 1, abortedBefore }, { baseDelayMs: 10, maxDelayMs: 100 }, () => 0);
    expect(c.next.status).toBe(next);
  });

  it('decide: a request known not written (past its send-by bound) is aborted, on the last attempt too', () => {
    const c = decide({ kind: 'notSent', httpStatus: null, error: 'not sent: 12 ms past its send-by bound' },
      { intentId: ID, attemptNo: 3, maxAttempts: 3, durationMs: 0 }, { baseDelayMs: 10, maxDelayMs: 100 }, () => 0);
    expect(c).toMatchObject({ outcome: 'aborted', httpStatus: null, next: { status: 'scheduled', retryDelayMs: 0 } });
    expect(c.error).toBe('aborted before the provider call: not sent: 12 ms past its send-by bound');
  });
});
