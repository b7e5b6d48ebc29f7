// Azure Database for MySQL with Microsoft Entra authentication, for the mysql dialect's pool: the app's
// identity is the database user and an access token is its password, over verified TLS.
// Azure answers the login of an Entra user with an auth switch to mysql_clear_password; the plugin below
// answers with a valid token (awaited per connection). A server that checks the password in the first
// handshake instead reads it from the pool's connection config, which bindTokenPassword keeps current.
import type { Pool, PoolOptions } from 'mysql2';
import type { EntraDatabaseTarget } from '../../azureDatabase.js';
import type { EntraTokenSource } from '../entraToken.js';

/** mysql2 pool options for the target. Awaits the first token, so the pool's first connection has one. */
export async function mysqlEntraPoolOptions(target: Omit<EntraDatabaseTarget, 'kind' | 'clientId'>, tokens: EntraTokenSource): Promise<PoolOptions> {
  await tokens.token();
  return {
    host: target.host,
    port: target.port,
    user: target.user,
    database: target.database,
    ssl: { minVersion: 'TLSv1.2', rejectUnauthorized: true }, // a token is a bearer credential
    authPlugins: { mysql_clear_password: () => async () => Buffer.from(`${await tokens.token()}\0`) },
  };
}

/** The pool's new connections read `password` from its shared connection config (mysql2 copies it, getters
 *  included, per connection): make it the source's current token, refreshed in the background before expiry. */
export function bindTokenPassword(pool: Pool | { pool: Pool }, tokens: EntraTokenSource): void {
  const core = 'pool' in pool ? pool.pool : pool; // mysql2/promise wraps the callback pool
  const config = (core as unknown as { config: { connectionConfig: object } }).config.connectionConfig;
  Object.defineProperty(config, 'password', { get: () => tokens.current() ?? undefined, enumerable: true, configurable: true });
}
