// SQL Server harness for the shared contract suites, where test/support/mssqlServer.ts says (MSSQL_TEST_URL, or
// MSSQL_TEST_SERVER + MSSQL_TEST_DATABASE for Entra; unset → the suite is skipped with one line, the only suite
// allowed to skip; set but unreachable → it fails).
// Each context is a fresh database (CREATE DATABASE t_xxx, migrated, dropped at close). By default the
// database runs READ_COMMITTED_SNAPSHOT ON like Azure SQL; MSSQL_TEST_RCSI=off keeps SQL Server's default.
import { randomBytes } from 'node:crypto';
import type { Stores } from '../../src/store/stores.js';
import { createMssqlStores, type MssqlDatabase } from '../../src/store/mssql/index.js';
import type { MssqlRunner } from '../../src/store/mssql/db.js';
import { MssqlIntentStore } from '../../src/store/mssql/intentStore.js';
import { holdTransaction } from './heldLock.js';
import { fencedTransaction } from '../../src/store/mssql/fence.js';
import { BIN2, p, type SqlQuery } from '../../src/store/mssql/params.js';
import {
  ATTEMPT_COLS, intentCols, modifiedText, toAttempt, toIntent, type AttemptDbRow, type IntentDbRow,
} from '../../src/store/mssql/rows.js';
import type { IntentStatus } from '../../src/store/intentPorts.js';
import type { DialectContext, DialectHarness } from './dialects.js';
import { adminBatch, dropTestDatabase, mssqlRcsi, mssqlUnavailable, open, rawSql, testTarget } from './mssqlServer.js';
import { mssqlMigrations } from './migrationTargets.js';
import { mssqlServerCapability } from './mssqlProcessServer.js';

