// PostgreSQL dialect (pg server and embedded PGlite share it).
import { perPartition, type Stores } from '../stores.js';
import type { PgDatabase } from './db.js';
import { PgLeaseStore } from './leaseStore.js';
import { PgIntentStore } from './intentStore.js';
import { PgExecutionStore } from './executionStore.js';
import { PgOpsStore } from './opsStore.js';
import { PgRedriveStore } from './redriveStore.js';
import { PgInsightStore } from './insightStore.js';
import { PgPartitionStore } from './partitionStore.js';
import { PgInstanceStore } from './instanceStore.js';
import { migratePostgresIfNeeded } from './migrate.js';
import { DueNotifier, dueNotices } from './notices.js';

/** `openMigrationDb`: a dedicated connection for migrations (own timeout), opened only when some are missing. */
/** `dueNotices` (DUE_NOTICES, default true): intent writes NOTIFY and the executor may LISTEN; false sends none. */
export function createPostgresStores(db: PgDatabase, dialect: 'postgres' | 'pglite',
  opts: { openMigrationDb?: () => Promise<PgDatabase>; dueNotices?: boolean } = {}): Stores {
  const on = opts.dueNotices !== false;
  const notifier = on ? new DueNotifier(db) : null;
  const notify = () => notifier?.notify();
  const executionFor = perPartition((partition) => new PgExecutionStore(db, partition));
  return {
    dialect,
    lease: new PgLeaseStore(db),
    intents: new PgIntentStore(db, notify),
    execution: executionFor(0),
    executionFor,
    ops: new PgOpsStore(db),
    redrive: new PgRedriveStore(db, notify),
    notices: on ? dueNotices(db) : null,
    insights: new PgInsightStore(db),
    partitions: new PgPartitionStore(db),
    instances: new PgInstanceStore(db),
    migrate: () => migratePostgresIfNeeded(db, opts.openMigrationDb),
    ping: async () => {
      await db.query('SELECT 1');
    },
    close: () => db.close(),
  };
}
