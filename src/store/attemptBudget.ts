// The attempt budget, defined once for both SQL dialects and the executor:
//   sent attempts = attempt_count − the intent's attempts closed as `aborted` (never sent to the provider);
//   START: another attempt may start while sent < max_attempts;
//   recovery: an attempt abandoned after a leader change counts as sent, so the intent fails when sent ≥ max_attempts;
//   a retryable result (executor, retryPolicy.decide): failed when sent ≥ max_attempts, else scheduled again;
//   redrive: a fresh budget, max_attempts := sent + the contract's maxAttempts.
// Each dialect supplies only its spelling of an integer COUNT(*); the SQL text of the rule is built here, so the
// PostgreSQL statements (src/store/postgres) and the T-SQL batches (src/store/mssql) cannot drift apart.
// test/store/attemptBudgetContract.test.ts checks the SQL against the functions below on every dialect.

/** Sent attempts (those that used up the budget) of an intent. */
export const sentAttempts = (attemptCount: number, aborted: number): number => attemptCount - aborted;

/** START predicate: may the intent start attempt attemptCount + 1? */
export const mayStartAttempt = (attemptCount: number, aborted: number, maxAttempts: number): boolean =>
  sentAttempts(attemptCount, aborted) < maxAttempts;

/** Exhausted once its current attempt counts as sent (recovery of an abandoned attempt, a retryable result). */
export const budgetExhausted = (attemptCount: number, aborted: number, maxAttempts: number): boolean =>
  sentAttempts(attemptCount, aborted) >= maxAttempts;

/** The budget's SQL fragments for one dialect; `i` is the alias of submission_intents in the statement. */
export interface AttemptBudgetSql {
  /** Scalar subquery: the aborted attempts of the intent whose id is `intentId` (an int). */
  aborted(intentId: string): string;
  /** START: may `i` start another attempt (the cheap comparison first: nothing is counted while it holds). */
  mayStart(i: string): string;
  /** Recovery: `i` has no attempt left once its current one counts as sent. */
  exhausted(i: string): string;
  /** Aborted attempts before attempt number `attemptNo` of intent `intentId` (0 for the first attempt). */
  abortedBefore(attemptNo: string, intentId: string): string;
  /** Redrive: the new max_attempts of `i` — the attempts sent so far plus a fresh budget. */
  redrivenMaxAttempts(i: string, freshBudget: string): string;
}

/** `countInt`: the dialect's integer COUNT(*) (PostgreSQL `count(*)::int`, T-SQL `COUNT(*)`). */
export function attemptBudgetSql(countInt: string): AttemptBudgetSql {
  const aborted = (intentId: string) =>
    `(SELECT ${countInt} FROM submission_attempts AS x WHERE x.intent_id = ${intentId} AND x.outcome = 'aborted')`;
  const sent = (i: string) => `${i}.attempt_count - ${aborted(`${i}.intent_id`)}`;
  return {
    aborted,
    mayStart: (i) => `(${i}.attempt_count < ${i}.max_attempts OR ${sent(i)} < ${i}.max_attempts)`,
    exhausted: (i) => `${sent(i)} >= ${i}.max_attempts`,
    abortedBefore: (attemptNo, intentId) => `CASE WHEN ${attemptNo} > 1 THEN ${aborted(intentId)} ELSE 0 END`,
    redrivenMaxAttempts: (i, freshBudget) => `${sent(i)} + ${freshBudget}`,
  };
}
