// What is particular to the MySQL / MariaDB dialect, against the real server (the shared contract suites run on
// it too): migrations (spec column types, idempotent, concurrent migrators under GET_LOCK, a long one on its
// dedicated connection, the CLI), the pinned session (UTC, READ COMMITTED, server detected once), the refresh
// cursor's index, and the client-side deadline through a blackholing TCP proxy.
import { describe, expect, inject, it } from 'vitest';
import { dbTime, openMysqlPool, utcDate, type MyDatabase } from '../../src/store/mysql/db.js';
import { migrateMysql, migrateMysqlIfNeeded, schemaVersion } from '../../src/store/mysql/migrate.js';
import { migrations } from '../../src/store/mysql/migrations/index.js';
import { REFRESH } from '../../src/store/mysql/executionStore.js';
import { CLIENT_DEADLINE_MARGIN_MS } from '../../src/limits.js';
import { MYSQL_TEST_URL, withMysqlDatabase } from '../support/mysqlServer.js';
import { createMysqlStores } from '../../src/store/mysql/index.js';
import { fencedTransaction } from '../../src/store/mysql/fence.js';
import { splitStatements } from '../../src/store/sqlScript.js';
import { TcpProxy } from '../chaos/tcpProxy.js';

const open = (database: string | undefined, statementTimeoutMs = 10_000, max = 2, url = MYSQL_TEST_URL) =>
  openMysqlPool({ url, max, statementTimeoutMs, database });

const withDatabase = withMysqlDatabase;

async function using<T>(db: MyDatabase, fn: (db: MyDatabase) => Promise<T>): Promise<T> {
  try {
    return await fn(db);
  } finally {
    await db.close();
  }
}

/** A raw TCP proxy in front of the test server, and the server's URL through it. */
async function proxied(): Promise<{ proxy: TcpProxy; u: URL }> {
  const target = new URL(MYSQL_TEST_URL);
  const proxy = new TcpProxy(target.hostname, Number(target.port || 3306), 'raw');
  await proxy.listen();
  const u = new URL(MYSQL_TEST_URL);
  u.hostname = '127.0.0.1';
  u.port = String(proxy.port);
  return { proxy, u };
}

