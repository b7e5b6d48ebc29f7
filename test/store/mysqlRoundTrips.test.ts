// Round trips of the MySQL / MariaDB executor's fenced writes, counted on the wire (every command the client sends
// is one request/response exchange): a fenced start and a fenced completion each cost at most three, also when the
// lease is lost (then nothing is written), and the writes still come after the fence in the same transaction. And
// what that rests on (db.ts pipelined): a failing statement stops its batch, and the transaction rolls back. A start's
// writes may reach the server late (its reply lost, the client gone): the aborted record written meanwhile still
// finds the attempt it started.
import { describe, expect, inject, it } from 'vitest';
import { openMysqlPool } from '../../src/store/mysql/db.js';
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

const texts = (cs: MysqlCommand[]) => cs.map((c) => c.text.replace(/\s+/g, ' ').slice(0, 60));

describe('mysql fenced writes: round trips', () => {
  it('a fenced start and a fenced completion take at most three round trips each; a lost lease two, writing nothing', async (t) => {
    const skip = inject('mysqlUnavailable');
    if (skip) return t.skip(skip);
    const { counter, url } = await countingProxy();
    try {
      await withDatabase(async (name) => {
        await withStores(MYSQL_TEST_URL, name, (direct) => direct.migrate());
        await withStores(url, name, async (s) => {
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
          expect(start.commands.length).toBeLessThanOrEqual(3); // before: 9 (each statement its own round trip)
          expect(complete.commands.length).toBeLessThanOrEqual(3); // before: 10
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
          expect(lost.commands.length).toBeLessThanOrEqual(3);
          expect((await s.intents.get(other))?.attemptCount).toBe(0);
          const late = await s.execution.fencedCompleteAttempts(stale, [{
            intentId: id, attemptNo: 1, outcome: 'succeeded', httpStatus: 200, error: null, durationMs: 5, next: { status: 'succeeded' } }]);
          expect(late).toEqual({ kind: 'leaseLost' });
          expect((await s.intents.get(id))?.status).toBe('succeeded');
          expect((await auditRows(name)).slice(-2)).toEqual([['start_attempts', 1], ['complete_attempts', 2]]); // nothing after
        });
      });
    } finally {
      await counter.close();
    }
  });

  it('pipelined: a failing statement stops its batch (nothing after it runs) and the transaction rolls back', async (t) => {
    const skip = inject('mysqlUnavailable');
    if (skip) return t.skip(skip);
    await withDatabase(async (name) => {
      const db = openMysqlPool({ url: MYSQL_TEST_URL, max: 1, statementTimeoutMs: 10_000, database: name }); // one connection
      try {
        await db.query('CREATE TABLE t (id INT PRIMARY KEY) ENGINE=InnoDB');
        const insert = (id: number) => ({ text: 'INSERT INTO t (id) VALUES (?)', params: [id] });
        const failed = await db.pipelined((tx) => tx.commit([{ text: 'SET @after = NULL' }, insert(1), insert(1), { text: 'SET @after = 1' }, insert(2)]))
          .catch((e: unknown) => e);
        expect(failed).toMatchObject({ name: 'StoreError', kind: 'conflict' });
        // Returning without COMMIT rolls back too.
        expect(await db.pipelined(async (tx) => (await tx.send([insert(3)]))[0]!.affectedRows)).toBe(1);
        const [committed, after] = await db.pipelined((tx) => tx.commit([{ text: 'SELECT COUNT(*) AS n FROM t' }, { text: 'SELECT @after AS v' }]));
        expect(Number(committed!.rows[0]!.n)).toBe(0);
        expect(after!.rows[0]!.v).toBeNull(); // the statements after the failing one never ran (same session)
        const [inserted, read] = await db.pipelined((tx) => tx.commit([insert(4), { text: 'SELECT id FROM t' }]));
        expect([inserted!.affectedRows, read!.rows]).toEqual([1, [{ id: 4 }]]);
      } finally {
        await db.close();
      }
    });
  });

  it("a start's writes arriving late: the aborted record waits for them and closes the attempt (never sent, not charged)", async (t) => {
    const skip = inject('mysqlUnavailable');
    if (skip) return t.skip(skip);
    await withDatabase(async (name) => {
      await withStores(MYSQL_TEST_URL, name, async (s) => {
        await s.migrate();
        const token = await acquireToken(s, 'A');
        const id = (await submit(s)).intentId;
        // The start's first round trip (the intent locked), then its writes late, as a session the client gave up on.
        const late = openMysqlPool({ url: MYSQL_TEST_URL, max: 1, statementTimeoutMs: 10_000, database: name });
        const probe = open(MYSQL_TEST_URL, name);
        let thread = 0;
        let writeNow!: () => void;
        const gate = new Promise<void>((r) => (writeNow = r));
        const locked = new Promise<void>((held) => {
          void late.transaction(async (tx) => {
            thread = Number((await tx.query<{ id: number }>('SELECT CONNECTION_ID() AS id')).rows[0]!.id);
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
          const waiters = async () => Number((await probe.query<{ n: number }>(`SELECT COUNT(*) AS n FROM information_schema.INNODB_LOCK_WAITS w
            JOIN information_schema.INNODB_TRX b ON b.trx_id = w.blocking_trx_id WHERE b.trx_mysql_thread_id = ?`, [thread])).rows[0]!.n);
          // (INNODB_LOCK_WAITS is refreshed only when not read for 100 ms: polled slower.)
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
      });
    });
  });
});
