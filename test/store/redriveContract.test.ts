// The RedriveStore contract, run unchanged against every dialect: failed intents are made with the real
// fenced start/complete writes; redrive by ids and by filter (error text, time range), bounded per call,
// oldest failure first, idempotent, recorded per call; the attempt log is never rewritten and attempt
// numbers continue with a fresh budget.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext, itWhere } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import { acquireToken } from '../support/instances.js';
import type { Stores } from '../../src/store/stores.js';
import type { IntentContract } from '../../src/store/intentPorts.js';
import type { LeaseToken } from '../../src/store/ports.js';
import type { RedriveRequest } from '../../src/store/redrivePorts.js';
import { uuidv7 } from '../../src/intents/ids.js';

const LEASE = 'redrive-contract-lease';
const contract = (maxAttempts: number): IntentContract => ({ provider: { url: null }, payload: { a: 1 }, retry: { maxAttempts, baseDelayMs: 10, maxDelayMs: 20 } });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const byIds = (ids: string[], limit = 100): RedriveRequest =>
  ({ redriveId: uuidv7(), requestedBy: 'ops@test', reason: 'provider fixed', ids, failedFrom: null, failedTo: null, errorContains: null, limit });
const byFilter = (f: Partial<Pick<RedriveRequest, 'failedFrom' | 'failedTo' | 'errorContains'>>, limit = 100): RedriveRequest =>
  ({ redriveId: uuidv7(), requestedBy: 'ops@test', reason: null, ids: null, failedFrom: null, failedTo: null, errorContains: null, ...f, limit });