/** The last result set of a typed query (its answer; statements before it run with NOCOUNT ON). */
async function lastSet<R>(db: MssqlDatabase | MssqlRunner, q: SqlQuery): Promise<R[]> {
  const sets = await db.run<R>(q);
  return sets[sets.length - 1] ?? [];
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

export const mssql: DialectHarness = {
  name: 'mssql',
  notices: false,
  manySessions: true,
  unavailable: mssqlUnavailable,
  migrations: mssqlMigrations,
  server: mssqlServerCapability,
  // No slowDelete: a purge's slice is capped here by SET LOCK_TIMEOUT (lock waits only), so a trigger's WAITFOR would
  // not be cut off at the slice as the suites that use it expect. An AFTER trigger fires for every DELETE statement
  // (none of the dialect's deletes on this table carries an OUTPUT clause, which a trigger would refuse: error 334).
  sqlFaults: {
    refuseDelete: {
      statements: [`CREATE TRIGGER t_refuse_delete ON submission_intents AFTER DELETE AS
BEGIN
  SET NOCOUNT ON;
  THROW 50000, 'permission denied: retention disabled by the test', 1;
END;`],
      code: '50000',
    },
  },
  async createContext(): Promise<DialectContext> {
    const target = testTarget();
    if (!target) throw new Error('SQL Server not configured');
    const dbName = `t_${randomBytes(6).toString('hex')}`; // generated, safe to inline
    const rcsi = mssqlRcsi();
    await adminBatch(target, `CREATE DATABASE [${dbName}];`);
    let admin: MssqlDatabase | null = null;
    try {
      if (rcsi) await adminBatch(target, `ALTER DATABASE [${dbName}] SET READ_COMMITTED_SNAPSHOT ON;`);
      admin = await open(target, 4, dbName);
      await createMssqlStores(admin).migrate();
    } catch (e) {
      // Nothing will call close(): drop the database here, or every failed setup leaves one behind.
      await admin?.close().catch(() => {});
      await dropTestDatabase(target, dbName);
      throw e;
    }
    const opened = new Map<Stores, MssqlDatabase>();
    let logged: { intentId: string; start: string } | null = null;
    const modifiedAtText = async (intentId: string) => {
      const [r] = await lastSet<{ m: string }>(admin, {
        text: `SELECT ${modifiedText('last_modified_at')} AS m FROM submission_intents WHERE intent_id = @intent_id;`,
        params: [p.uuid('intent_id', intentId)],
      });
      if (!r) throw new Error(`modifiedAtText: no intent ${intentId}`);
      return r.m;
    };
    return {
      name: 'mssql',
      timeTextWidth: 27,
      snapshotReads: rcsi,
      async openStores(opts) {
        const db = await open(target, opts?.poolMax ?? 4, dbName);
        const stores = createMssqlStores(db);
        opened.set(stores, db);
        return stores;
      },
      async fencedHold(stores, token, hold, onFenced) {
        const db = opened.get(stores) ?? admin;
        return fencedTransaction(db, token, 'probe', async (tx) => {
          onFenced?.();
          await hold;
          const [rows = []] = await tx.run<{ seq: string }>({
            text: `INSERT INTO submission_execution_audit (lease_name, lease_epoch, holder_id, [action], rows_written, [at])
OUTPUT inserted.seq VALUES (@lease_name, @lease_epoch, @holder_id, 'probe', 1, SYSUTCDATETIME());`,
            params: [p.varchar('lease_name', 64, token.leaseName), p.bigint('lease_epoch', token.leaseEpoch),
              p.varchar('holder_id', 128, token.holderId)],
          });
          return { value: Number(rows[0]!.seq), rowsWritten: 0 };
        });
      },
      async auditLog() {
        const rows = await rawSql<{ seq: string; lease_epoch: string; action: string }>(admin,
          'SELECT seq, lease_epoch, [action] AS action FROM submission_execution_audit ORDER BY seq;');
        return rows.map((x) => ({ seq: Number(x.seq), leaseEpoch: Number(x.lease_epoch), action: x.action }));
      },
      async dbNowText() {
        return (await lastSet<{ t: string }>(admin, { text: `SELECT ${modifiedText('SYSUTCDATETIME()')} AS t;`, params: [] }))[0]!.t;
      },
      modifiedAtText,
      async setIntentStatus(intentId, status, ageMs = 0) {
        const [r] = await lastSet<{ n: number }>(admin, {
          text: `SET NOCOUNT ON;
UPDATE submission_intents SET status = @status, last_modified_at = DATEADD(millisecond, -@age_ms, last_modified_at) WHERE intent_id = @intent_id;
SELECT @@ROWCOUNT AS n;`,
          params: [p.uuid('intent_id', intentId), p.varchar('status', 16, status), p.int('age_ms', ageMs)],
        });
        if (Number(r?.n) !== 1) throw new Error(`setIntentStatus: no intent ${intentId}`);
      },
      async countIntents(status) {
        const [r] = await lastSet<{ n: string | number }>(admin, {
          text: 'SELECT COUNT_BIG(*) AS n FROM submission_intents WHERE @status IS NULL OR status = @status;',
          params: [p.varchar('status', 16, status ?? null)],
        });
        return Number(r!.n);
      },
      async statusCounts() {
        const rows = await lastSet<{ status: IntentStatus; n: string | number }>(admin, {
          text: 'SELECT status, COUNT_BIG(*) AS n FROM submission_intents GROUP BY status;', params: [],
        });
        return Object.fromEntries(rows.map((r) => [r.status, Number(r.n)]));
      },
      async intentRows() {
        const rows = await lastSet<IntentDbRow & { last_modified_text: string }>(admin, {
          text: `SELECT ${intentCols()}, ${modifiedText('last_modified_at')} AS last_modified_text
  FROM submission_intents ORDER BY intent_id;`,
          params: [],
        });
        return rows.map((r) => ({ ...toIntent(r), lastModifiedText: r.last_modified_text }));
      },
      async attemptRows() {
        const rows = await lastSet<AttemptDbRow>(admin, {
          text: `SELECT ${ATTEMPT_COLS} FROM submission_attempts ORDER BY intent_id, attempt_no;`, params: [],
        });
        return rows.map(toAttempt);
      },
      async insertAttempts(rows) {
        if (rows.length === 0) return;
        await admin.run({
          text: `INSERT INTO submission_attempts (intent_id, attempt_no, lease_epoch, holder_id, started_at, outcome) VALUES
${rows.map((_, i) => `(@intent_id_${i}, @attempt_no_${i}, @lease_epoch_${i}, @holder_id_${i}, SYSUTCDATETIME(), @outcome_${i})`).join(',\n')};`,
          params: rows.flatMap((r, i) => [
            p.uuid(`intent_id_${i}`, r.intentId), p.int(`attempt_no_${i}`, r.attemptNo), p.bigint(`lease_epoch_${i}`, r.leaseEpoch),
            p.varchar(`holder_id_${i}`, 128, r.holderId), p.varchar(`outcome_${i}`, 16, r.outcome),
          ]),
        });
      },
      async insertIntentsOneStatement(n, contract) {
        // One INSERT … SELECT: every row gets the same @now; ids are random lower-case UUID text (as PostgreSQL prints uuid).
        const [r] = await lastSet<{ n: number }>(admin, {
          text: `SET NOCOUNT ON;
DECLARE @now datetime2(7) = SYSUTCDATETIME();
INSERT INTO submission_intents (intent_id, request_hash, contract, status, attempt_count, max_attempts,
  next_attempt_at, created_at, last_modified_at)
SELECT LOWER(CONVERT(char(36), NEWID())), REPLICATE('0', 64), @contract, 'scheduled', 0, @max_attempts, @now, @now, @now
  FROM (SELECT TOP (@n) 1 AS x FROM sys.all_columns AS a CROSS JOIN sys.all_columns AS b) AS g;
SELECT @@ROWCOUNT AS n;`,
          params: [p.int('n', n), p.nvarcharMax('contract', JSON.stringify(contract)), p.int('max_attempts', contract.retry.maxAttempts)],
        });
        if (Number(r?.n) !== n) throw new Error(`insertIntentsOneStatement: inserted ${r?.n} of ${n}`);
      },
      async expireLeases() {
        await admin.run({ text: 'UPDATE submission_manager_leases SET expires_at = DATEADD(second, -1, SYSUTCDATETIME());', params: [] });
      },
      async stealLease(leaseName, holderId) {
        // Like tryAcquire, minus the expiry check: the UPDATE's X lock waits for open fenced transactions.
        const [r] = await lastSet<{ stolen: number }>(admin, {
          text: `SET XACT_ABORT ON;
SET NOCOUNT ON;
DECLARE @now datetime2(7);
DECLARE @s TABLE (lease_name varchar(64) COLLATE ${BIN2} NOT NULL, lease_epoch bigint NOT NULL,
  holder_id varchar(128) COLLATE ${BIN2} NOT NULL, acquired_at datetime2(7) NOT NULL);
BEGIN TRANSACTION;
SET @now = SYSUTCDATETIME();
UPDATE submission_manager_leases
   SET holder_id = @holder_id, lease_epoch = lease_epoch + 1, acquired_at = @now, renewed_at = @now,
       expires_at = DATEADD(hour, 1, @now)
OUTPUT inserted.lease_name, inserted.lease_epoch, inserted.holder_id, inserted.acquired_at INTO @s
 WHERE lease_name = @lease_name;
INSERT INTO submission_manager_lease_events (lease_name, lease_epoch, holder_id, [event], [at])
SELECT lease_name, lease_epoch, holder_id, 'acquired', acquired_at FROM @s;
COMMIT TRANSACTION;
SELECT COUNT(*) AS stolen FROM @s;`,
          params: [p.varchar('lease_name', 64, leaseName), p.varchar('holder_id', 128, holderId)],
        });
        if (Number(r?.stolen) !== 1) throw new Error(`stealLease: no lease ${leaseName}`);
      },
      async lockIntentRow(intentId) {
        // A U lock held to commit on a pool of its own (one connection), as FOR UPDATE: writers and locking readers
        // (UPDLOCK) wait, plain reads do not.
        const db = await open(target, 1, dbName);
        return holdTransaction<MssqlRunner>((fn) => db.transaction(fn), async (tx) => {
          const rows = await lastSet<{ intent_id: string }>(tx, {
            text: 'SELECT intent_id FROM submission_intents WITH (UPDLOCK, HOLDLOCK, ROWLOCK) WHERE intent_id = @intent_id;',
            params: [p.uuid('intent_id', intentId)],
          });
          if (rows.length !== 1) throw new Error(`lockIntentRow: no intent ${intentId}`);
        }, () => db.close());
      },
      async lockAttemptRow(intentId, attemptNo) {
        // A U key lock held to commit (UPDLOCK keeps it to the end): the purge's DELETE waits for it. The full key and
        // no HOLDLOCK: one key, no range lock that would also stall other intents' attempt inserts.
        const db = await open(target, 1, dbName);
        return holdTransaction<MssqlRunner>((fn) => db.transaction(fn), async (tx) => {
          const rows = await lastSet<{ n: number }>(tx, {
            text: 'SELECT attempt_no AS n FROM submission_attempts WITH (UPDLOCK, ROWLOCK) WHERE intent_id = @intent_id AND attempt_no = @attempt_no;',
            params: [p.uuid('intent_id', intentId), p.int('attempt_no', attemptNo)],
          });
          if (rows.length !== 1) throw new Error(`lockAttemptRow: no attempt ${intentId} #${attemptNo}`);
        }, () => db.close());
      },
      async insertHeldOpen(n) {
        // Its own pool (one connection); the insert's own BEGIN/COMMIT nest inside this transaction (locks held).
        const db = await open(target, 1, dbName);
        let partition = -1;
        const commit = await holdTransaction<MssqlRunner>((fn) => db.transaction(fn), async (tx) => {
          partition = (await new MssqlIntentStore(tx).insert(n)).intent.partition;
        }, () => db.close());
        return { partition, commit };
      },
      async holdLateReschedule(intentId, holdMs) {
        // Its own pool (one connection), so the open transaction never borrows a connection the test needs.
        const db = await open(target, 1, dbName);
        try {
          await db.transaction(async (tx) => {
            const [r] = await lastSet<{ n: number }>(tx, {
              text: `SET NOCOUNT ON;
UPDATE submission_intents SET next_attempt_at = SYSUTCDATETIME(), last_modified_at = SYSUTCDATETIME()
 WHERE intent_id = @intent_id;
SELECT @@ROWCOUNT AS n;`,
              params: [p.uuid('intent_id', intentId)],
            });
            if (Number(r?.n) !== 1) throw new Error(`holdLateReschedule: no intent ${intentId}`);
            await sleep(holdMs);
          });
        } finally {
          await db.close().catch(() => {});
        }
      },
      async startVersionLog(intentId) {
        // No trigger: SQL Server rejects an OUTPUT clause without INTO (the store's cancel/reschedule) on a table
        // with an enabled UPDATE trigger (error 334). System versioning records every version without one: each
        // UPDATE writes the superseded row to the history table, its period ending when the next version began.
        await admin.runBatch(`ALTER TABLE submission_intents ADD
  t_valid_from datetime2(7) GENERATED ALWAYS AS ROW START HIDDEN
    CONSTRAINT df_t_valid_from DEFAULT DATEADD(second, -1, SYSUTCDATETIME()),
  t_valid_to datetime2(7) GENERATED ALWAYS AS ROW END HIDDEN
    CONSTRAINT df_t_valid_to DEFAULT CONVERT(datetime2(7), '9999-12-31 23:59:59.9999999'),
  PERIOD FOR SYSTEM_TIME (t_valid_from, t_valid_to);`);
        await admin.runBatch(`DECLARE @ddl nvarchar(max) = N'ALTER TABLE submission_intents SET (SYSTEM_VERSIONING = ON (HISTORY_TABLE = '
  + QUOTENAME(OBJECT_SCHEMA_NAME(OBJECT_ID(N'submission_intents'))) + N'.t_intents_history));';
EXEC sp_executesql @ddl;`);
        logged = { intentId, start: await modifiedAtText(intentId) };
      },
      async versionLog() {
        if (!logged) throw new Error('versionLog: startVersionLog first');
        // Versions in the order they were current: by period (end, then start); the live row ends in 9999.
        const rows = await lastSet<{ m: string }>(admin, {
          text: `SELECT m FROM (
  SELECT ${modifiedText('last_modified_at')} AS m, t_valid_from, t_valid_to FROM t_intents_history WHERE intent_id = @intent_id
  UNION ALL
  SELECT ${modifiedText('last_modified_at')}, t_valid_from, t_valid_to FROM submission_intents WHERE intent_id = @intent_id
) AS v ORDER BY t_valid_to, t_valid_from;`,
          params: [p.uuid('intent_id', logged.intentId)],
        });
        const versions = rows.map((r) => r.m);
        // The first is the version the row had when logging started; every later one is an UPDATE's.
        if (versions[0] !== logged.start) throw new Error(`versionLog: first version ${versions[0]} is not the start ${logged.start}`);
        return versions.slice(1);
      },
      sql: (text, params) => rawSql(admin, text, params),
      async close() {
        for (const s of opened.keys()) await s.close().catch(() => {});
        await admin.close().catch(() => {});
        await dropTestDatabase(target, dbName);
      },
    };
  },
};
