// SQL Server / Azure SQL dialect. The composition root opens one pool per process (openMssqlPool) and
// builds the stores on it.
import type { Stores } from '../stores.js';
import type { MssqlDatabase } from './db.js';
import { MssqlLeaseStore } from './leaseStore.js';
import { MssqlIntentStore } from './intentStore.js';
import { MssqlExecutionStore } from './executionStore.js';
import { migrateMssql } from './migrate.js';

export { buildMssqlConfig, openMssqlPool, type MssqlPoolOptions } from './pool.js';
export { fromMssqlPool, type MssqlDatabase } from './db.js';

export function createMssqlStores(db: MssqlDatabase): Stores {
  return {
    dialect: 'mssql',
    lease: new MssqlLeaseStore(db),
    intents: new MssqlIntentStore(db),
    execution: new MssqlExecutionStore(db),
    migrate: () => migrateMssql(db),
    ping: async () => {
      await db.run({ text: 'SELECT 1 AS ok;', params: [] });
    },
    close: () => db.close(),
  };
}
