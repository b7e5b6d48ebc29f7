// The mssql (tedious) configuration for a DatabaseTarget, and the one ConnectionPool a process opens.
// Two ways in:
//  - SQL login, for a local container:  DATABASE_URL=mssql://user:pass@host:1433/db[?trustServerCertificate=true]
//  - Entra (Azure SQL, production):     SQL_SERVER + SQL_DATABASE [+ AZURE_CLIENT_ID for a user-assigned identity]
// .NET-style strings ("Server=…;Authentication=Active Directory Default") are refused: mssql parses them
// but silently falls back to a password login, so the app would run with credentials nobody meant to use.
import sql from 'mssql';
import { ConfigError, redactUrl, type DatabaseTarget } from '../../config.js';
import { fromMssqlPool, type MssqlDatabase } from './db.js';
import { mapMssqlError } from './errors.js';
import { CLIENT_DEADLINE_MARGIN_MS } from '../../limits.js';

export interface MssqlPoolOptions {
  /** Connections in the pool (Config.db.poolMax). */
  poolMax: number;
  /** Per-request timeout (Config.db.statementTimeoutMs); bounds every writer transaction's statements. */
  statementTimeoutMs: number;
  connectTimeoutMs?: number;
  appName?: string;
  /** Connect to this database instead of the target's (tests create one database per context). */
  database?: string;
}

const NET_STYLE = /(^|;)\s*(server|data source|initial catalog|authentication|user id|uid|pwd)\s*=/i;
const ENTRA_HINT = 'for Entra authentication set SQL_SERVER and SQL_DATABASE (and AZURE_CLIENT_ID for a user-assigned identity)';

function rejectNetStyle(value: string, setting: string): void {
  if (/authentication\s*=/i.test(value)) {
    throw new ConfigError(`${setting}: .NET-style "Authentication=Active Directory …" strings are not supported ` +
      `(the mssql driver would silently use a password login instead); ${ENTRA_HINT}`);
  }
  if (NET_STYLE.test(value)) {
    throw new ConfigError(`${setting}: ADO.NET-style "Key=Value;…" connection strings are not supported; ` +
      `use mssql://user:password@host:1433/database for a SQL login, or ${ENTRA_HINT}`);
  }
}

/** Session settings every connection gets. XACT_ABORT ON (abortTransactionOnError) makes any error — and a
 *  client timeout's attention — roll back the whole transaction instead of leaving it open holding locks.
 *  The ANSI settings are the ones filtered indexes require for DML (they are tedious' defaults; pinned here). */
function sessionOptions(appName: string | undefined) {
  return {
    cancelTimeout: CLIENT_DEADLINE_MARGIN_MS,
    encrypt: true,
    useUTC: true,
    appName: appName ?? 'submission-manager',
    abortTransactionOnError: true,
    enableAnsiNull: true,
    enableAnsiPadding: true,
    enableAnsiWarnings: true,
    enableArithAbort: true,
    enableConcatNullYieldsNull: true,
    enableQuotedIdentifier: true,
    enableNumericRoundabort: false,
  };
}

