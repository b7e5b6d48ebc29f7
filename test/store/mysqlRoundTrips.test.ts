// Round trips of the MySQL / MariaDB executor's fenced writes, counted on the wire (every command the client sends
// is one request/response exchange): a fenced start and a fenced completion each cost two, also when the lease is
// lost (then nothing is written, and the first round trip locks nothing), and the writes still come after the fence in
// the same transaction. A completion moves an intent on only for the attempt it closed. And
// what that rests on (db.ts pipelined): a failing statement stops its batch, and the transaction rolls back. A start's
// writes may reach the server late (its reply lost, the client gone): the aborted record written meanwhile still
// finds the attempt it started. A hold (a pause or a drain) committed between a start's two trips holds it in the second.
// An intake of a new intent is one round trip (its INSERT and read-back in one batch); a replay two; a reply lost
// after the INSERT committed is replayed by the retry with the key, not duplicated.
import { randomUUID } from 'node:crypto';
import { describe, expect, inject, it, type TestContext } from 'vitest';
import { openMysqlPool, type MyDatabase } from '../../src/store/mysql/db.js';
import { MysqlExecutionStore } from '../../src/store/mysql/executionStore.js';
import { isStoreError, type LeaseToken } from '../../src/store/ports.js';
import type { NewIntent } from '../../src/store/intentPorts.js';
import { createMysqlStores } from '../../src/store/mysql/index.js';
import type { Stores } from '../../src/store/stores.js';
import { MYSQL_TEST_URL, withMysqlDatabase as withDatabase } from '../support/mysqlServer.js';
import { MysqlCommandCounter, type MysqlCommand } from '../support/mysqlCommandCounter.js';
import { acquireToken, submit } from '../support/instances.js';
import { aborted } from '../../src/provider/retryPolicy.js';

const open = (url: string, database?: string) => openMysqlPool({ url, max: 2, statementTimeoutMs: 10_000, database });

/** (action, rows_written) of every audit row, in sequence order. */
async function auditRows(database: string): Promise<[string, number][]> {
  const db = open(MYSQL_TEST_URL, database);
  try {
    return (await db.query<{ action: string; rows_written: number }>('SELECT action, rows_written FROM submission_execution_audit ORDER BY seq'))
      .rows.map((r) => [r.action, Number(r.rows_written)]);
  } finally {
    await db.close();
  }
}

/** The server's address with the counting proxy in front. */
async function countingProxy(): Promise<{ counter: MysqlCommandCounter; url: string }> {
  const target = new URL(MYSQL_TEST_URL);
  const counter = new MysqlCommandCounter(target.hostname, Number(target.port || 3306));
  const via = new URL(MYSQL_TEST_URL);
  via.hostname = '127.0.0.1';
  via.port = String(await counter.listen());
  return { counter, url: via.toString() };
}

/** `fn` with stores on the server at `url`, database `name`, closed afterwards. */
async function withStores<T>(url: string, name: string, fn: (s: Stores) => Promise<T>): Promise<T> {
  const s = createMysqlStores(open(url, name));
  try {
    return await fn(s);
  } finally {
    await s.close();
  }
}

/** `fn` on a fresh migrated database (its name), with stores and holder A's token; skipped without a server. */
async function withLeader(t: TestContext, fn: (name: string, s: Stores, token: LeaseToken) => Promise<void>): Promise<void> {
  const skip = inject('mysqlUnavailable');
  if (skip) return t.skip(skip);
  await withDatabase((name) => withStores(MYSQL_TEST_URL, name, async (s) => {
    await s.migrate();
    await fn(name, s, await acquireToken(s, 'A'));
  }));
}

const newIntent = (key: string, requestHash = '0'.repeat(64)): NewIntent => ({ intentId: randomUUID(), idempotencyKey: key,
  requestHash, contract: { provider: { url: null }, payload: { n: 1 }, retry: { maxAttempts: 5, baseDelayMs: 10, maxDelayMs: 50 } },
  maxAttempts: 5, notBefore: null, partitionHash: 7 });

/** `fn` on a fresh migrated database (its name), with stores whose every command passes the counting proxy; skipped
 *  without a server. */
