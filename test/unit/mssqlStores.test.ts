// The SQL Server stores' JavaScript glue, against a scripted runner (no server): how result sets map to the
// ports' outcomes, the fence's leaseLost path, and how driver errors map to StoreError kinds.
import { describe, expect, it } from 'vitest';
import sql from 'mssql';
import type { MssqlDatabase, MssqlRunner, Row } from '../../src/store/mssql/db.js';
import type { SqlQuery } from '../../src/store/mssql/params.js';
import { MssqlLeaseStore } from '../../src/store/mssql/leaseStore.js';
import { MssqlIntentStore } from '../../src/store/mssql/intentStore.js';
import { MssqlExecutionStore } from '../../src/store/mssql/executionStore.js';
import { MssqlPartitionStore } from '../../src/store/mssql/partitionStore.js';
import { fencedTransaction } from '../../src/store/mssql/fence.js';
import { mapMssqlError } from '../../src/store/mssql/errors.js';
import { StoreError } from '../../src/store/ports.js';

const ID = '0190a5b2-7c3d-7abc-8def-0123456789ab';
const token = { leaseName: 'L', holderId: 'h', leaseEpoch: 3 };
const t0 = new Date('2026-02-02T12:00:00.000Z');
const t1 = new Date('2026-02-02T12:01:00.000Z');

/** A runner that answers each run() with the next scripted result sets (or throws them). */
function scripted(answers: (Row[][] | Error)[]) {
  const seen: SqlQuery[] = [];
  const events: string[] = [];
  const runner: MssqlRunner = {
    async run<R>(q: SqlQuery) {
      seen.push(q);
      const a = answers.shift();
      if (a === undefined) throw new Error(`unexpected query: ${q.text.slice(0, 60)}`);
      if (a instanceof Error) throw a;
      return a as R[][];
    },
    async runBatch() {},
  };
  const db = {
    ...runner,
    async transaction<T>(fn: (tx: MssqlRunner) => Promise<T>) {
      events.push('begin');
      try {
        const v = await fn(runner);
        events.push('commit');
        return v;
      } catch (e) {
        events.push('rollback');
        throw e;
      }
    },
  } as unknown as MssqlDatabase;
  return { db, seen, events };
}

const leaseRow = { lease_name: 'L', holder_id: 'a', lease_epoch: '7', acquired_at: t0, renewed_at: t0, expires_at: t1, db_now: t0 };

describe('MssqlLeaseStore result mapping', () => {
  it('tryAcquire: acquired row → lease (bigint text → number); lost → the blocking row and database time', async () => {
    const { db } = scripted([[[{ acquired: true, ...leaseRow }]], [[{ acquired: false, ...leaseRow, holder_id: 'b' }]]]);
    const s = new MssqlLeaseStore(db);
    expect(await s.tryAcquire('L', 'a', 60_000)).toEqual({ acquired: true, lease: {
      leaseName: 'L', holderId: 'a', leaseEpoch: 7, acquiredAt: t0, renewedAt: t0, expiresAt: t1, dbNow: t0 } });
    const lost = await s.tryAcquire('L', 'c', 60_000);
    expect(lost).toMatchObject({ acquired: false, current: { holderId: 'b', expiresAt: t1 }, dbNow: t0 });
  });

  it('renew: no row → null; release: count → boolean', async () => {
    const { db } = scripted([[[]], [[{ released: 1 }]], [[{ released: 0 }]]]);
    const s = new MssqlLeaseStore(db);
    expect(await s.renew(token, 1_000)).toBeNull();
    expect(await s.release(token)).toBe(true);
    expect(await s.release(token)).toBe(false);
  });
});

