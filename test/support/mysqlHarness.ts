// MySQL / MariaDB harness for the shared contract and system suites (MYSQL_TEST_URL, default the local MariaDB:
// mysql://root@127.0.0.1:3306/test). Each context is a fresh database (CREATE DATABASE t_xxx, migrated,
// dropped at close), like the PostgreSQL harness's schemas.
import { randomBytes } from 'node:crypto';
import { inject } from 'vitest';
import type { Stores } from '../../src/store/stores.js';
import type { IntentStatus } from '../../src/store/intentPorts.js';
import { openMysqlPool, type MyDatabase, type MyQueryable, type MyResult, type MyStatement } from '../../src/store/mysql/db.js';
import { holdTransaction } from './heldLock.js';
import { mysqlExamined, mysqlSeedSettledSql } from './largeTable.js';
import { createMysqlStores } from '../../src/store/mysql/index.js';
import { MysqlIntentStore } from '../../src/store/mysql/intentStore.js';
import { fencedTransaction, nextSeq, writeAudit } from '../../src/store/mysql/fence.js';
import { ATTEMPT_COLS, INTENT_COLS, NOW, toAttempt, toIntent, utcText, type AttemptDbRow, type IntentDbRow } from '../../src/store/mysql/rows.js';
import type { DialectContext, DialectHarness } from './dialects.js';
import type { PgTestDatabase } from './localHostProcess.js';
import { MYSQL_TEST_URL, positional } from './mysqlServer.js';
import { mysqlMigrations } from './migrationTargets.js';

const STATEMENT_TIMEOUT_MS = 10_000;
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const open = (max: number, database?: string, statementTimeoutMs = STATEMENT_TIMEOUT_MS) =>
  openMysqlPool({ url: MYSQL_TEST_URL, max, statementTimeoutMs, database });

async function adminQuery(text: string): Promise<void> {
  const admin = open(1);
  try {
    await admin.query(text);
  } finally {
    await admin.close().catch(() => {});
  }
}

/** A fresh database on the MySQL / MariaDB test server, for the process-level tests (the hosts migrate it). */
export async function createMysqlDatabase(): Promise<PgTestDatabase> {
  const name = `sm_proc_${randomBytes(5).toString('hex')}`;
  const admin = openMysqlPool({ url: MYSQL_TEST_URL, max: 1, statementTimeoutMs: 10_000 });
  await admin.query(`CREATE DATABASE ${name}`);
  const url = new URL(MYSQL_TEST_URL);
  url.pathname = `/${name}`;
  const db = openMysqlPool({ url: url.toString(), max: 2, statementTimeoutMs: 10_000 });
  return {
    url: url.toString(),
    sql: async (text, params) => {
      const p = positional(text, params);
      return (await db.query(p.text, p.params)).rows as never[];
    },
    async drop() {
      await db.close().catch(() => {});
      await admin.query(`DROP DATABASE IF EXISTS ${name}`).catch(() => {});
      await admin.close();
    },
  };
}