function parseSqlLoginUrl(url: string): { server: string; port: number; user: string; password: string; database: string | undefined; trust: boolean } {
  rejectNetStyle(url, 'DATABASE_URL');
  let u: URL;
  try {
    u = new URL(url);
  } catch {
    throw new ConfigError(`DATABASE_URL: not a valid mssql:// URL ("${redactUrl(url)}")`);
  }
  if (u.protocol !== 'mssql:' && u.protocol !== 'sqlserver:') {
    throw new ConfigError(`DATABASE_URL: expected mssql://user:password@host:1433/database, got "${redactUrl(url)}"`);
  }
  const server = u.hostname.replace(/^\[|\]$/g, '');
  if (!server) throw new ConfigError(`DATABASE_URL: missing host in "${redactUrl(url)}"`);
  if (!u.username) {
    throw new ConfigError(`DATABASE_URL: a SQL login needs user:password in the URL ("${redactUrl(url)}"); ${ENTRA_HINT}`);
  }
  let trust = false;
  for (const [key, value] of u.searchParams) {
    if (key === 'trustServerCertificate' && (value === 'true' || value === 'false')) trust = value === 'true';
    else throw new ConfigError(`DATABASE_URL: unsupported query parameter "${key}=${value}" (only trustServerCertificate=true|false; encryption is always on)`);
  }
  const port = u.port ? Number(u.port) : 1433;
  const db = decodeURIComponent(u.pathname.replace(/^\//, ''));
  return { server, port, user: decodeURIComponent(u.username), password: decodeURIComponent(u.password), database: db || undefined, trust };
}

function parseEntraServer(server: string): { server: string; port: number } {
  rejectNetStyle(server, 'SQL_SERVER');
  // Accept the portal's "tcp:name.database.windows.net,1433" form as well as a bare host name.
  const m = /^(?:tcp:)?([^,:\s]+)(?:,(\d+))?$/i.exec(server.trim());
  if (!m) throw new ConfigError(`SQL_SERVER: expected a host name such as myserver.database.windows.net, got "${server}"`);
  return { server: m[1]!, port: m[2] ? Number(m[2]) : 1433 };
}

/** Pure: the mssql config for a target (no connection is made). Throws ConfigError for unusable input. */
export function buildMssqlConfig(target: DatabaseTarget, opts: MssqlPoolOptions): sql.config {
  const common = {
    // requestTimeout is client-side in tedious: it sends an attention and, when that is not acknowledged
    // within cancelTimeout (a blackholed or frozen connection), closes the connection. Waiting for a pooled
    // connection is bounded the same way, so no call waits longer than statement timeout + margin (+ cancel).
    requestTimeout: opts.statementTimeoutMs,
    connectionTimeout: opts.connectTimeoutMs ?? 30_000,
    pool: { max: opts.poolMax, min: 0, idleTimeoutMillis: 30_000, acquireTimeoutMillis: opts.statementTimeoutMs + CLIENT_DEADLINE_MARGIN_MS },
    // Check the socket when lending a connection instead of a SELECT 1 round trip before every request
    // (mssql's default): a connection the server closed is still caught; anything subtler surfaces as a
    // transient StoreError on the request itself.
    validateConnection: 'socket' as const,
  };
  if (target.kind === 'mssql') {
    const c = parseSqlLoginUrl(target.url);
    return {
      ...common,
      server: c.server,
      port: c.port,
      database: opts.database ?? c.database,
      user: c.user,
      password: c.password,
      options: { ...sessionOptions(opts.appName), trustServerCertificate: c.trust },
    };
  }
  if (target.kind === 'mssqlEntra') {
    const s = parseEntraServer(target.server);
    rejectNetStyle(target.database, 'SQL_DATABASE');
    return {
      ...common,
      server: s.server,
      port: s.port,
      database: opts.database ?? target.database,
      authentication: {
        type: 'azure-active-directory-default',
        options: target.clientId ? { clientId: target.clientId } : {},
      },
      options: { ...sessionOptions(opts.appName), trustServerCertificate: false },
    };
  }
  throw new ConfigError(`buildMssqlConfig: database target "${target.kind}" is not SQL Server`);
}

/**
 * Open a connection pool (the composition root calls this once per process). Idle connections that break
 * emit 'error' on the pool; without a listener the process would die, so they go to `onIdleError`.
 */
export async function openMssqlPool(
  target: DatabaseTarget,
  opts: MssqlPoolOptions,
  onIdleError?: (e: Error) => void,
): Promise<MssqlDatabase> {
  const pool = new sql.ConnectionPool(buildMssqlConfig(target, opts));
  pool.on('error', (e: Error) => onIdleError?.(e));
  try {
    await pool.connect();
  } catch (e) {
    await pool.close().catch(() => {});
    throw mapMssqlError(e);
  }
  return fromMssqlPool(pool);
}
