// MySQL / MariaDB dialect. The composition root (src/app.ts) calls openMysqlStores once per process: one
// mysql2 pool, the stores built on it.
import type { Config } from '../../config.js';
import type { Logger } from '../../observability/logger.js';
import { perPartition, type Stores } from '../stores.js';
import { openMysqlPool, type MyDatabase, type MysqlConnection } from './db.js';
import { MysqlLeaseStore } from './leaseStore.js';
import { MysqlIntentStore } from './intentStore.js';
import { MysqlExecutionStore } from './executionStore.js';
import { MysqlOpsStore } from './opsStore.js';
import { MysqlRedriveStore } from './redriveStore.js';
import { MysqlInsightStore } from './insightStore.js';
import { MysqlPartitionStore } from './partitionStore.js';
import { MysqlInstanceStore } from './instanceStore.js';
import { migrateMysqlIfNeeded } from './migrate.js';

export { openMysqlPool, type MyDatabase } from './db.js';

/** `openMigrationDb`: a dedicated connection for migrations (own timeout), opened only when some are missing. */
export function createMysqlStores(db: MyDatabase, opts: { openMigrationDb?: () => Promise<MyDatabase>; migrationLockTimeoutMs?: number } = {}): Stores {
  const executionFor = perPartition((partition) => new MysqlExecutionStore(db, partition));
  return {
    dialect: 'mysql',
    lease: new MysqlLeaseStore(db),
    intents: new MysqlIntentStore(db),
    execution: executionFor(0),
    executionFor,
    ops: new MysqlOpsStore(db),
    redrive: new MysqlRedriveStore(db),
    insights: new MysqlInsightStore(db),
    partitions: new MysqlPartitionStore(db),
    instances: new MysqlInstanceStore(db),
    // No notices on MySQL: a new intent is picked up by the leader's next refresh (≤ the interval).
    notices: null,
    migrate: () => migrateMysqlIfNeeded(db, opts.openMigrationDb, undefined, { lockTimeoutMs: opts.migrationLockTimeoutMs }),
    ping: async () => {
      await db.query('SELECT 1');
    },
    close: () => db.close(),
  };
}

/** Open the process's pool for a `mysql` target (a URL, or Entra connection options) and build the stores on it. */
export function openMysqlStores(conn: MysqlConnection, config: Config, logger: Logger): Stores {
  const onIdleError = (e: Error) => logger.warn({ event: 'db_idle_client_error', sql_error: { message: e.message } }, 'idle database connection failed');
  const db = openMysqlPool({ ...conn, max: config.db.poolMax, statementTimeoutMs: config.db.statementTimeoutMs }, onIdleError);
  // Migrations (only when the version check finds some missing) on their own connection and timeout.
  const openMigrationDb = async () => openMysqlPool({ ...conn, max: 1, statementTimeoutMs: config.db.migrationTimeoutMs }, onIdleError);
  return createMysqlStores(db, { openMigrationDb, migrationLockTimeoutMs: config.db.migrationTimeoutMs });
}