export const mysql: DialectHarness = {
  name: 'mysql',
  notices: false,
  manySessions: true,
  unavailable: () => inject('mysqlUnavailable') || null,
  migrations: mysqlMigrations,
  server: {
    create: createMysqlDatabase,
    openStores: async (url, statementTimeoutMs) => createMysqlStores(openMysqlPool({ url, max: 2, statementTimeoutMs }, () => {})),
    dbTimeSql: (secondsAgo = 0) => (secondsAgo ? `DATE_SUB(UTC_TIMESTAMP(6), INTERVAL ${secondsAgo} SECOND)` : 'UTC_TIMESTAMP(6)'),
    seedSettledSql: mysqlSeedSettledSql,
    async holdRowLock(db, table, column, keys, mode = 'exclusive') {
      const pool = openMysqlPool({ url: db.url, max: 1, statementTimeoutMs: 300_000 });
      let thread = 0;
      const release = await holdTransaction<MyQueryable>((fn) => pool.transaction(fn), async (tx) => {
        thread = Number((await tx.query<{ id: number }>('SELECT CONNECTION_ID() AS id')).rows[0]!.id);
        const r = await tx.query(`SELECT 1 AS x FROM ${table} WHERE ${column} IN (${keys.map(() => '?').join(', ')}) ${mode === 'shared' ? 'LOCK IN SHARE MODE' : 'FOR UPDATE'}`, keys);
        if (r.rows.length !== keys.length) throw new Error(`holdRowLock: ${r.rows.length} of ${keys.length} rows of ${table} found`);
      }, () => pool.close());
      // The lock waits whose blocker is the holder's transaction: MariaDB's INNODB_LOCK_WAITS, MySQL 8's
      // performance_schema.data_lock_waits (INNODB_LOCK_WAITS was removed in 8.0). (The server refreshes INNODB_TRX /
      // INNODB_LOCK_WAITS only when they were not read for 100 ms: poll slower.)
      const mariadb = /mariadb/i.test(String((await db.sql<{ v: string }>('SELECT VERSION() AS v'))[0]!.v));
      const waits = mariadb ? 'information_schema.INNODB_LOCK_WAITS w JOIN information_schema.INNODB_TRX t ON t.trx_id = w.blocking_trx_id'
        : 'performance_schema.data_lock_waits w JOIN information_schema.INNODB_TRX t ON t.trx_id = w.BLOCKING_ENGINE_TRANSACTION_ID';
      const waiters = async () => Number((await db.sql<{ n: number }>(`SELECT COUNT(*) AS n FROM ${waits}
        WHERE t.trx_mysql_thread_id = $1`, [thread]))[0]!.n);
      return { release, waiters, get session() { return thread; } };
    },
  },
  sqlFaults: {
    // Row triggers (MySQL has no statement triggers): per deleted row.
    slowDelete: (seconds) => [`CREATE TRIGGER t_slow_delete BEFORE DELETE ON submission_intents FOR EACH ROW SET @slept = SLEEP(${seconds})`],
    // SQLSTATE 42000 (MySQL reports its own error number for a SIGNAL, so no fixed code to compare).
    refuseDelete: {
      statements: [`CREATE TRIGGER t_refuse_delete BEFORE DELETE ON submission_intents FOR EACH ROW
        SIGNAL SQLSTATE '42000' SET MESSAGE_TEXT = 'permission denied: retention disabled by the test'`],
    },
  },
  async createContext(): Promise<DialectContext> {
    const dbName = `t_${randomBytes(6).toString('hex')}`; // generated, safe to inline
    await adminQuery(`CREATE DATABASE ${dbName} CHARACTER SET utf8mb4 COLLATE utf8mb4_bin`);
    const admin = open(4, dbName);
    await createMysqlStores(admin).migrate();
    const opened = new Map<Stores, MyDatabase>();
    let logged: string | null = null;
    const q = async <R>(text: string, params?: unknown[]) => (await admin.query<R>(text, params)).rows;
    return {
      name: 'mysql',
      timeTextWidth: 26,
      snapshotReads: true,
      async seedSettled(n, opts) {
        for (const text of mysqlSeedSettledSql(n, opts)) await admin.query(text);
      },
      examined: mysqlExamined(() => open(1, dbName)),
      async openStores(opts) {
        const db = open(opts?.poolMax ?? 4, dbName, opts?.statementTimeoutMs);
        const stores = createMysqlStores(db);
        opened.set(stores, db);
        return stores;
      },
      async fencedHold(stores, token, hold, onFenced) {
        const db = opened.get(stores) ?? admin;
        return fencedTransaction(db, token, 'probe', async (tx) => {
          onFenced?.();
          await hold;
          return { value: await writeAudit(tx, token, 'probe', 1), rowsWritten: 0 };
        });
      },
      async auditLog() {
        const rows = await q<{ seq: string; lease_epoch: string; action: string }>('SELECT seq, lease_epoch, action FROM submission_execution_audit ORDER BY seq');
        return rows.map((x) => ({ seq: Number(x.seq), leaseEpoch: Number(x.lease_epoch), action: x.action }));
      },
      async dbNowText() {
        return (await q<{ t: string }>(`SELECT ${utcText(NOW)} AS t`))[0]!.t;
      },
      async modifiedAtText(intentId) {
        const [r] = await q<{ m: string }>(`SELECT ${utcText('last_modified_at')} AS m FROM submission_intents WHERE intent_id = ?`, [intentId]);
        if (!r) throw new Error(`modifiedAtText: no intent ${intentId}`);
        return r.m;
      },
      async setIntentStatus(intentId, status, ageMs = 0) {
        const [r] = await q<{ n: number }>('SELECT COUNT(*) AS n FROM submission_intents WHERE intent_id = ?', [intentId]);
        if (Number(r!.n) !== 1) throw new Error(`setIntentStatus: no intent ${intentId}`);
        await admin.query('UPDATE submission_intents SET status = ?, last_modified_at = last_modified_at - INTERVAL ? MICROSECOND WHERE intent_id = ?',
          [status, ageMs * 1000, intentId]);
      },
      async countIntents(status) {
        const [r] = await q<{ n: string }>('SELECT COUNT(*) AS n FROM submission_intents WHERE ? IS NULL OR status = ?', [status ?? null, status ?? null]);
        return Number(r!.n);
      },
      async statusCounts() {
        const rows = await q<{ status: IntentStatus; n: string }>('SELECT status, COUNT(*) AS n FROM submission_intents GROUP BY status');
        return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
      },
      async intentRows() {
        const rows = await q<IntentDbRow & { last_modified_text: string }>(
          `SELECT ${INTENT_COLS}, ${utcText('last_modified_at')} AS last_modified_text FROM submission_intents ORDER BY intent_id`);
        return rows.map((r) => ({ ...toIntent(r), lastModifiedText: r.last_modified_text }));
      },
      async attemptRows() {
        return (await q<AttemptDbRow>(`SELECT ${ATTEMPT_COLS} FROM submission_attempts ORDER BY intent_id, attempt_no`)).map(toAttempt);
      },
      async insertAttempts(rows) {
        if (rows.length === 0) return;
        await admin.query(
          `INSERT INTO submission_attempts (intent_id, attempt_no, lease_epoch, holder_id, started_at, outcome) VALUES
           ${rows.map(() => `(?, ?, ?, ?, ${NOW}, ?)`).join(', ')}`,
          rows.flatMap((r) => [r.intentId, r.attemptNo, r.leaseEpoch, r.holderId, r.outcome]));
      },
      async insertIntentsOneStatement(n, contract) {
        // One INSERT … SELECT: every row gets the statement's one UTC_TIMESTAMP(6); ids are UUID() text (lower
        // case). Rows from a cross join of digits (up to 10^6; no recursion limit to meet).
        const digits = '(SELECT 0 AS d UNION ALL SELECT 1 UNION ALL SELECT 2 UNION ALL SELECT 3 UNION ALL SELECT 4 UNION ALL SELECT 5 UNION ALL SELECT 6 UNION ALL SELECT 7 UNION ALL SELECT 8 UNION ALL SELECT 9)';
        const r = await admin.query(
          `INSERT INTO submission_intents (intent_id, request_hash, contract, status, attempt_count, max_attempts,
             next_attempt_at, created_at, last_modified_at)
           SELECT UUID(), REPEAT('0', 64), ?, 'scheduled', 0, ?, ${NOW}, ${NOW}, ${NOW}
             FROM ${['a', 'b', 'c', 'd', 'e', 'f'].map((x) => `${digits} AS ${x}`).join(' CROSS JOIN ')}
            LIMIT ?`,
          [JSON.stringify(contract), contract.retry.maxAttempts, n]);
        if (r.affectedRows !== n) throw new Error(`insertIntentsOneStatement: inserted ${r.affectedRows} of ${n}`);
      },
      async expireLeases() {
        await admin.query(`UPDATE submission_manager_leases SET expires_at = DATE_SUB(${NOW}, INTERVAL 1 SECOND)`);
      },
      async stealLease(leaseName, holderId) {
        // Like tryAcquire, minus the expiry check: the FOR UPDATE waits for open fenced transactions.
        await admin.transaction(async (tx) => {
          const cur = (await tx.query<{ lease_epoch: string }>('SELECT lease_epoch FROM submission_manager_leases WHERE lease_name = ? FOR UPDATE', [leaseName])).rows[0];
          if (!cur) throw new Error(`stealLease: no lease ${leaseName}`);
          const epoch = Number(cur.lease_epoch) + 1;
          await tx.query(`UPDATE submission_manager_leases SET holder_id = ?, lease_epoch = ?, acquired_at = ${NOW}, renewed_at = ${NOW},
            expires_at = DATE_ADD(${NOW}, INTERVAL 1 HOUR) WHERE lease_name = ?`, [holderId, epoch, leaseName]);
          const seq = await nextSeq(tx);
          await tx.query(`INSERT INTO submission_manager_lease_events (seq, lease_name, lease_epoch, holder_id, event, at)
            VALUES (?, ?, ?, ?, 'acquired', ${NOW})`, [seq, leaseName, epoch, holderId]);
        });
      },
      async holdLateReschedule(intentId, holdMs) {
        const db = open(1, dbName);
        try {
          await db.transaction(async (tx) => {
            const [r] = (await tx.query<{ n: number }>('SELECT COUNT(*) AS n FROM submission_intents WHERE intent_id = ? FOR UPDATE', [intentId])).rows;
            if (Number(r!.n) !== 1) throw new Error(`holdLateReschedule: no intent ${intentId}`);
            await tx.query(`UPDATE submission_intents SET next_attempt_at = ${NOW}, last_modified_at = ${NOW} WHERE intent_id = ?`, [intentId]);
            await sleep(holdMs);
          });
        } finally {
          await db.close().catch(() => {});
        }
      },
      async lockIntentRow(intentId) {
        const db = open(1, dbName);
        return holdTransaction<MyQueryable>((fn) => db.transaction(fn), async (tx) => {
          const [r] = (await tx.query<{ n: number }>('SELECT COUNT(*) AS n FROM submission_intents WHERE intent_id = ? FOR UPDATE', [intentId])).rows;
          if (Number(r!.n) !== 1) throw new Error(`lockIntentRow: no intent ${intentId}`);
        }, () => db.close());
      },
      async lockAttemptRow(intentId, attemptNo) {
        const db = open(1, dbName);
        return holdTransaction<MyQueryable>((fn) => db.transaction(fn), async (tx) => {
          const sql = 'SELECT COUNT(*) AS n FROM submission_attempts WHERE intent_id = ? AND attempt_no = ? FOR UPDATE';
          const [r] = (await tx.query<{ n: number }>(sql, [intentId, attemptNo])).rows;
          if (Number(r!.n) !== 1) throw new Error(`lockAttemptRow: no attempt ${intentId} #${attemptNo}`);
        }, () => db.close());
      },
      async insertHeldOpen(n) {
        const db = open(1, dbName);
        let partition = -1;
        const commit = await holdTransaction<MyQueryable>((fn) => db.transaction(fn), async (tx) => {
          // The transaction's connection stands in for the pool: the store's batch runs there statement by statement,
          // so the row stays uncommitted (and the count row share-locked) until the commit.
          const held = { query: tx.query.bind(tx), batch: async (xs: MyStatement[]) => {
            const out: MyResult[] = [];
            for (const x of xs) out.push(await tx.query(x.text, x.params));
            return out;
          } };
          partition = (await new MysqlIntentStore(held as MyDatabase).insert(n)).intent.partition;
        }, () => db.close());
        return { partition, commit };
      },
      async startVersionLog(intentId) {
        // A test-only trigger records every version the row takes.
        await admin.query('CREATE TABLE t_modlog (seq INT AUTO_INCREMENT PRIMARY KEY, intent_id CHAR(36) NOT NULL, m VARCHAR(32) NOT NULL)');
        await admin.query(`CREATE TRIGGER t_modlog AFTER UPDATE ON submission_intents FOR EACH ROW
          INSERT INTO t_modlog (intent_id, m) VALUES (NEW.intent_id, ${utcText('NEW.last_modified_at')})`);
        logged = intentId;
      },
      async versionLog() {
        if (!logged) throw new Error('versionLog: startVersionLog first');
        return (await q<{ m: string }>('SELECT m FROM t_modlog WHERE intent_id = ? ORDER BY seq', [logged])).map((r) => r.m);
      },
      async sql(text, params) {
        const p = positional(text, params);
        return (await admin.query(p.text, p.params)).rows as never[];
      },
      transaction: (fn) => admin.transaction((tx) => fn(async (text, params) => {
        const p = positional(text, params);
        return (await tx.query(p.text, p.params)).rows as never[];
      })),
      async close() {
        for (const s of opened.keys()) await s.close().catch(() => {});
        await admin.close().catch(() => {});
        await adminQuery(`DROP DATABASE IF EXISTS ${dbName}`).catch(() => {});
      },
    };
  },
};
