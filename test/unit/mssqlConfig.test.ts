// SQL Server connection configuration, without a server: each auth mode builds the mssql config it should
// (and the tedious config mssql derives from it), and .NET-style strings are refused with a clear message.
import { describe, expect, it } from 'vitest';
import sql from 'mssql';
import tds from 'tedious';
import { ConfigError, loadConfig, type DatabaseTarget } from '../../src/config.js';
import { buildMssqlConfig } from '../../src/store/mssql/pool.js';

const opts = { poolMax: 7, statementTimeoutMs: 2_500 };
const build = (target: DatabaseTarget, o: Partial<typeof opts & { database: string }> = {}) => buildMssqlConfig(target, { ...opts, ...o });
/** What mssql hands to tedious for this config (mssql's own derivation; no connection is made). */
const tediousConfig = (c: sql.config) =>
  (new sql.ConnectionPool(c) as unknown as { _config(): { authentication: { type: string; options: Record<string, unknown> }; options: Record<string, unknown> } })._config();

describe('mssql config: SQL login (DATABASE_URL=mssql://…)', () => {
  it('parses user, password, host, port and database; encryption on; pool and timeouts from Config.db', () => {
    const c = build({ kind: 'mssql', url: 'mssql://app%40x:p%40ss%3Aw0rd@db.local:14330/submissions' });
    expect(c).toMatchObject({
      server: 'db.local', port: 14330, database: 'submissions', user: 'app@x', password: 'p@ss:w0rd',
      requestTimeout: 2_500, pool: { max: 7, min: 0 }, validateConnection: 'socket',
    });
    expect(c.authentication).toBeUndefined();
    expect(c.options).toMatchObject({ encrypt: true, trustServerCertificate: false, useUTC: true, abortTransactionOnError: true });
    const t = tediousConfig(c);
    expect(t.authentication).toEqual({ type: 'default', options: { userName: 'app@x', password: 'p@ss:w0rd' } });
    expect(t.options).toMatchObject({ encrypt: true, trustServerCertificate: false, requestTimeout: 2_500, database: 'submissions', port: 14330 });
    // tedious validates option names and types in its constructor (it does not connect until connect()).
    expect(() => new tds.Connection(t as never)).not.toThrow();
  });

  it('trusts the server certificate only when the URL says ?trustServerCertificate=true', () => {
    expect(build({ kind: 'mssql', url: 'mssql://sa:pw@localhost/master?trustServerCertificate=true' }).options?.trustServerCertificate).toBe(true);
    expect(build({ kind: 'mssql', url: 'mssql://sa:pw@localhost/master?trustServerCertificate=false' }).options?.trustServerCertificate).toBe(false);
    expect(build({ kind: 'mssql', url: 'mssql://sa:pw@localhost/master' }).options?.trustServerCertificate).toBe(false);
  });

  it('defaults the port to 1433, accepts sqlserver://, and lets a caller pick the database (tests)', () => {
    const c = build({ kind: 'mssql', url: 'sqlserver://sa:pw@localhost' }, { database: 't_abc' });
    expect(c).toMatchObject({ server: 'localhost', port: 1433, database: 't_abc' });
    expect(build({ kind: 'mssql', url: 'mssql://sa:pw@localhost' }).database).toBeUndefined();
  });

  it('refuses query parameters it would otherwise ignore (encryption cannot be turned off)', () => {
    expect(() => build({ kind: 'mssql', url: 'mssql://sa:pw@localhost/db?encrypt=false' })).toThrow(/unsupported query parameter "encrypt=false"/);
  });

  it('refuses a URL without a login, pointing at the Entra settings', () => {
    expect(() => build({ kind: 'mssql', url: 'mssql://localhost/db' })).toThrow(/needs user:password.*SQL_SERVER and SQL_DATABASE/);
  });

  it('never puts the password in an error message', () => {
    try {
      build({ kind: 'mssql', url: 'mssql://sa:Secr3t@localhost/db?bogus=1' });
      expect.unreachable();
    } catch (e) {
      expect(String(e)).not.toContain('Secr3t');
    }
  });
});

