// The session every MySQL / MariaDB connection of ours runs in, and how we connect: the pinned settings (UTC,
// strict sql_mode, READ COMMITTED, lock and statement timeouts), the server's flavour, the URL's connection options,
// and the type cast that keeps DATETIME away from JS Dates in the local zone (text in, UTC text out).
import type mysql from 'mysql2/promise';
import type { TypeCastField, TypeCastNext } from 'mysql2/promise';

export interface MysqlServer {
  flavor: 'mariadb' | 'mysql';
  /** VERSION() as the server reports it, e.g. `10.11.19-MariaDB-0+deb12u1`, `8.0.39`. */
  version: string;
}

/** Session sql_mode: strict, and without NO_BACKSLASH_ESCAPES / ANSI_QUOTES, which mysql2's escaping relies on. */
const SQL_MODE = 'ONLY_FULL_GROUP_BY,STRICT_TRANS_TABLES,NO_ZERO_IN_DATE,NO_ZERO_DATE,ERROR_FOR_DIVISION_BY_ZERO,NO_ENGINE_SUBSTITUTION';

/** 'YYYY-MM-DD hh:mm:ss[.ffffff]' (database text, UTC) → Date (milliseconds; sub-millisecond digits dropped). */
export function utcDate(text: string): Date {
  const d = new Date(`${text.slice(0, 23).replace(' ', 'T')}Z`);
  if (Number.isNaN(d.getTime())) throw new Error(`not a database time: ${text}`);
  return d;
}

/** A Date as DATETIME(6) text in UTC, for parameters (never the driver's own Date formatting). */
export const dbTime = (d: Date): string => d.toISOString().slice(0, 23).replace('T', ' ');
export const dbTimeOrNull = (d: Date | null | undefined): string | null => (d ? dbTime(d) : null);

/** DATETIME/TIMESTAMP → Date (UTC text parsed by us); BOOLEAN (TINYINT(1)) → boolean; the rest as mysql2 does. */
export function typeCast(field: TypeCastField, next: TypeCastNext): unknown {
  if (field.type === 'DATETIME' || field.type === 'TIMESTAMP') {
    const text = field.string();
    return text === null ? null : utcDate(text);
  }
  if (field.type === 'TINY' && field.length === 1) {
    const text = field.string();
    return text === null ? null : text !== '0';
  }
  return next();
}

/** Connection settings from a mysql:// or mariadb:// URL: `?ssl=true|false` (default: on unless the host is local). */
export function connectionConfig(url: string, database?: string): mysql.PoolOptions {
  const u = new URL(url);
  const local = ['127.0.0.1', 'localhost', '::1', '[::1]'].includes(u.hostname);
  const ssl = u.searchParams.get('ssl');
  const tls = ssl === null ? !local : ssl === 'true' || ssl === '1';
  return {
    host: u.hostname.replace(/^\[|\]$/g, ''),
    port: u.port ? Number(u.port) : 3306,
    user: decodeURIComponent(u.username),
    password: decodeURIComponent(u.password),
    database: database ?? (decodeURIComponent(u.pathname.replace(/^\//, '')) || undefined),
    ...(tls ? { ssl: { rejectUnauthorized: true } } : {}),
  };
}

/** The session settings. The statement timeout bounds each statement; on MariaDB, idle_transaction_timeout (as
 *  PostgreSQL's idle_in_transaction_session_timeout) ends a session left idle inside a transaction — a paused or
 *  cut-off leader holding the lease row's S lock — so an acquire waits at most that long. MySQL has no such
 *  setting (docs/mysql.md). */
export function sessionInit(server: MysqlServer, statementTimeoutMs: number): string[] {
  const seconds = Math.max(1, Math.ceil(statementTimeoutMs / 1000));
  const timeout = server.flavor === 'mariadb'
    ? `max_statement_time = ${statementTimeoutMs / 1000}, idle_transaction_timeout = ${seconds}`
    : `max_execution_time = ${Math.round(statementTimeoutMs)}`;
  return [
    `SET time_zone = '+00:00', sql_mode = '${SQL_MODE}', innodb_lock_wait_timeout = ${seconds}, ${timeout}`,
    'SET SESSION TRANSACTION ISOLATION LEVEL READ COMMITTED',
  ];
}

export function parseServer(version: string): MysqlServer {
  return { flavor: /mariadb/i.test(version) ? 'mariadb' : 'mysql', version };
}