describe.each(dialects)('redrive store contract: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  let token: LeaseToken;
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    s = await ctx.openStores();
    token = await acquireToken(s, 'redrive-leader', 60_000, LEASE);
  });

  async function submit(maxAttempts = 2): Promise<string> {
    const intentId = uuidv7();
    await s.intents.insert({ intentId, idempotencyKey: null, requestHash: 'a'.repeat(64), contract: contract(maxAttempts), maxAttempts, notBefore: null });
    return intentId;
  }

  /** Run `n` attempts through the fenced writes: retryable errors, the last one permanent → failed (or `end`). */
  async function attempts(intentId: string, n: number, error: string, end: 'failed' | 'succeeded' = 'failed'): Promise<number[]> {
    const nos: number[] = [];
    for (let i = 0; i < n; i++) {
      const current = (await s.intents.get(intentId))!;
      const started = await s.execution.fencedStartAttempts(token, [{ intentId, expectedAttemptCount: current.attemptCount }]);
      if (started.kind !== 'ok' || started.value.length !== 1) return nos;
      const no = started.value[0]!.attemptNo;
      nos.push(no);
      const last = i === n - 1;
      const outcome = last ? (end === 'succeeded' ? 'succeeded' : 'permanent_error') : 'retryable_error';
      await s.execution.fencedCompleteAttempts(token, [{
        intentId, attemptNo: no, outcome, httpStatus: outcome === 'succeeded' ? 200 : 503, error: outcome === 'succeeded' ? null : `${error} #${no}`,
        durationMs: 5, next: last ? { status: end } : { status: 'scheduled', retryDelayMs: 0 },
      }]);
    }
    return nos;
  }

  async function failed(error = 'HTTP 400 bad request', n = 2): Promise<string> {
    const id = await submit(2);
    await attempts(id, n, error);
    return id;
  }

  it('by ids: only failed intents move (scheduled, due now, fresh budget, version moves); attempts untouched; recorded; twice is a no-op', async () => {
    const f = [await failed(), await failed(), await failed('timeout', 1)];
    const ok = await submit();
    await attempts(ok, 1, 'x', 'succeeded');
    const waiting = await submit();
    const unknown = uuidv7();
    const before = new Map((await ctx.intentRows()).map((r) => [r.intentId, r]));
    const attemptsBefore = await ctx.attemptRows();

    const r = await s.redrive.redrive(byIds([...f, ok, waiting, unknown]));
    expect(r.redriven.map((x) => x.intentId).sort()).toEqual([...f].sort());
    const now = (await s.ops.getClusterOverview(LEASE)).dbNow.getTime();
    expect(r.requestedAt.getTime()).toBeLessThanOrEqual(now);
    for (const x of r.redriven) {
      const b = before.get(x.intentId)!;
      expect(x.attemptsBefore).toBe(b.attemptCount);
      expect(x.maxAttempts).toBe(b.attemptCount + 2); // attempts sent so far + the contract's maxAttempts
    }
    const after = new Map((await ctx.intentRows()).map((row) => [row.intentId, row]));
    for (const id of f) {
      const a = after.get(id)!;
      const b = before.get(id)!;
      expect(a).toMatchObject({ status: 'scheduled', attemptCount: b.attemptCount, lastError: b.lastError });
      expect(a.nextAttemptAt.getTime()).toBe(r.requestedAt.getTime());
      expect(a.lastModifiedText > b.lastModifiedText).toBe(true);
    }
    for (const id of [ok, waiting]) expect(after.get(id)!.lastModifiedText).toBe(before.get(id)!.lastModifiedText);
    expect(await ctx.attemptRows()).toEqual(attemptsBefore); // append-only: nothing rewritten

    const again = await s.redrive.redrive(byIds(f));
    expect(again.redriven).toEqual([]);
    for (const id of f) expect((await ctx.intentRows()).find((x) => x.intentId === id)!.lastModifiedText).toBe(after.get(id)!.lastModifiedText);

    const log = await s.redrive.listRedrives(10);
    expect(log.map((x) => [x.redriveId, x.redriven])).toEqual([[again.redriveId, 0], [r.redriveId, 3]]);
    expect(log[1]).toMatchObject({ requestedBy: 'ops@test', reason: 'provider fixed' });
    expect(JSON.parse(log[1]!.selector)).toEqual({ ids: [...f, ok, waiting, unknown], limit: 100 });
    expect(log[1]!.requestedAt.getTime()).toBe(r.requestedAt.getTime());
  });

  it('attempt numbers continue with a fresh budget; the store refuses a start beyond it', async () => {
    const id = await failed('HTTP 500', 2);
    await s.redrive.redrive(byIds([id]));
    expect(await attempts(id, 2, 'again')).toEqual([3, 4]);
    expect((await s.intents.get(id))!).toMatchObject({ status: 'failed', attemptCount: 4, maxAttempts: 4 });
    expect((await s.intents.listAttempts(id)).map((a) => a.attemptNo)).toEqual([1, 2, 3, 4]);
    // A second redrive: again a fresh budget of 2 on top of the 4 attempts sent.
    const r = await s.redrive.redrive(byIds([id]));
    expect(r.redriven).toEqual([{ intentId: id, attemptsBefore: 4, maxAttempts: 6 }]);
    expect(await attempts(id, 1, 'x', 'succeeded')).toEqual([5]);
    expect((await s.intents.get(id))!.status).toBe('succeeded');
    // Only retryable errors after a redrive: the third start is refused (budget spent), never a seventh attempt.
    const other = await failed('HTTP 500', 2);
    await s.redrive.redrive(byIds([other]));
    expect(await attempts(other, 3, 'retry')).toEqual([3, 4]);
    expect((await s.intents.get(other))!).toMatchObject({ status: 'scheduled', attemptCount: 4, maxAttempts: 4 });
  });

  it('filters: last error contains (case-insensitive), failed time range; status is always failed', async () => {
    const a = await failed('HTTP 503 Service Unavailable');
    const b = await failed('connection error: ECONNRESET');
    await sleep(30);
    const mid = (await s.ops.getClusterOverview(LEASE)).dbNow;
    await sleep(30);
    const c = await failed('HTTP 503 service unavailable');
    const active = await submit(); // scheduled with no error: never selected
    expect((await s.redrive.redrive(byFilter({ errorContains: 'SERVICE unavailable' }))).redriven.map((x) => x.intentId).sort()).toEqual([a, c].sort());
    await attempts(a, 2, 'HTTP 503 Service Unavailable');
    await attempts(c, 2, 'HTTP 503 Service Unavailable');
    // a and c failed again after mid; b failed before it.
    expect((await s.redrive.redrive(byFilter({ failedFrom: mid }))).redriven.map((x) => x.intentId).sort()).toEqual([a, c].sort());
    await attempts(a, 2, 'x');
    await attempts(c, 2, 'x');
    expect((await s.redrive.redrive(byFilter({ failedTo: mid }))).redriven.map((x) => x.intentId)).toEqual([b]);
    expect((await s.redrive.redrive(byFilter({ failedFrom: mid, errorContains: 'X #' }))).redriven.map((x) => x.intentId).sort()).toEqual([a, c].sort());
    expect((await s.intents.get(active))!.lastModifiedAt).toEqual((await s.intents.get(active))!.createdAt);
    expect((await s.redrive.redrive(byFilter({ errorContains: 'no such error' }))).redriven).toEqual([]);
  });

  it('bounded: at most `limit` per call, oldest failure first, until none is left', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 5; i++) ids.push(await failed(`e${i}`, 1));
    const rounds: string[][] = [];
    for (let i = 0; i < 4; i++) rounds.push((await s.redrive.redrive(byFilter({}, 2))).redriven.map((x) => x.intentId));
    expect(rounds.map((r) => r.length)).toEqual([2, 2, 1, 0]);
    expect(rounds.flat().sort()).toEqual([...ids].sort());
    expect(rounds[0]!.sort()).toEqual(ids.slice(0, 2).sort()); // failed first → redriven first
    expect((await s.redrive.redrive(byIds(ids, 3))).redriven).toEqual([]);
  });

  itWhere(dialect.manySessions)('concurrent redrives of the same intents: each intent redriven exactly once', async () => {
    const ids: string[] = [];
    for (let i = 0; i < 12; i++) ids.push(await failed(`e${i}`, 1));
    const others = await Promise.all([1, 2, 3].map(() => ctx.openStores({ poolMax: 1 })));
    try {
      const rs = await Promise.all(others.map((o, i) => o.redrive.redrive(i === 0 ? byIds(ids) : byFilter({}, 7))));
      const all = rs.flatMap((r) => r.redriven.map((x) => x.intentId));
      expect(all.sort()).toEqual([...ids].sort());
      expect(rs.flatMap((r) => r.redriven).every((x) => x.maxAttempts === 1 + 2)).toBe(true);
      expect((await s.redrive.listRedrives(10)).reduce((n, x) => n + x.redriven, 0)).toBe(12);
    } finally {
      for (const o of others) await o.close();
    }
  });

  it('a contract whose maxAttempts is not an integer makes the redrive fail, moving and recording nothing (no silent fallback)', async () => {
    const id = await failed();
    const bad = {
      mssql: `UPDATE submission_intents SET contract = JSON_MODIFY(contract, '$.retry.maxAttempts', 'lots') WHERE intent_id = '${id}'`,
      mysql: `UPDATE submission_intents SET contract = JSON_SET(contract, '$.retry.maxAttempts', 'lots') WHERE intent_id = '${id}'`,
    }[dialect.name as string] ?? `UPDATE submission_intents SET contract = jsonb_set(contract, '{retry,maxAttempts}', '"lots"') WHERE intent_id = '${id}'`;
    await ctx.sql(bad);
    await expect(s.redrive.redrive(byIds([id]))).rejects.toThrow();
    expect((await s.intents.get(id))!.status).toBe('failed');
    expect(await s.redrive.listRedrives(10)).toEqual([]);
  });
});
