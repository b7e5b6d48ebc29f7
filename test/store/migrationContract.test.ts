// The migration contract, on every dialect of the one list (test/support/dialects.ts; SQL Server where MSSQL_TEST_URL
// points, skipped with one line elsewhere):
// - rerun-safe: with the ledger emptied, the migrator runs every migration's body again on a migrated database
//   holding intents, attempts, leases and a pause; the schema (columns, indexes, constraints, from the catalog), every
//   row and the ledger are as they were. A migrator that dies after a migration's last statement and before its
//   ledger row runs that migration again on the next start: it must then succeed and change nothing;
// - where a migration's statements commit one by one (MySQL DDL), a migrator that died between any two of them is
//   completed by the next run;
// - concurrent migrators serialise on the dialect's lock: two started at once on an empty database both succeed,
//   each migration is applied (and recorded) once, the schema is a single migrator's; migrators started while the
//   lock is held apply nothing until it is released, then every migration once.
// The lock is PostgreSQL's transaction-scoped advisory lock on the schema, MySQL's GET_LOCK on the database, SQL
// Server's transaction-owned sp_getapplock; PGlite has one session, so migrators queue for it.
import { afterEach, beforeEach, describe, expect, it } from 'vitest';
import { dialects, itWhere, type MigrationDatabase } from '../support/dialects.js';
import { snapshot, type SchemaSnapshot } from '../support/schemaSnapshot.js';
import { acquireToken, submit } from '../support/instances.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const byId = (a: number, b: number) => a - b;

/** Rows of every kind the product writes: the partition count, intents (one with a key), attempts (one closed),
 *  the executor's lease with its events, a pause flag. */
async function arrange(db: MigrationDatabase): Promise<void> {
  const s = await db.openStores();
  try {
    await s.partitions.recordPartitionCount(1, 'migration-contract');
    const token = await acquireToken(s, 'migration-contract', 600_000);
    const intents = [];
    for (let i = 0; i < 4; i++) intents.push(await submit(s, { i }, i === 0 ? { key: 'migration-contract-key' } : {}));
    const started = await s.execution.fencedStartAttempts(token, intents.slice(0, 2).map((x) => ({ intentId: x.intentId, expectedAttemptCount: 0 })));
    if (started.kind !== 'ok' || started.value.length !== 2) throw new Error('arrange: attempts not started');
    const done = await s.execution.fencedCompleteAttempts(token, [{
      intentId: intents[0]!.intentId, attemptNo: 1, outcome: 'succeeded', httpStatus: 200, error: null, durationMs: 1, next: { status: 'succeeded' },
    }]);
    if (done.kind !== 'ok') throw new Error('arrange: completion not written');
    await s.ops.setPaused('migration-contract-paused', true, 'migration-contract', 'kept across a rerun');
  } finally {
    await s.close();
  }
}

describe.each(dialects)('migration contract: $name', (dialect) => {
  const cap = dialect.migrations;
  const ids = cap.migrations.map((m) => m.id);
  const skip = dialect.unavailable();
  const opened: MigrationDatabase[] = [];
  const fresh = async () => {
    const db = await cap.create();
    opened.push(db);
    return db;
  };
  const snap = (db: MigrationDatabase): Promise<SchemaSnapshot> => snapshot(db.sql, cap.schemaSql);
  /** What one migrator alone makes of an empty database. */
  const reference = async () => {
    const db = await fresh();
    expect(await db.migrate()).toEqual(ids);
    return snap(db);
  };

  beforeEach((t) => {
    if (skip) t.skip(skip);
  });
  afterEach(async () => {
    for (const db of opened.splice(0)) await db.drop().catch(() => {});
  });

  it('with the ledger emptied, the migrator reruns every migration on a migrated database with rows: schema, rows and ledger unchanged', async () => {
    const db = await fresh();
    expect(await db.migrate()).toEqual(ids);
    await arrange(db);
    const before = await snap(db);
    expect(before.ledger).toHaveLength(ids.length);
    expect(Object.values(before.rows).flat().length).toBeGreaterThan(10);
    await db.sql('DELETE FROM submission_manager_migrations');
    expect(await db.migrate()).toEqual(ids); // every migration's body executed again
    expect(await snap(db)).toEqual(before);
    expect(await db.migrate()).toEqual([]);
  }, 120_000);

  itWhere(cap.statementCommits)('a migrator that died between two statements of a migration: the next run completes it, as one migrator would', async () => {
    const expected = await reference();
    const db = await fresh();
    for (const { id, statements } of cap.migrations) {
      // Each run dies one statement later than the last, from the state the last one left: every crash point.
      for (let n = 1; n < statements; n++) await db.runStatements(id, n);
      expect(await db.migrate(id)).toEqual([id]);
    }
    expect(await snap(db)).toEqual(expected);
  }, 180_000);

  it('two migrators at once on an empty database both succeed; each migration applied once; the schema is one migrator\'s', async () => {
    const expected = await reference();
    const db = await fresh();
    const [a, b] = await Promise.all([db.migrate(), db.migrate()]);
    expect([...a, ...b].sort(byId)).toEqual(ids);
    const after = await snap(db);
    expect(after.ledger).toEqual(expected.ledger);
    expect(after).toEqual(expected);
  }, 120_000);

  itWhere(dialect.manySessions)('migrators started while the migration lock is held apply nothing until it is released, then each migration once', async () => {
    const expected = await reference();
    const db = await fresh();
    const lock = await db.holdMigrationLock!();
    const finished: number[][] = [];
    const runs = [db.migrate(), db.migrate()].map((p) => p.then((applied) => {
      finished.push(applied);
      return applied;
    }));
    let waiting = 0;
    for (let polls = 0; polls < 300 && waiting < 2; polls++) {
      await sleep(100);
      waiting = await lock.waiters();
    }
    try {
      expect(waiting, `migrators waiting for session ${lock.session}'s lock`).toBe(2);
      expect(finished).toEqual([]);
      expect((await snap(db)).schema).toEqual([]); // nothing created while they wait, not even the ledger
    } finally {
      await lock.release();
    }
    const out = await Promise.all(runs);
    expect(out.map((x) => x.length).sort(byId)).toEqual([0, ids.length]); // the first behind the lock did all of it
    expect(out.flat().sort(byId)).toEqual(ids);
    expect(await snap(db)).toEqual(expected);
  }, 120_000);
});
