// The Azure database settings (DATABASE_ENGINE + DATABASE_HOST/NAME/USER + AZURE_CLIENT_ID, or SQL_SERVER +
// SQL_DATABASE) through loadConfig, and the token cache that turns the identity into database passwords.
import { describe, expect, it } from 'vitest';
import type { AccessToken, TokenCredential } from '@azure/identity';
import { ConfigError, loadConfig } from '../../src/config.js';
import { EntraTokenSource } from '../../src/store/entraToken.js';

const CLIENT_ID = '00000000-0000-4000-8000-000000000002';
const flexible = (engine: string, extra: Record<string, string> = {}) => ({
  DATABASE_ENGINE: engine, DATABASE_HOST: 'psql-x.postgres.database.azure.com', DATABASE_NAME: 'submissionmanager',
  DATABASE_USER: 'id-api-x', AZURE_CLIENT_ID: CLIENT_ID, ...extra,
});

describe('config: DATABASE_ENGINE', () => {
  it.each([
    ['postgresql', 'postgresEntra', 5432],
    ['mysql', 'mysqlEntra', 3306],
  ])('%s: host, database, user and client id make an Entra target on the engine\'s port', (engine, kind, port) => {
    expect(loadConfig(flexible(engine)).database).toEqual({
      kind, host: 'psql-x.postgres.database.azure.com', port, database: 'submissionmanager', user: 'id-api-x', clientId: CLIENT_ID,
    });
    expect(loadConfig(flexible(engine, { DATABASE_HOST: '127.0.0.1:6543' })).database).toMatchObject({ host: '127.0.0.1', port: 6543 });
  });

  it('sqlserver (or unset) keeps SQL_SERVER + SQL_DATABASE, as deployed today', () => {
    const sql = { SQL_SERVER: 's.database.windows.net', SQL_DATABASE: 'sm', AZURE_CLIENT_ID: CLIENT_ID };
    const expected = { kind: 'mssqlEntra', server: 's.database.windows.net', database: 'sm', clientId: CLIENT_ID };
    expect(loadConfig({ ...sql, DATABASE_ENGINE: 'sqlserver' }).database).toEqual(expected);
    expect(loadConfig(sql).database).toEqual(expected);
  });

  it.each([
    ['an unknown engine', { DATABASE_ENGINE: 'oracle' }, /DATABASE_ENGINE/],
    ['a missing setting, named', flexible('postgresql', { DATABASE_USER: '' }), /DATABASE_ENGINE=postgresql needs .*missing: DATABASE_USER$/],
    ['no client id, named', flexible('mysql', { AZURE_CLIENT_ID: ' ' }), /missing: AZURE_CLIENT_ID$/],
    ['two missing, both named', { DATABASE_ENGINE: 'mysql', DATABASE_USER: 'u', AZURE_CLIENT_ID: CLIENT_ID }, /missing: DATABASE_HOST, DATABASE_NAME$/],
    ['SQL_SERVER with postgresql', flexible('postgresql', { SQL_SERVER: 's', SQL_DATABASE: 'd' }), /SQL_SERVER and SQL_DATABASE are for DATABASE_ENGINE=sqlserver/],
    ['DATABASE_HOST with sqlserver', { DATABASE_ENGINE: 'sqlserver', SQL_SERVER: 's', SQL_DATABASE: 'd', DATABASE_HOST: 'h' },
      /DATABASE_HOST is for DATABASE_ENGINE=postgresql or mysql, but DATABASE_ENGINE is sqlserver/],
    ['DATABASE_NAME without an engine', { DATABASE_NAME: 'd' }, /DATABASE_NAME is for .* DATABASE_ENGINE is unset \(sqlserver\)/],
    ['sqlserver without its server', { DATABASE_ENGINE: 'sqlserver' }, /DATABASE_ENGINE=sqlserver needs SQL_SERVER and SQL_DATABASE/],
    ['a host with a scheme', flexible('postgresql', { DATABASE_HOST: 'postgres://h' }), /DATABASE_HOST must be a host name/],
    ['a port out of range', flexible('postgresql', { DATABASE_HOST: 'h:70000' }), /DATABASE_HOST must be a host name/],
    ['DATABASE_URL beside DATABASE_HOST', { ...flexible('postgresql'), DATABASE_URL: 'postgres://h/d' }, /DATABASE_URL and DATABASE_HOST are both set/],
  ])('rejects %s with a message naming the setting', (_label, env, message) => {
    expect(() => loadConfig(env)).toThrow(ConfigError);
    expect(() => loadConfig(env)).toThrow(message);
  });

  it('locally DATABASE_URL still wins over a DATABASE_ENGINE copied from Azure', () => {
    expect(loadConfig({ DATABASE_ENGINE: 'postgresql', DATABASE_URL: 'pglite:' }).database).toEqual({ kind: 'pglite', dataDir: null });
  });
});

/** Hands out numbered tokens living `lifetimeMs`; `fail` makes the next calls throw. */
class CountingCredential implements TokenCredential {
  calls = 0;
  fail = false;
  constructor(private readonly lifetimeMs: number, private readonly delayMs = 0) {}
  async getToken(): Promise<AccessToken> {
    this.calls++;
    if (this.delayMs) await new Promise((r) => setTimeout(r, this.delayMs));
    if (this.fail) throw new Error('entra unavailable');
    return { token: `t${this.calls}`, expiresOnTimestamp: Date.now() + this.lifetimeMs };
  }
}

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe('EntraTokenSource', () => {
  it('fetches once for concurrent callers and serves the cached token until the refresh', async () => {
    const cred = new CountingCredential(60_000, 20);
    const tokens = new EntraTokenSource(cred);
    try {
      expect(tokens.current()).toBeNull();
      expect(await Promise.all([tokens.token(), tokens.token(), tokens.token()])).toEqual(['t1', 't1', 't1']);
      expect(await tokens.token()).toBe('t1');
      expect(tokens.current()).toBe('t1');
      expect(cred.calls).toBe(1);
    } finally {
      tokens.close();
    }
  });

  it('refreshes in the background before expiry (at most half the lifetime early), with no caller waiting', async () => {
    const cred = new CountingCredential(400);
    const tokens = new EntraTokenSource(cred); // default 5-minute margin, capped at 200 ms here
    try {
      expect(await tokens.token()).toBe('t1');
      await sleep(300);
      expect(cred.calls).toBe(2);
      expect(tokens.current()).toBe('t2');
    } finally {
      tokens.close();
    }
  });

  it('keeps the valid cached token when a refresh fails, retries, and reports the failure', async () => {
    const cred = new CountingCredential(600);
    const errors: unknown[] = [];
    const tokens = new EntraTokenSource(cred, { retryMs: 50, onRefreshError: (e) => errors.push(e) });
    try {
      expect(await tokens.token()).toBe('t1');
      cred.fail = true;
      await sleep(380); // the refresh at 300 ms failed
      expect(errors.length).toBeGreaterThanOrEqual(1);
      expect(await tokens.token()).toBe('t1'); // still valid until 600 ms
      cred.fail = false;
      await sleep(120);
      expect(tokens.current()).not.toBe('t1');
    } finally {
      tokens.close();
    }
  });

  it('fetches on demand once the cached token has expired, and close() stops the refresh', async () => {
    const cred = new CountingCredential(100);
    const tokens = new EntraTokenSource(cred);
    expect(await tokens.token()).toBe('t1');
    tokens.close();
    await sleep(150);
    expect(cred.calls).toBe(1); // no background refresh after close
    expect(tokens.current()).toBeNull();
    expect(await tokens.token()).toBe('t2');
  });
});
