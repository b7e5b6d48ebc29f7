// PostgreSQL dialect (pg server and embedded PGlite share it).
import type { Stores } from '../stores.js';
import type { PgDatabase } from './db.js';
import { PgLeaseStore } from './leaseStore.js';
import { PgIntentStore } from './intentStore.js';
import { PgExecutionStore } from './executionStore.js';
import { PgOpsStore } from './opsStore.js';
import { PgRedriveStore } from './redriveStore.js';
import { PgInsightStore } from './insightStore.js';
import { migratePostgres } from './migrate.js';

export function createPostgresStores(db: PgDatabase, dialect: 'postgres' | 'pglite'): Stores {
  return {
    dialect,
    lease: new PgLeaseStore(db),
    intents: new PgIntentStore(db),
    execution: new PgExecutionStore(db),
    ops: new PgOpsStore(db),
    redrive: new PgRedriveStore(db),
    insights: new PgInsightStore(db),
    migrate: () => migratePostgres(db),
    ping: async () => {
      await db.query('SELECT 1');
    },
    close: () => db.close(),
  };
}