describe('fences', () => {
  it('fencedTransaction: 0 fence rows → leaseLost, rolled back, fn never runs', async () => {
    const { db, events } = scripted([[[]]]);
    let ran = false;
    const out = await fencedTransaction(db, token, 'x', async () => ((ran = true), { value: 1, rowsWritten: 1 }));
    expect(out).toEqual({ kind: 'leaseLost' });
    expect(ran).toBe(false);
    expect(events).toEqual(['begin', 'rollback']);
  });

  it('fencedTransaction: fence held → fn, audit row (only when rows were written), commit', async () => {
    const { db, seen, events } = scripted([[[{ fenced: 1 }]], [[]]]);
    const out = await fencedTransaction(db, token, 'x', async () => ({ value: 'v', rowsWritten: 2 }));
    expect(out).toEqual({ kind: 'ok', value: 'v' });
    expect(seen.map((q) => q.text.match(/WITH \(HOLDLOCK, ROWLOCK\)|INSERT INTO submission_execution_audit/)?.[0])).toEqual([
      'WITH (HOLDLOCK, ROWLOCK)', 'INSERT INTO submission_execution_audit']);
    expect(events).toEqual(['begin', 'commit']);
  });

  it('fenced batches: fenced = false → leaseLost; otherwise the work result sets', async () => {
    const { db } = scripted([
      [[{ fenced: false }]],
      [[{ fenced: true }], [{ intent_id: ID, attempt_count: 1, max_attempts: 3, contract: '{"payload":{"a":1}}', version: '2026-02-02 12:00:00.1234567', aborted_before: 0 }]],
      [[{ fenced: true }], [], [{ held: 'draining' }]],
      [[{ fenced: true }], [], [{ held: null }]],
      [[{ fenced: true }], [{ recovered: 2 }]],
    ]);
    const s = new MssqlExecutionStore(db);
    expect(await s.fencedStartAttempts(token, [{ intentId: ID, expectedAttemptCount: 0 }])).toEqual({ kind: 'leaseLost' });
    expect(await s.fencedStartAttempts(token, [{ intentId: ID, expectedAttemptCount: 0 }])).toEqual({ kind: 'ok', value: [
      { intentId: ID, attemptNo: 1, maxAttempts: 3, abortedBefore: 0, contract: { payload: { a: 1 } }, version: '2026-02-02 12:00:00.1234567' }] });
    // The hold (the batch's last result set): held starts nothing; none held and nothing started is ok [].
    expect(await s.fencedStartAttempts(token, [{ intentId: ID, expectedAttemptCount: 0 }])).toEqual({ kind: 'held', by: 'draining' });
    expect(await s.fencedStartAttempts(token, [{ intentId: ID, expectedAttemptCount: 0 }])).toEqual({ kind: 'ok', value: [] });
    expect(await s.fencedRecoverOrphans(token)).toEqual({ kind: 'ok', value: { recovered: 2 } });
  });

  it('complete: rows in request order; an intent that changed meanwhile is not applied', async () => {
    const { db } = scripted([[[{ fenced: true }], [
      { req_id: ID, intent_id: ID, status: 'succeeded', next_attempt_at: t0, attempt_count: 1, max_attempts: 3, version: 'v1' },
      { req_id: ID.replace('ab', 'cd'), intent_id: null, status: null, next_attempt_at: null, attempt_count: null, max_attempts: null, version: null },
    ]]]);
    const out = await new MssqlExecutionStore(db).fencedCompleteAttempts(token, [
      { intentId: ID, attemptNo: 1, outcome: 'succeeded', httpStatus: 200, error: null, durationMs: 3, next: { status: 'succeeded' } },
      { intentId: ID.replace('ab', 'cd'), attemptNo: 1, outcome: 'succeeded', httpStatus: 200, error: null, durationMs: 3, next: { status: 'succeeded' } },
    ]);
    expect(out.kind === 'ok' && out.value.map((v) => [v.applied, v.row?.status ?? null])).toEqual([[true, 'succeeded'], [false, null]]);
  });
});

describe('MssqlExecutionStore reads', () => {
  it('refreshPage: db_now from the first result set even when the page is empty; settled from the bit', async () => {
    const { db } = scripted([
      [[{ db_now: t1 }], []],
      [[{ db_now: t1 }], [{ intent_id: ID, status: 'scheduled', next_attempt_at: t0, attempt_count: 0, max_attempts: 3, version: 'v', settled: true }]],
    ]);
    const s = new MssqlExecutionStore(db);
    const cursor = { modifiedAt: '2026-02-02 12:00:00.0000000', intentId: ID };
    expect(await s.refreshPage(cursor, 10, 0)).toEqual({ rows: [], dbNow: t1 });
    expect((await s.refreshPage(cursor, 10, 0)).rows).toEqual([
      { intentId: ID, status: 'scheduled', nextAttemptAt: t0, attemptCount: 0, maxAttempts: 3, version: 'v', settled: true }]);
  });

  it('rebuildStart: the cursor is the database text with the nil UUID', async () => {
    const { db } = scripted([[[{ db_now: t1, cursor_text: '2026-02-02 12:00:55.0000000' }]]]);
    expect(await new MssqlExecutionStore(db).rebuildStart(5_000)).toEqual({
      dbNow: t1, cursor: { modifiedAt: '2026-02-02 12:00:55.0000000', intentId: '00000000-0000-0000-0000-000000000000' } });
  });
});