async function withCounted(t: TestContext, fn: (name: string, s: Stores, counter: MysqlCommandCounter) => Promise<void>): Promise<void> {
  const skip = inject('mysqlUnavailable');
  if (skip) return t.skip(skip);
  const { counter, url } = await countingProxy();
  try {
    await withDatabase(async (name) => {
      await withStores(MYSQL_TEST_URL, name, (direct) => direct.migrate());
      await withStores(url, name, (s) => fn(name, s, counter));
    });
  } finally {
    await counter.close();
  }
}

const texts = (cs: MysqlCommand[]) => cs.map((c) => c.text.replace(/\s+/g, ' ').slice(0, 60));

/** `db` whose pipelined transactions run `between()` after each round trip but the last (locks taken, not released). */
const pausing = (db: MyDatabase, between: () => Promise<void>): MyDatabase => ({
  ...db,
  pipelined: (fn) => db.pipelined((tx) => fn({ send: async (x) => { const r = await tx.send(x); await between(); return r; }, commit: (x) => tx.commit(x) })),
});

/** Sessions of `database` waiting for a row lock (INNODB_TRX: MySQL 8 and MariaDB alike). */
const lockWaits = async (db: MyDatabase, database: string) => Number((await db.query<{ n: number }>(`SELECT COUNT(*) AS n
  FROM information_schema.INNODB_TRX t JOIN information_schema.PROCESSLIST p ON p.ID = t.trx_mysql_thread_id
 WHERE t.trx_state = 'LOCK WAIT' AND p.DB = ?`, [database])).rows[0]!.n);

