// Opens the stores for a database target: the one place that picks a dialect (each dialect's driver is loaded
// only when picked). Called by the composition root (src/app.ts), the local host and `npm run migrate`.
import type { TokenCredential } from '@azure/identity';
import type { Config, DatabaseTarget } from '../config.js';
import type { Logger } from '../observability/logger.js';
import type { PgPoolOptions } from './postgres/db.js';
import type { Stores } from './stores.js';

/** Open the stores for a database target: the one place that picks a dialect. `credential`: where Entra tokens come from (default: the managed identity AZURE_CLIENT_ID names). */
export async function openStores(target: DatabaseTarget, config: Config, logger: Logger, credential?: TokenCredential): Promise<Stores> {
  switch (target.kind) {
    case 'pglite': {
      const { openPglite } = await import('./postgres/db.js');
      const { createPostgresStores } = await import('./postgres/index.js');
      if (target.dataDir) {
        const { mkdirSync } = await import('node:fs');
        mkdirSync(target.dataDir, { recursive: true });
      }
      return createPostgresStores(await openPglite(target.dataDir), 'pglite', { dueNotices: config.executor.dueNotices });
    }
    case 'postgres':
      return openPostgresStores({ url: target.url }, config, logger);
    case 'postgresEntra': {
      const { pgEntraOptions } = await import('./postgres/entra.js');
      const tokens = await entraTokens(target.clientId, logger, credential);
      const stores = await openPostgresStores(await pgEntraOptions(target, tokens), config, logger);
      return { ...stores, close: async () => { tokens.close(); await stores.close(); } };
    }
    case 'mysqlEntra': {
      // The identity's token is the password of every new connection (src/store/mysql/entraOptions.ts).
      const { mysqlEntraPoolOptions, bindTokenPassword } = await import('./mysql/entraOptions.js');
      const { openMysqlStores } = await import('./mysql/index.js');
      const tokens = await entraTokens(target.clientId, logger, credential);
      const connection = await mysqlEntraPoolOptions(target, tokens);
      const stores = openMysqlStores({ connection, onPool: (pool) => bindTokenPassword(pool, tokens) }, config, logger);
      return { ...stores, close: async () => { tokens.close(); await stores.close(); } };
    }
    case 'mssql':
    case 'mssqlEntra': {
      const { openMssqlStores } = await import('./mssql/index.js');
      return openMssqlStores(target, config, logger);
    }
    case 'mysql': {
      const { openMysqlStores } = await import('./mysql/index.js');
      return openMysqlStores({ url: target.url }, config, logger);
    }
  }
}

/** The identity's tokens for a flexible server, the first one fetched now: a start without one fails here. */
async function entraTokens(clientId: string, logger: Logger, credential?: TokenCredential) {
  const { EntraTokenSource, managedIdentityCredential } = await import('./entraToken.js');
  const tokens = new EntraTokenSource(credential ?? (await managedIdentityCredential(clientId)), {
    onRefreshError: (e) => logger.warn({ event: 'db_token_refresh_failed', err: { message: (e as Error).message } },
      'could not refresh the database access token; the cached one is used until it expires'),
  });
  await tokens.token();
  return tokens;
}

/** A PostgreSQL server: one pool, and a connection of its own for migrations (opened only when some are missing). */
async function openPostgresStores(conn: Pick<PgPoolOptions, 'url' | 'password' | 'ssl'>, config: Config, logger: Logger): Promise<Stores> {
  const { openPgPool } = await import('./postgres/db.js');
  const { createPostgresStores } = await import('./postgres/index.js');
  const onIdleError = (e: Error) => logger.warn({ event: 'db_idle_client_error', sql_error: { message: e.message } }, 'idle database connection failed');
  const db = openPgPool(
    { ...conn, max: config.db.poolMax, statementTimeoutMs: config.db.statementTimeoutMs, applicationName: config.lease.holderId },
    onIdleError,
  );
  const openMigrationDb = async () => openPgPool({ ...conn, max: 1, statementTimeoutMs: config.db.migrationTimeoutMs,
    applicationName: `${config.lease.holderId}-migrate`.slice(0, 63) }, onIdleError);
  return createPostgresStores(db, 'postgres', { openMigrationDb, dueNotices: config.executor.dueNotices });
}