describe('MssqlIntentStore', () => {
  const row = { intent_id: ID, idempotency_key: 'k', request_hash: 'a'.repeat(64), contract: '{"payload":{}}', status: 'scheduled',
    attempt_count: 0, max_attempts: 3, next_attempt_at: t0, created_at: t0, last_modified_at: t0, last_error: null, last_epoch: null };
  const n = { intentId: ID, idempotencyKey: 'k', requestHash: 'a'.repeat(64), contract: { provider: { url: null }, payload: {}, retry: { maxAttempts: 3, baseDelayMs: 1, maxDelayMs: 1 } }, maxAttempts: 3, notBefore: null };

  it('insert: created / existing from the `created` bit; a duplicate-key error still answers as a replay', async () => {
    const dup = new StoreError('conflict', 'Cannot insert duplicate key row', '2601');
    const { db } = scripted([[[{ created: true, ...row }]], [[{ created: false, ...row }]], dup, [[row]]]);
    const s = new MssqlIntentStore(db);
    expect((await s.insert(n)).kind).toBe('created');
    expect((await s.insert(n)).kind).toBe('existing');
    expect((await s.insert(n))).toMatchObject({ kind: 'existing', intent: { intentId: ID, contract: { payload: {} } } });
  });

  it('cancel: no row updated → conflict with the current row, or notFound', async () => {
    const { db } = scripted([[[]], [[{ ...row, status: 'succeeded' }]], [[]], [[]]]);
    const s = new MssqlIntentStore(db);
    expect(await s.cancel(ID)).toMatchObject({ kind: 'conflict', intent: { status: 'succeeded' } });
    expect(await s.cancel(ID)).toEqual({ kind: 'notFound' });
  });
});

describe('MssqlPartitionStore (issue 26) result mapping', () => {
  const change = { change_id: ID, from_count: 4, to_count: 8, state: 'pending', requested_at: t0, requested_by: 'ops', prepare_cursor: ID.toUpperCase(),
    prepared_at: t1, changer: null, claimed_at: null, switched_at: null, scan_cursor: null, scan_done_at: null, catch_up_cursor: null, rows_moved: '12', completed_at: null,
    failed_steps: 0, last_step_error: null, last_failed_at: null, cancelled_at: null, cancelled_by: null };
  const noChange = Object.fromEntries(Object.keys(change).map((k) => [k, null]));
  const fence = [{ leaseName: 'L', holderId: 'h~changer', leaseEpoch: 3 }, { leaseName: 'L-1', holderId: 'h~changer', leaseEpoch: 5 }];
  const asChange = { changeId: ID, fromCount: 4, toCount: 8, state: 'pending', requestedAt: t0, requestedBy: 'ops', prepareCursor: ID, preparedAt: t1,
    changer: null, claimedAt: null, switchedAt: null, scanCursor: null, scanDoneAt: null, catchUpCursor: null, rowsMoved: 12, completedAt: null,
    failedSteps: 0, lastStepError: null, lastFailedAt: null, cancelledAt: null, cancelledBy: null };

  it('readLayout: no count row → count 1 recorded by none at database time; the active change mapped (bigint text → number)', async () => {
    const { db } = scripted([
      [[{ db_now: t1, partition_count: null, recorded_at: null, recorded_by: null, layout_generation: null, ...noChange }]],
      [[{ db_now: t1, partition_count: 4, recorded_at: t0, recorded_by: 'host-a', layout_generation: '3', ...change }]],
    ]);
    const s = new MssqlPartitionStore(db);
    expect(await s.readLayout()).toEqual({ count: 1, recordedAt: t1, recordedBy: 'none', generation: 0, active: null, dbNow: t1 });
    expect(await s.readLayout()).toEqual({ count: 4, recordedAt: t0, recordedBy: 'host-a', generation: 3, active: asChange, dbNow: t1 });
  });

  it('requestChange: the outcome row picks the kind; unchanged carries the count as read', async () => {
    const head = (outcome: string) => [{ outcome, partition_count: 4, recorded_at: t0, recorded_by: 'host-a' }];
    const { db } = scripted([[head('created'), [change]], [head('existing'), [change]], [head('conflict'), [change]], [head('unchanged'), []]]);
    const s = new MssqlPartitionStore(db);
    expect(await s.requestChange(8, 'ops', ID)).toEqual({ kind: 'created', change: asChange });
    expect(await s.requestChange(8, 'ops', ID)).toEqual({ kind: 'existing', change: asChange });
    expect(await s.requestChange(2, 'ops', ID)).toEqual({ kind: 'conflict', active: asChange });
    expect(await s.requestChange(4, 'ops', ID)).toEqual({ kind: 'unchanged', count: { count: 4, recordedAt: t0, recordedBy: 'host-a' } });
  });

  it('fenced writes: no token → leaseLost without a query; fenced = false → leaseLost; else the change row; an unknown id fails', async () => {
    const { db, seen } = scripted([[[{ fenced: false }]], [[{ fenced: true }], [{ ...change, state: 'reassigning' }]], [[{ fenced: true }], []]]);
    const s = new MssqlPartitionStore(db);
    expect(await s.claimChange([], ID)).toEqual({ kind: 'leaseLost' });
    expect(seen).toHaveLength(0);
    expect(await s.claimChange(fence, ID)).toEqual({ kind: 'leaseLost' });
    expect(await s.switchCount(fence, ID)).toEqual({ kind: 'ok', value: { ...asChange, state: 'reassigning' } });
    await expect(s.moveIntents(fence, ID, [], { scanCursor: null, scanDone: true })).rejects.toThrow(StoreError);
  });

  it('completeChange after a lost reply: the fence is gone (leases released), the change completed → ok; still reassigning → leaseLost', async () => {
    const completed = { ...change, state: 'completed', completed_at: t1 };
    const { db } = scripted([[[{ fenced: false }]], [[completed]], [[{ fenced: false }]], [[{ ...change, state: 'reassigning' }]]]);
    const s = new MssqlPartitionStore(db);
    expect(await s.completeChange(fence, ID)).toEqual({ kind: 'ok', value: { ...asChange, state: 'completed', completedAt: t1 } });
    expect(await s.completeChange(fence, ID)).toEqual({ kind: 'leaseLost' });
  });

  it('getChange: an id that is not a UUID is no such change (no query); listForReassign maps rows', async () => {
    const { db, seen } = scripted([[[{ intent_id: ID, partition_key: null, partition_no: 3 }]]]);
    const s = new MssqlPartitionStore(db);
    expect(await s.getChange('not-a-uuid')).toBeNull();
    expect(seen).toHaveLength(0);
    expect(await s.listForReassign({ after: null, limit: 10, modifiedSince: null, scope: 'all' })).toEqual([{ intentId: ID, partitionKey: null, partition: 3 }]);
  });

  it('prepareBatch: unfenced (no fence result set); the change row mapped; no row → null; an id that is not a UUID → null without a query', async () => {
    const preparing = { ...change, state: 'preparing', prepared_at: null };
    const { db, seen } = scripted([[[preparing]], [[]]]);
    const s = new MssqlPartitionStore(db);
    const batch = { limit: 10, horizon: t0 };
    expect(await s.prepareBatch(ID, batch)).toEqual({ ...asChange, state: 'preparing', preparedAt: null });
    expect(await s.prepareBatch(ID, batch)).toBeNull();
    expect(await s.prepareBatch('not-a-uuid', batch)).toBeNull();
    expect(seen).toHaveLength(2);
    expect(seen[0]!.text).not.toMatch(/@fence/);
  });

  it('THROW 51001 / 51002 (a short fence, a move outside the new count: the batch rolled back) → RangeError, as the other dialects; other errors as they are', async () => {
    const thrown = (n: number) => mapMssqlError(Object.assign(new sql.RequestError('refused', 'EREQUEST'), { number: n }));
    const { db } = scripted([thrown(51002), thrown(51001), thrown(1205)]);
    const s = new MssqlPartitionStore(db);
    await expect(s.moveIntents(fence, ID, [{ intentId: ID, partition: 9 }], { scanCursor: null, scanDone: false })).rejects.toThrow(RangeError);
    await expect(s.switchCount(fence, ID)).rejects.toThrow(RangeError);
    await expect(s.switchCount(fence, ID)).rejects.toMatchObject({ name: 'StoreError', kind: 'transient' });
  });
});