describe('mysql round trips: fenced writes and intake', () => {
  it('a fenced start and a fenced completion take two round trips each, as does a lost lease (writing nothing)', (t) =>
    withCounted(t, async (name, s, counter) => {
      const token = await acquireToken(s, 'A');
      const cycle = async (id: string) => {
        const start = await counter.during(() => s.execution.fencedStartAttempts(token, [{ intentId: id, expectedAttemptCount: 0 }]));
        const complete = await counter.during(() => s.execution.fencedCompleteAttempts(token, [{
          intentId: id, attemptNo: 1, outcome: 'succeeded', httpStatus: 200, error: null, durationMs: 5, next: { status: 'succeeded' } }]));
        return { start, complete };
      };
      await cycle((await submit(s)).intentId); // warm: every connection opened and its session pinned
      await cycle((await submit(s)).intentId);
      const id = (await submit(s)).intentId;
      const { start, complete } = await cycle(id);
      expect(start.value).toMatchObject({ kind: 'ok', value: [{ intentId: id, attemptNo: 1 }] });
      expect(complete.value).toMatchObject({ kind: 'ok', value: [{ intentId: id, applied: true }] });
      console.log(`[round trips] start ${start.commands.length}: ${JSON.stringify(texts(start.commands))}`);
      console.log(`[round trips] complete ${complete.commands.length}: ${JSON.stringify(texts(complete.commands))}`);
      expect(start.commands.length).toBe(2); // before: 9 (each statement its own round trip)
      expect(complete.commands.length).toBe(2); // before: 10
      // The first batch begins the transaction and reads the fence before anything else, and writes nothing; the
      // last one writes, appends the audit row and commits.
      for (const c of [start.commands, complete.commands]) {
        expect(c[0]!.text).toMatch(/^START TRANSACTION;\s*SELECT 1 AS fenced FROM submission_manager_leases/);
        expect(c[0]!.text).not.toMatch(/;\s*(UPDATE|INSERT|DELETE|COMMIT)\b/);
        expect(c.at(-1)!.text).toMatch(/INSERT INTO submission_execution_audit[^;]*;\s*COMMIT$/);
      }
      const audit = await auditRows(name);
      expect(audit.slice(-2)).toEqual([['start_attempts', 1], ['complete_attempts', 2]]);

      // A stale token: the fence finds no row, the transaction is rolled back; nothing written, two round trips.
      const stale = { ...token, leaseEpoch: token.leaseEpoch - 1 };
      const other = (await submit(s)).intentId;
      const lost = await counter.during(() => s.execution.fencedStartAttempts(stale, [{ intentId: other, expectedAttemptCount: 0 }]));
      expect(lost.value).toEqual({ kind: 'leaseLost' });
      expect(texts(lost.commands).at(-1)).toBe('ROLLBACK');
      expect(lost.commands.length).toBe(2);
      expect((await s.intents.get(other))?.attemptCount).toBe(0);
      const late = await s.execution.fencedCompleteAttempts(stale, [{
        intentId: id, attemptNo: 1, outcome: 'succeeded', httpStatus: 200, error: null, durationMs: 5, next: { status: 'succeeded' } }]);
      expect(late).toEqual({ kind: 'leaseLost' });
      expect((await s.intents.get(id))?.status).toBe('succeeded');
      expect((await auditRows(name)).slice(-2)).toEqual([['start_attempts', 1], ['complete_attempts', 2]]); // nothing after
    }));

  it('an intake: a new intent in one round trip, a replay in two (the stored intent), a lost reply replayed by the retry', (t) =>
    withCounted(t, async (_name, s, counter) => {
      const intake = (n: NewIntent) => counter.during(() => s.intents.insert(n));
      await intake(newIntent('warm'));
      await intake(newIntent('warm')); // a replay too: a connection of each pool opened and its session pinned
      const created = await intake(newIntent('k1'));
      expect(created.value).toMatchObject({ kind: 'created', intent: { idempotencyKey: 'k1', status: 'scheduled', partition: 0 } });
      expect(created.commands.length).toBe(1); // before: 2 (the INSERT, then the read-back)
      expect(created.commands[0]!.text).toMatch(/^INSERT INTO submission_intents[^;]*;\s*SELECT [^;]* FROM submission_intents WHERE intent_id = '[^;]*$/);
      expect(created.commands[0]!.text.split(';').at(-1)).not.toMatch(/\bcontract\b/); // the caller holds it
      // The same key: the batch stops at the INSERT (the read-back never runs), then the key's row is read.
      const replay = await intake(newIntent('k1'));
      expect(replay.value).toEqual({ kind: 'existing', intent: created.value.intent });
      expect(texts(replay.commands).map((x) => x.slice(0, 12))).toEqual(['INSERT INTO ', 'SELECT inten']);
      const other = await intake(newIntent('k1', '1'.repeat(64))); // another body: the stored one, for the conflict
      expect(other.value).toMatchObject({ kind: 'existing', intent: { intentId: created.value.intent.intentId, requestHash: '0'.repeat(64) } });

      const lost = newIntent('k2');
      const cut = counter.loseReplyTo(/^INSERT INTO submission_intents/);
      expect(await s.intents.insert(lost).catch((e: unknown) => e)).toMatchObject({ name: 'StoreError', kind: 'transient' });
      await cut;
      const retried = await s.intents.insert(newIntent('k2')); // the client's retry: a fresh intent id, the same key
      expect(retried).toMatchObject({ kind: 'existing', intent: { intentId: lost.intentId, idempotencyKey: 'k2' } });
      expect((await s.intents.list({ limit: 10 })).map((i) => i.idempotencyKey).sort()).toEqual(['k1', 'k2', 'warm']);
    }));

  it('pipelined and batch: a failing statement stops its batch (nothing after it runs); a transaction rolls back, a batch keeps what ran', async (t) => {
    const skip = inject('mysqlUnavailable');
    if (skip) return t.skip(skip);
    await withDatabase(async (name) => {
      const db = openMysqlPool({ url: MYSQL_TEST_URL, max: 1, statementTimeoutMs: 10_000, database: name }); // one connection
      try {
        await db.query('CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB');
        const insert = (id: number) => ({ text: 'INSERT INTO t (id) VALUES (?)', params: [id] });
        const before = Number((await db.pipelined((tx) => tx.commit([{ text: 'SELECT CONNECTION_ID() AS id' }])))[0]!.rows[0]!.id);
        const failed = await db.pipelined((tx) => tx.commit([{ text: 'SET @after = 0' }, insert(1), insert(1), { text: 'SET @after = 1' }, insert(2)]))
          .catch((e: unknown) => e);
        expect(failed).toMatchObject({ name: 'StoreError', kind: 'conflict' });
        // Returning without COMMIT rolls back too.
        expect(await db.pipelined(async (tx) => (await tx.send([insert(3)]))[0]!.affectedRows)).toBe(1);
        const [committed, after] = await db.pipelined((tx) => tx.commit([{ text: 'SELECT COUNT(*) AS n FROM t' }, { text: 'SELECT @after AS v, CONNECTION_ID() AS id' }]));
        expect(Number(committed!.rows[0]!.n)).toBe(0);
        // The same session (the pipelining pool's one connection): the statement before the failing one ran, those after it never did.
        expect([Number(after!.rows[0]!.id), Number(after!.rows[0]!.v)]).toEqual([before, 0]);
        const [inserted, read] = await db.pipelined((tx) => tx.commit([insert(4), { text: 'SELECT id FROM t' }]));
        expect([inserted!.affectedRows, read!.rows]).toEqual([1, [{ id: 4 }]]);
        // A batch, outside any transaction: each statement commits as it completes; a failing one stops the batch
        // (nothing after it runs), what ran before it stays.
        expect(await db.batch([insert(5), insert(5), { text: 'SET @after = 2' }]).catch((e: unknown) => e)).toMatchObject({ name: 'StoreError', kind: 'conflict' });
        const [kept, session] = await db.batch([{ text: 'SELECT id FROM t ORDER BY id' }, { text: 'SELECT @after AS v, CONNECTION_ID() AS id' }]);
        expect(kept!.rows).toEqual([{ id: 4 }, { id: 5 }]);
        expect([Number(session!.rows[0]!.id), Number(session!.rows[0]!.v)]).toEqual([before, 0]);
      } finally {
        await db.close();
      }
    });
  });

  it("a start's writes arriving late: the aborted record waits for them and closes the attempt (never sent, not charged)", (t) => withLeader(t, async (name, s, token) => {
    const id = (await submit(s)).intentId;
    // The start's first round trip (the intent locked), then its writes late, as a session the client gave up on.
    const late = openMysqlPool({ url: MYSQL_TEST_URL, max: 1, statementTimeoutMs: 10_000, database: name });
    const probe = open(MYSQL_TEST_URL, name);
    let writeNow!: () => void;
    const gate = new Promise<void>((r) => (writeNow = r));
    const locked = new Promise<void>((held) => {
      void late.transaction(async (tx) => {
        await tx.query('SELECT intent_id FROM submission_intents WHERE intent_id = ? FOR UPDATE', [id]);
        held();
        await gate;
        await tx.query(`UPDATE submission_intents SET status = 'in_flight', attempt_count = 1, last_epoch = ? WHERE intent_id = ?`, [token.leaseEpoch, id]);
        await tx.query(`INSERT INTO submission_attempts (intent_id, attempt_no, lease_epoch, holder_id, started_at, outcome)
          VALUES (?, 1, ?, ?, UTC_TIMESTAMP(6), 'started')`, [id, token.leaseEpoch, token.holderId]);
      });
    });
    try {
      await locked;
      const record = s.execution.fencedCompleteAttempts(token, [{ ...aborted({ intentId: id, attemptNo: 1 }, "the start's reply was lost"),
        attemptEpoch: token.leaseEpoch }]);
      const waiters = () => lockWaits(probe, name); // the late start holds its lock: the one waiter is the record
      // (INNODB_TRX is refreshed only when not read for 100 ms: polled slower.)
      for (let i = 0; i < 50 && (await waiters()) === 0; i++) await new Promise((r) => setTimeout(r, 150));
      expect(await waiters()).toBeGreaterThan(0); // the record waits for the late start
      writeNow();
      expect(await record).toMatchObject({ kind: 'ok', value: [{ intentId: id, applied: true, row: { status: 'scheduled' } }] });
      expect((await s.intents.listAttempts(id)).map((a) => a.outcome)).toEqual(['aborted']); // before: left 'started'
    } finally {
      writeNow();
      await late.close();
      await probe.close();
    }
  }));

  it.for(['drain', 'pause'] as const)('a %s committed between a start\'s two round trips holds it in the commit trip: nothing starts, no audit row', (hold, t) =>
    withLeader(t, async (name, s, token) => {
      const id = (await submit(s)).intentId;
      const db = open(MYSQL_TEST_URL, name);
      try {
        // The pick found the intent (no hold yet); the operator's request commits before the writes are sent.
        const store = new MysqlExecutionStore(pausing(db, async () => {
          if (hold === 'drain') await s.ops.requestHandover(token.leaseName, randomUUID(), 'test', 'between the trips');
          else await s.ops.setPaused(token.leaseName, true, 'test', 'between the trips');
        }), 0);
        const out = await store.fencedStartAttempts(token, [{ intentId: id, expectedAttemptCount: 0 }]);
        expect(out).toEqual({ kind: 'held', by: hold === 'drain' ? 'draining' : 'paused' });
        expect(await s.intents.get(id)).toMatchObject({ status: 'scheduled', attemptCount: 0 });
        expect(await s.intents.listAttempts(id)).toEqual([]);
        expect(await auditRows(name)).toEqual([]);
      } finally {
        await db.close();
      }
    }));

  it("a deposed leader's first round trip locks nothing; the holder's locks its rows, never the lease row", (t) => withLeader(t, async (name, s, token) => {
    const stale = { ...token, leaseEpoch: token.leaseEpoch - 1 }; // another epoch holds the lease
    const db = open(MYSQL_TEST_URL, name);
    const probe = openMysqlPool({ url: MYSQL_TEST_URL, max: 1, statementTimeoutMs: 1_000, database: name }); // waits 1 s at most
    /** Whether another session gets the lock `text` takes now (false: it waited out its lock wait timeout). */
    const free = (text: string, params: unknown[]) => probe.transaction((tx) => tx.query(text, params)).then(() => true,
      (e: unknown) => (isStoreError(e) && ['1205', '1969'].includes(e.code ?? '') ? false : Promise.reject(e)));
    const intent = (id: string) => free('SELECT intent_id FROM submission_intents WHERE intent_id = ? FOR UPDATE', [id]);
    const attempts = (id: string) => free('SELECT attempt_no FROM submission_attempts WHERE intent_id = ? FOR UPDATE', [id]);
    let between = async () => {};
    const execution = new MysqlExecutionStore(pausing(db, () => between()), 0);
    const seen: boolean[] = [];
    try {
      const [id, other] = [(await submit(s)).intentId, (await submit(s)).intentId];
      between = async () => void seen.push(await intent(id), await free(
        'SELECT lease_name FROM submission_manager_leases WHERE lease_name = ? LOCK IN SHARE MODE', [token.leaseName]));
      expect(await execution.fencedStartAttempts(token, [{ intentId: id, expectedAttemptCount: 0 }])).toMatchObject({ kind: 'ok', value: [{ intentId: id }] });
      expect(seen.splice(0)).toEqual([false, true]); // the intent locked; the lease row only for share (the fence)
      between = async () => void seen.push(await intent(other));
      expect(await execution.fencedStartAttempts(stale, [{ intentId: other, expectedAttemptCount: 0 }])).toEqual({ kind: 'leaseLost' });
      between = async () => void seen.push(await intent(id), await attempts(id));
      const done = { intentId: id, attemptNo: 1, outcome: 'succeeded', httpStatus: 200, error: null, durationMs: 5, next: { status: 'succeeded' } } as const;
      expect(await execution.fencedCompleteAttempts(stale, [done])).toEqual({ kind: 'leaseLost' });
      expect(seen.splice(0)).toEqual([true, true, true]); // the deposed start and completion locked nothing
      between = async () => {};
      expect((await s.intents.get(id))?.status).toBe('in_flight');

      // Two completions of one intent, at attempt 2: attempt 1's closes, attempt 2's does not (another epoch's
      // record). The intent stays in flight: it moves on only with the attempt closed here.
      await db.query('INSERT INTO submission_attempts (intent_id, attempt_no, lease_epoch, holder_id, started_at, outcome) VALUES (?, 2, ?, ?, UTC_TIMESTAMP(6), \'started\')',
        [id, token.leaseEpoch, token.holderId]);
      await db.query('UPDATE submission_intents SET attempt_count = 2 WHERE intent_id = ?', [id]);
      const mixed = await execution.fencedCompleteAttempts(token, [
        { ...done, attemptNo: 2, attemptEpoch: token.leaseEpoch - 1 },
        { ...aborted({ intentId: id, attemptNo: 1 }, 'test'), attemptEpoch: token.leaseEpoch },
      ]);
      expect(mixed).toMatchObject({ kind: 'ok' });
      expect((await s.intents.get(id))?.status).toBe('in_flight');
      expect((await s.intents.listAttempts(id)).map((a) => a.outcome)).toEqual(['aborted', 'started']);
      expect((await auditRows(name)).at(-1)).toEqual(['complete_attempts', 1]);
    } finally {
      await db.close();
      await probe.close();
    }
  }));
});
