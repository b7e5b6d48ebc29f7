// SQL Server / Azure SQL dialect. The composition root (src/app.ts) calls openMssqlStores once per process:
// one ConnectionPool, the stores built on it.
import type { Config, DatabaseTarget } from '../../config.js';
import { sqlErrorField, type Logger } from '../../observability/logger.js';
import { perPartition, type Stores } from '../stores.js';
import type { MssqlDatabase } from './db.js';
import { openMssqlPool } from './pool.js';
import { MssqlLeaseStore } from './leaseStore.js';
import { MssqlIntentStore } from './intentStore.js';
import { MssqlExecutionStore } from './executionStore.js';
import { MssqlOpsStore } from './opsStore.js';
import { MssqlRedriveStore } from './redriveStore.js';
import { MssqlInsightStore } from './insightStore.js';
import { MssqlPartitionStore } from './partitionStore.js';
import { MssqlInstanceStore } from './instanceStore.js';
import { migrateMssqlIfNeeded } from './migrate.js';
import { warnIfRcsiOff } from './rcsi.js';

export { buildMssqlConfig, openMssqlPool, type MssqlPoolOptions } from './pool.js';
export { fromMssqlPool, type MssqlDatabase } from './db.js';

/** `openMigrationDb`: a dedicated connection for migrations (own timeout), opened only when some are missing. */
export function createMssqlStores(db: MssqlDatabase, opts: { openMigrationDb?: () => Promise<MssqlDatabase>; migrationLockTimeoutMs?: number } = {}): Stores {
  const executionFor = perPartition((partition) => new MssqlExecutionStore(db, partition));
  return {
    dialect: 'mssql',
    lease: new MssqlLeaseStore(db),
    intents: new MssqlIntentStore(db),
    execution: executionFor(0),
    executionFor,
    ops: new MssqlOpsStore(db),
    redrive: new MssqlRedriveStore(db),
    insights: new MssqlInsightStore(db),
    partitions: new MssqlPartitionStore(db),
    instances: new MssqlInstanceStore(db),
    // No LISTEN/NOTIFY on SQL Server: a new intent is picked up by the leader's next refresh (≤ the interval).
    notices: null,
    migrate: () => migrateMssqlIfNeeded(db, opts.openMigrationDb, undefined, { lockTimeoutMs: opts.migrationLockTimeoutMs }),
    ping: async () => {
      await db.run({ text: 'SELECT 1 AS ok;', params: [] });
    },
    close: () => db.close(),
  };
}

/** Open the process's pool for an `mssql` / `mssqlEntra` target and build the stores on it. */
export async function openMssqlStores(target: DatabaseTarget, config: Config, logger: Logger): Promise<Stores> {
  const onIdleError = (e: Error) => logger.warn({ event: 'db_idle_client_error', sql_error: sqlErrorField(e) }, 'idle database connection failed');
  const db = await openMssqlPool(
    target,
    { poolMax: config.db.poolMax, statementTimeoutMs: config.db.statementTimeoutMs, appName: config.lease.holderId },
    onIdleError,
  );
  // Migrations (only when the version check finds some missing) on their own connection and timeout.
  const openMigrationDb = () => openMssqlPool(target,
    { poolMax: 1, statementTimeoutMs: config.db.migrationTimeoutMs, appName: `${config.lease.holderId}-migrate` }, onIdleError);
  await warnIfRcsiOff(db, logger);
  return createMssqlStores(db, { openMigrationDb, migrationLockTimeoutMs: config.db.migrationTimeoutMs });
}