describe('mapMssqlError', () => {
  const req = (number: number) => Object.assign(new sql.RequestError('x', 'EREQUEST'), { number });
  it.each([1205, 40001, 40197, 40501, 40613, 49918, 49919, 49920, 4060, 10928, 10929])('error %i → transient', (n) => {
    expect(mapMssqlError(req(n))).toMatchObject({ kind: 'transient', code: String(n) });
  });
  it.each([2627, 2601])('error %i → conflict', (n) => {
    expect(mapMssqlError(req(n))).toMatchObject({ kind: 'conflict', code: String(n) });
  });
  it.each(['ECONNRESET', 'ESOCKET', 'ETIMEOUT', 'ECONNCLOSED'])('code %s → transient', (code) => {
    expect(mapMssqlError(new sql.ConnectionError('lost', code as never)).kind).toBe('transient');
    expect(mapMssqlError(Object.assign(new Error('x'), { code })).kind).toBe('transient');
  });
  it('a socket errno under a driver error counts too; others are fatal; StoreErrors pass through', () => {
    const wrapped = Object.assign(new sql.RequestError('boom', 'EREQUEST'), { originalError: Object.assign(new Error('r'), { code: 'ECONNRESET' }) });
    expect(mapMssqlError(wrapped).kind).toBe('transient');
    expect(mapMssqlError(req(208))).toMatchObject({ kind: 'fatal', code: '208' }); // invalid object name
    expect(mapMssqlError(req(547))).toMatchObject({ kind: 'data', code: '547' }); // a CHECK constraint: refused every time
    expect(mapMssqlError(new sql.ConnectionError('Login failed for user', 'ELOGIN')).kind).toBe('fatal');
    const e = new StoreError('conflict', 'm', '2627');
    expect(mapMssqlError(e)).toBe(e);
  });
});
