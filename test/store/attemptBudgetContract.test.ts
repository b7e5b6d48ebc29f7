// The attempt budget (src/store/attemptBudget.ts) is one rule in two SQL dialects and in the executor. This suite
// builds attempt histories through the real fenced writes and checks every SQL use of the rule — the START
// predicate, the aborted count returned with a start, orphan recovery's failed/scheduled CASE, redrive's new
// budget — against the TypeScript definition, on every dialect (PGlite, PostgreSQL, SQL Server when configured).
import { randomUUID } from 'node:crypto';
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import { acquireToken, LEASE_NAME, submit } from '../support/instances.js';
import { budgetExhausted, mayStartAttempt, sentAttempts } from '../../src/store/attemptBudget.js';
import { decide } from '../../src/provider/retryPolicy.js';
import type { LeaseToken } from '../../src/store/ports.js';
import type { Stores } from '../../src/store/stores.js';

/** An attempt history: 'a' = closed as aborted (never sent), 's' = sent (closed as a retryable error). */
interface Case { maxAttempts: number; history: ('a' | 's')[] }

const CASES: Case[] = [
  { maxAttempts: 1, history: [] },
  { maxAttempts: 1, history: ['a'] },
  { maxAttempts: 1, history: ['a', 'a'] },
  { maxAttempts: 1, history: ['s'] },
  { maxAttempts: 2, history: ['s'] },
  { maxAttempts: 2, history: ['s', 'a'] },
  { maxAttempts: 2, history: ['s', 's'] },
  { maxAttempts: 2, history: ['s', 'a', 's'] },
  { maxAttempts: 3, history: ['a', 'a', 's'] },
];

const label = (c: Case) => `max ${c.maxAttempts}, history [${c.history.join(' ')}]`;
const abortedIn = (c: Case) => c.history.filter((h) => h === 'a').length;

describe.each(dialects)('attempt budget contract: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  let token: LeaseToken;
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    s = await ctx.openStores();
    token = await acquireToken(s, 'A', 600_000);
  });

  /** An intent with `c`'s history, written by fenced starts and completions; scheduled and due at the end. */
  async function arrange(c: Case): Promise<string> {
    const { intentId } = await submit(s, { c: label(c) }, { maxAttempts: c.maxAttempts });
    for (const [n, h] of c.history.entries()) {
      const started = await s.execution.fencedStartAttempts(token, [{ intentId, expectedAttemptCount: n }]);
      if (started.kind !== 'ok' || started.value.length !== 1) throw new Error(`${label(c)}: arrangement could not start attempt ${n + 1}`);
      const done = await s.execution.fencedCompleteAttempts(token, [{
        intentId, attemptNo: n + 1, durationMs: 1, httpStatus: h === 's' ? 503 : null,
        outcome: h === 's' ? 'retryable_error' : 'aborted', error: h, next: { status: 'scheduled', retryDelayMs: 0 },
      }]);
      if (done.kind !== 'ok') throw new Error('complete: lease lost');
    }
    return intentId;
  }

  /** Histories START can build: every prefix was within the budget when its attempt started. */
  const buildable = CASES.filter((c) => c.history.every((_, n) => mayStartAttempt(n, abortedIn({ ...c, history: c.history.slice(0, n) }), c.maxAttempts)));

  it('START starts exactly the intents the rule allows, with the aborted count before the new attempt', async () => {
    expect(buildable.length).toBeGreaterThanOrEqual(7);
    for (const c of buildable) {
      const intentId = await arrange(c);
      const n = c.history.length;
      const r = await s.execution.fencedStartAttempts(token, [{ intentId, expectedAttemptCount: n }]);
      if (r.kind !== 'ok') throw new Error('lease lost');
      const allowed = mayStartAttempt(n, abortedIn(c), c.maxAttempts);
      expect(r.value.length, label(c)).toBe(allowed ? 1 : 0);
      if (allowed) expect(r.value[0]!.abortedBefore, label(c)).toBe(abortedIn(c));
    }
  });

  it('recovery fails an abandoned intent exactly when the rule says its budget is spent, as the executor would', async () => {
    const started: { c: Case; intentId: string }[] = [];
    for (const c of buildable.filter((x) => mayStartAttempt(x.history.length, abortedIn(x), x.maxAttempts))) {
      const intentId = await arrange(c);
      const r = await s.execution.fencedStartAttempts(token, [{ intentId, expectedAttemptCount: c.history.length }]);
      if (r.kind !== 'ok' || r.value.length !== 1) throw new Error(`${label(c)}: not started`);
      // The executor's decision for a retryable result of this attempt uses the same rule.
      const next = decide({ kind: 'retryable', httpStatus: 503, error: 'x', retryAfterMs: null },
        { intentId, attemptNo: c.history.length + 1, maxAttempts: c.maxAttempts, durationMs: 1, abortedBefore: r.value[0]!.abortedBefore },
        { baseDelayMs: 1, maxDelayMs: 1 }, () => 0).next.status;
      expect(next, label(c)).toBe(budgetExhausted(c.history.length + 1, abortedIn(c), c.maxAttempts) ? 'failed' : 'scheduled');
      started.push({ c, intentId });
    }
    expect(started.length).toBeGreaterThanOrEqual(5);
    await ctx.stealLease(LEASE_NAME, 'B'); // the holder died mid-call: the next epoch recovers its attempts
    const tokenB = { leaseName: LEASE_NAME, holderId: 'B', leaseEpoch: token.leaseEpoch + 1 };
    const rec = await s.execution.fencedRecoverOrphans(tokenB);
    expect(rec).toEqual({ kind: 'ok', value: { recovered: started.length } });
    for (const { c, intentId } of started) {
      const row = await s.intents.get(intentId);
      const exhausted = budgetExhausted(c.history.length + 1, abortedIn(c), c.maxAttempts);
      expect([row?.status, row?.lastError?.endsWith('; attempts exhausted')], label(c)).toEqual([exhausted ? 'failed' : 'scheduled', exhausted]);
    }
  });

  it('redrive gives a failed intent its sent attempts plus a fresh budget', async () => {
    const c: Case = { maxAttempts: 2, history: ['a', 's', 'a', 's'] };
    const intentId = await arrange(c);
    await ctx.setIntentStatus(intentId, 'failed');
    const r = await s.redrive.redrive({ ids: [intentId], failedFrom: null, failedTo: null, errorContains: null, limit: 10,
      redriveId: randomUUID(), requestedBy: 'test', reason: null });
    const sent = sentAttempts(c.history.length, abortedIn(c));
    expect(r.redriven.map((x) => [x.attemptsBefore, x.maxAttempts])).toEqual([[4, sent + c.maxAttempts]]);
    const again = await s.execution.fencedStartAttempts(token, [{ intentId, expectedAttemptCount: 4 }]);
    expect(again.kind === 'ok' && again.value.map((x) => [x.attemptNo, x.abortedBefore])).toEqual([[5, 2]]);
  });
});