describe('mssql config: .NET-style strings are rejected', () => {
  const netStyle = [
    'Server=tcp:x.database.windows.net,1433;Database=db;Authentication=Active Directory Default',
    'mssql://x.database.windows.net/db?Authentication=Active%20Directory%20Default',
    'Server=localhost;Database=db;User Id=sa;Password=pw',
  ];
  it.each(netStyle)('buildMssqlConfig rejects %s', (url) => {
    let err: unknown;
    try {
      build({ kind: 'mssql', url });
    } catch (e) {
      err = e;
    }
    expect(err).toBeInstanceOf(ConfigError);
    expect((err as Error).message).toMatch(/not supported/);
    expect((err as Error).message).toMatch(/SQL_SERVER and SQL_DATABASE/);
  });

  it('the Authentication= form names the silent password-login fallback', () => {
    expect(() => build({ kind: 'mssql', url: netStyle[0]! })).toThrow(/Authentication=Active Directory.*silently use a password login/);
  });

  it('config.ts already refuses it in DATABASE_URL', () => {
    expect(() => loadConfig({ DATABASE_URL: netStyle[0] })).toThrow(/Authentication=Active Directory/);
  });

  it('a connection string pasted into SQL_SERVER is refused too', () => {
    expect(() => build({ kind: 'mssqlEntra', server: netStyle[0]!, database: 'db', clientId: null })).toThrow(ConfigError);
  });
});

describe('mssql config: Entra (SQL_SERVER + SQL_DATABASE [+ AZURE_CLIENT_ID])', () => {
  it('uses azure-active-directory-default with the user-assigned identity client id; encrypted, certificate verified', () => {
    const cfg = loadConfig({ SQL_SERVER: 'sm-sql.database.windows.net', SQL_DATABASE: 'submissions', AZURE_CLIENT_ID: '11111111-2222-3333-4444-555555555555' });
    expect(cfg.database.kind).toBe('mssqlEntra');
    const c = buildMssqlConfig(cfg.database, { poolMax: cfg.db.poolMax, statementTimeoutMs: cfg.db.statementTimeoutMs });
    expect(c).toMatchObject({
      server: 'sm-sql.database.windows.net', port: 1433, database: 'submissions',
      authentication: { type: 'azure-active-directory-default', options: { clientId: '11111111-2222-3333-4444-555555555555' } },
      requestTimeout: cfg.db.statementTimeoutMs, pool: { max: cfg.db.poolMax },
    });
    expect(c.user).toBeUndefined();
    expect(c.password).toBeUndefined();
    expect(c.options).toMatchObject({ encrypt: true, trustServerCertificate: false, abortTransactionOnError: true });
    const t = tediousConfig(c);
    expect(t.authentication).toEqual({ type: 'azure-active-directory-default', options: { clientId: '11111111-2222-3333-4444-555555555555' } });
    expect(() => new tds.Connection(t as never)).not.toThrow();
  });

  it('without AZURE_CLIENT_ID: DefaultAzureCredential picks the identity (no clientId option)', () => {
    const c = build({ kind: 'mssqlEntra', server: 'sm-sql.database.windows.net', database: 'db', clientId: null });
    expect(c.authentication).toEqual({ type: 'azure-active-directory-default', options: {} });
  });

  it('accepts the portal form tcp:host,port', () => {
    expect(build({ kind: 'mssqlEntra', server: 'tcp:sm-sql.database.windows.net,1444', database: 'db', clientId: null }))
      .toMatchObject({ server: 'sm-sql.database.windows.net', port: 1444 });
  });

  it('is not built for a PostgreSQL target', () => {
    expect(() => build({ kind: 'postgres', url: 'postgres://x' })).toThrow(/not SQL Server/);
  });
});