describe('mysql dialect', () => {
  const skip = () => inject('mysqlUnavailable');

  it('migrations: DATETIME(6) times, the spec columns NOT NULL; applied once, then a no-op', async (t) => {
    if (skip()) return t.skip(skip());
    await withDatabase((name) => using(open(name), async (db) => {
      expect((await migrateMysql(db)).applied).toEqual(migrations.map((m) => m.id));
      expect((await migrateMysql(db)).applied).toEqual([]);
      const cols = (await db.query<{ t: string; c: string; type: string; nullable: string }>(
        `SELECT table_name AS t, column_name AS c, column_type AS type, is_nullable AS nullable
           FROM information_schema.columns WHERE table_schema = DATABASE()`)).rows;
      const type = new Map(cols.map((x) => [`${x.t}.${x.c}`, `${x.type} ${x.nullable === 'NO' ? 'NOT NULL' : 'NULL'}`]));
      expect(type.get('submission_manager_leases.lease_name')).toBe('varchar(64) NOT NULL');
      expect(type.get('submission_manager_leases.holder_id')).toBe('varchar(128) NOT NULL');
      expect(type.get('submission_manager_leases.lease_epoch')).toBe('bigint(20) NOT NULL'.replace('(20)', (await db.server()).flavor === 'mysql' ? '' : '(20)'));
      for (const c of ['acquired_at', 'renewed_at', 'expires_at']) expect(type.get(`submission_manager_leases.${c}`)).toBe('datetime(6) NOT NULL');
      expect(type.get('submission_intents.last_modified_at')).toBe('datetime(6) NOT NULL');
      // Never TIMESTAMP (session-zone conversion, 2038).
      expect(cols.filter((x) => /^timestamp/.test(x.type))).toEqual([]);
    }));
  });

  it('4 concurrent migrators on a fresh database all succeed (GET_LOCK), each migration applied once', async (t) => {
    if (skip()) return t.skip(skip());
    await withDatabase(async (name) => {
      const pools = Array.from({ length: 4 }, () => open(name, 10_000, 1));
      try {
        const all = (await Promise.all(pools.map((p) => migrateMysql(p)))).flatMap((r) => r.applied);
        expect(all.sort()).toEqual(migrations.map((m) => m.id).sort());
        expect(await schemaVersion(pools[0]!)).toBe(Math.max(...migrations.map((m) => m.id)));
      } finally {
        for (const p of pools) await p.close();
      }
    });
  });

  it('a migration longer than the request timeout completes on its dedicated connection; a cold start costs one check', async (t) => {
    if (skip()) return t.skip(skip());
    await withDatabase((name) => using(open(name, 300), async (requestPool) => {
      expect(await schemaVersion(requestPool)).toBe(0);
      const slow = [...migrations, { id: 99, name: 'slow', sql: 'SELECT SLEEP(1);' }];
      await expect(migrateMysql(requestPool, slow)).rejects.toMatchObject({ kind: 'transient' }); // statement timeout
      const out = await migrateMysqlIfNeeded(requestPool, async () => open(name, 10_000, 1), slow);
      expect(out.applied).toEqual([99]); // 1 and 2 were applied before the slow one timed out
      let opened = 0;
      expect((await migrateMysqlIfNeeded(requestPool, async () => (opened++, requestPool), slow)).applied).toEqual([]);
      expect(opened).toBe(0);
    }));
  });

  it('every session is UTC and READ COMMITTED; the server is detected once; DATETIME arrives as UTC text', async (t) => {
    if (skip()) return t.skip(skip());
    const tz = process.env.TZ;
    process.env.TZ = 'Pacific/Kiritimati'; // UTC+14: a DATETIME read or sent in the local zone would be 14 h off
    await using(open(undefined), async (db) => {
      const [sent] = (await db.query<{ back: Date }>('SELECT CAST(? AS DATETIME(6)) AS back', [dbTime(new Date('2026-11-26T15:22:58.123Z'))])).rows;
      expect(sent!.back.toISOString()).toBe('2026-11-26T15:22:58.123Z');
      const [row] = (await db.query<{ tz: string; iso: string; utc: Date; text: string }>(
        `SELECT @@session.time_zone AS tz, @@session.${(await db.server()).flavor === 'mariadb' ? 'tx_isolation' : 'transaction_isolation'} AS iso,
                CAST('2026-11-26 15:22:58.123456' AS DATETIME(6)) AS utc, DATE_FORMAT(UTC_TIMESTAMP(6), '%Y-%m-%d %H:%i:%s.%f') AS text`)).rows;
      expect(row).toMatchObject({ tz: '+00:00', iso: 'READ-COMMITTED' });
      expect(row!.utc.toISOString()).toBe('2026-11-26T15:22:58.123Z');
      expect(row!.text).toMatch(/^\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{6}$/);
      expect(Math.abs(utcDate(row!.text).getTime() - Date.now())).toBeLessThan(60_000);
      expect((await db.server()).flavor).toMatch(/^(mariadb|mysql)$/);
    }).finally(() => {
      if (tz === undefined) delete process.env.TZ;
      else process.env.TZ = tz;
    });
  });

  it('the refresh cursor (p = k AND (a > x OR (a = x AND b > y))) reads a range of ix_intents_partition_modified', async (t) => {
    if (skip()) return t.skip(skip());
    await withDatabase((name) => using(open(name), async (db) => {
      await migrateMysql(db);
      // The store's own statement (its derived table reads the index; the outer ORDER BY sorts at most one page).
      const plan = (await db.query<Record<string, unknown>>(`EXPLAIN ${REFRESH}`,
        [1000, 1, '2026-01-01 00:00:00.000000', '2026-01-01 00:00:00.000000', '00000000-0000-0000-0000-000000000000', 10])).rows;
      const read = plan.find((r) => r.table === 'submission_intents')!;
      expect(read).toMatchObject({ key: 'ix_intents_partition_modified', type: 'range' });
      expect(String(read.Extra ?? '')).not.toMatch(/filesort/);
    }));
  });

  it('migration 4 (partitions) on a database with intents: they become partition 0 without a key, the count is 1; run again it changes nothing', async (t) => {
    if (skip()) return t.skip(skip());
    await withDatabase((name) => using(open(name), async (db) => {
      await migrateMysql(db, migrations.filter((m) => m.id < 4));
      for (let i = 0; i < 20; i++) {
        await db.query(`INSERT INTO submission_intents (intent_id, request_hash, contract, status, attempt_count, max_attempts,
            next_attempt_at, created_at, last_modified_at) VALUES (UUID(), REPEAT('0', 64), '{}', 'scheduled', 0, 3, UTC_TIMESTAMP(6), UTC_TIMESTAMP(6), UTC_TIMESTAMP(6))`);
      }
      expect((await migrateMysql(db, migrations.filter((m) => m.id <= 4))).applied).toEqual([4]);
      const state = async () => ({
        rows: (await db.query('SELECT partition_no AS p, partition_key AS k, COUNT(*) AS n FROM submission_intents GROUP BY 1, 2')).rows,
        count: (await db.query('SELECT partition_count AS c, recorded_by AS `by` FROM submission_manager_partition_count')).rows,
        columns: (await db.query(`SELECT column_name AS c, column_type AS t, is_nullable AS n, column_default AS d FROM information_schema.columns
          WHERE table_schema = DATABASE() AND table_name = 'submission_intents' AND column_name LIKE 'partition%' ORDER BY 1`)).rows,
        indexes: (await db.query(`SELECT index_name AS i, GROUP_CONCAT(column_name ORDER BY seq_in_index) AS cols FROM information_schema.statistics
          WHERE table_schema = DATABASE() AND table_name = 'submission_intents' AND index_name LIKE 'ix_intents_partition%' GROUP BY 1 ORDER BY 1`)).rows,
      });
      const after = await state();
      expect(after.rows.map((r) => ({ ...r, n: Number(r.n) }))).toEqual([{ p: 0, k: null, n: 20 }]);
      expect(after.count).toEqual([{ c: 1, by: 'migration' }]);
      expect(after.columns).toMatchObject([{ c: 'partition_key', t: 'varchar(128)', n: 'YES' }, { c: 'partition_no', t: 'smallint(6)'.replace('(6)', (await db.server()).flavor === 'mysql' ? '' : '(6)'), n: 'NO', d: '0' }]);
      expect(after.indexes).toEqual([]); // none yet: migration 5 brings them
      // An interrupted migration runs again in full (no transactions for DDL here): every statement is idempotent.
      await db.session(async (x) => {
        for (const stmt of splitStatements(migrations.find((m) => m.id === 4)!.sql)) await x.query(stmt);
      });
      expect(await state()).toEqual(after);
      expect((await createMysqlStores(db).partitions.recordPartitionCount(4, 'new-process')).count).toBe(1);
    }));
  });

  it('migration 5 (partition indexes) replaces the refresh, rebuild and due indexes (no twins); run again it changes nothing', async (t) => {
    if (skip()) return t.skip(skip());
    await withDatabase((name) => using(open(name), async (db) => {
      await migrateMysql(db, migrations.filter((m) => m.id < 5));
      const indexes = async () => (await db.query<{ i: string; cols: string }>(`SELECT index_name AS i, GROUP_CONCAT(column_name ORDER BY seq_in_index) AS cols
          FROM information_schema.statistics WHERE table_schema = DATABASE() AND table_name = 'submission_intents' AND index_name LIKE 'ix_intents%'
          GROUP BY 1 ORDER BY 1`)).rows;
      expect((await indexes()).map((r) => r.i)).toEqual(['ix_intents_due', 'ix_intents_modified', 'ix_intents_scheduled']);
      expect((await migrateMysql(db, migrations.filter((m) => m.id <= 5))).applied).toEqual([5]);
      const after = await indexes();
      expect(after).toEqual([
        { i: 'ix_intents_partition_modified', cols: 'partition_no,last_modified_at,intent_id' },
        { i: 'ix_intents_partition_scheduled', cols: 'partition_no,status,intent_id,next_attempt_at,attempt_count,max_attempts,last_modified_at' },
        { i: 'ix_intents_status_partition_due', cols: 'status,partition_no,next_attempt_at' },
      ]);
      await db.session(async (x) => {
        for (const stmt of splitStatements(migrations.find((m) => m.id === 5)!.sql)) await x.query(stmt);
      });
      expect(await indexes()).toEqual(after);
    }));
  });

  it('a blackholed statement fails at statement timeout + margin, its connection is destroyed, the pool recovers', async (t) => {
    if (skip()) return t.skip(skip());
    const { proxy, u } = await proxied();
    const statementMs = 400;
    await using(open(undefined, statementMs, 2, u.toString()), async (db) => {
      expect((await db.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one).toBe(1);
      const hole = proxy.blackhole(5_000, 'resume'); // longer than the deadline; no reset
      let holeEnded = false;
      void hole.then(() => (holeEnded = true));
      const t0 = Date.now();
      const err = await db.query('SELECT 2').catch((e: unknown) => e);
      const took = Date.now() - t0;
      // Ended by the client-side deadline, the one it names (statement timeout + margin), while the connection still
      // answered nothing (not TCP's minutes); never before that deadline.
      expect(err).toMatchObject({ name: 'StoreError', kind: 'transient', code: 'CLIENT_DEADLINE' });
      expect((err as Error).message).toContain(`(${statementMs + CLIENT_DEADLINE_MARGIN_MS} ms)`);
      expect(holeEnded).toBe(false);
      expect(took).toBeGreaterThanOrEqual(statementMs + CLIENT_DEADLINE_MARGIN_MS - 50);
      const txErr = await db.transaction(async (tx) => tx.query('SELECT 3')).catch((e: unknown) => e);
      expect(txErr).toMatchObject({ kind: 'transient' });
      await hole;
      expect((await db.query<{ v: number }>('SELECT 4 AS v')).rows[0]!.v).toBe(4);
    }).finally(() => proxy.close());
  });

  it('close() while a connection is still connecting through a silent network resolves once it gives up', async (t) => {
    if (skip()) return t.skip(skip());
    const { proxy, u } = await proxied();
    try {
      const hole = proxy.blackhole(4_000, 'resume'); // outlasts the connect timeout (1 s here)
      const db = open(undefined, 400, 2, u.toString());
      const q = db.query('SELECT 1').catch((e: unknown) => e); // its connection waits in the hole
      await new Promise((r) => setTimeout(r, 50));
      // Its connect times out while the pool ends: a connection that is gone, not a failure of close().
      await expect(db.close()).resolves.toBeUndefined();
      expect(await q).toMatchObject({ name: 'StoreError', kind: 'transient' });
      await hole;
    } finally {
      await proxy.close();
    }
  });

  it('npm run migrate: two processes at once against a fresh database both exit 0', async (t) => {
    if (skip()) return t.skip(skip());
    const { spawn } = await import('node:child_process');
    await withDatabase(async (name) => {
      const url = new URL(MYSQL_TEST_URL);
      url.pathname = `/${name}`;
      const run = () => new Promise<{ code: number | null; out: string }>((resolve) => {
        const p = spawn(process.execPath, ['dist/src/store/migrateCli.js'], { env: { ...process.env, DATABASE_URL: url.toString().replace(/^mysql:/, 'mariadb:') } });
        let out = '';
        p.stdout.on('data', (d) => (out += d));
        p.stderr.on('data', (d) => (out += d));
        p.on('exit', (code) => resolve({ code, out }));
      });
      const [a, b] = await Promise.all([run(), run()]);
      expect([a.code, b.code], a.out + b.out).toEqual([0, 0]);
      expect([a.out, b.out].join('\n')).toMatch(/applied migrations: 1, 2/);
    });
  });
});

describe('mysql dialect: a session left idle inside a transaction', () => {
  it('a paused leader holding the fence (S lock) cannot block a new acquire beyond the statement timeout (MariaDB idle_transaction_timeout)', async (t) => {
    const skip = inject('mysqlUnavailable');
    if (skip) return t.skip(skip);
    await withDatabase(async (name) => {
      const a = createMysqlStores(open(name, 1_000, 2));
      const b = createMysqlStores(open(name, 1_000, 2));
      try {
        const probe = open(undefined, 1_000, 1);
        const flavor = (await probe.server()).flavor;
        await probe.close();
        if (flavor !== 'mariadb') {
          return t.skip('MySQL has no idle-transaction timeout (docs/mysql.md)');
        }
        await a.migrate();
        const got = await a.lease.tryAcquire('idle', 'paused-leader', 300);
        if (!got.acquired) throw new Error('not acquired');
        const token = { leaseName: 'idle', holderId: 'paused-leader', leaseEpoch: got.lease.leaseEpoch };
        // The "paused" leader: fence taken (S lock on the lease row), then nothing is sent for 4 s.
        const pausedDb = open(name, 1_000, 1);
        let woke = false;
        const paused = fencedTransaction(pausedDb, token, 'probe',
          async (tx) => {
            await new Promise((r) => setTimeout(r, 4_000));
            woke = true;
            await tx.query('SELECT 1');
            return { value: null, rowsWritten: 0 };
          }).catch((e: unknown) => e);
        await new Promise((r) => setTimeout(r, 400)); // the lease expires meanwhile
        const t0 = Date.now();
        let acquired = false;
        while (!acquired && Date.now() - t0 < 30_000) { // a liveness guard: the order below is the check
          acquired = await b.lease.tryAcquire('idle', 'successor', 5_000).then((o) => o.acquired, () => false);
        }
        expect(acquired).toBe(true);
        // Taken while the paused leader still slept: freed by the idle timeout (1 s), not by the pause's end (4 s).
        expect(woke, `acquired after ${Date.now() - t0} ms`).toBe(false);
        expect(await paused).toMatchObject({ name: 'StoreError' }); // its session was ended: nothing of it commits
        await pausedDb.close();
      } finally {
        await a.close();
        await b.close();
      }
    });
  });
});
