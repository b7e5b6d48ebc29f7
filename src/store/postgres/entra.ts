// Azure Database for PostgreSQL with Microsoft Entra authentication: the app's identity is the database user
// and an access token is its password, asked for by each new connection (pg takes a password function).
import type { EntraDatabaseTarget } from '../../azureDatabase.js';
import type { EntraTokenSource } from '../entraToken.js';
import type { PgPoolOptions } from './db.js';

/** Connection settings for the target: TLS 1.2+ with the server certificate verified (a token is a bearer
 *  credential), the token source as the password. Awaits the first token, so no connection waits on Entra. */
export async function pgEntraOptions(target: EntraDatabaseTarget, tokens: EntraTokenSource): Promise<Pick<PgPoolOptions, 'url' | 'password' | 'ssl'>> {
  await tokens.token();
  const url = new URL('postgres://placeholder');
  url.hostname = target.host;
  url.port = String(target.port);
  url.username = encodeURIComponent(target.user);
  url.pathname = `/${encodeURIComponent(target.database)}`;
  return { url: url.toString(), password: () => tokens.token(), ssl: { rejectUnauthorized: true, minVersion: 'TLSv1.2' } };
}
