// Entra tokens as MySQL passwords, against a server that checks them over TLS: a MariaDB server of the test's
// own with require_secure_transport (the machine's shared MariaDB has TLS disabled, and a token must never travel
// unencrypted). A stub credential hands out short-lived tokens and makes each new one the user's only valid
// password. Through several rotations the pool (the app's own mysql2 options, token cache, bound password)
// serves a steady load with no failed request, keeps its old connections and opens new ones with the new token;
// the first token is refused at the end. Then the app itself starts with the mysql settings shape (host +
// database + user + client id) on the mysql dialect and serves an intent: with the stub, and with no credential
// injected at all, its own ManagedIdentityCredential reaching a local identity endpoint.
// MariaDB checks a password-user's password in the first handshake; Azure instead switches an Entra user to
// mysql_clear_password, whose answer (the plugin) is checked by calling it.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import mysql from 'mysql2/promise';
import { IN_CI } from '../support/pgServer.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EntraTokenSource } from '../../src/store/entraToken.js';
import { bindTokenPassword, mysqlEntraPoolOptions } from '../../src/store/mysql/entraOptions.js';
import { startIdentityEndpoint, withProcessEnv } from '../support/identityEndpoint.js';
import { mariadbTlsUnavailable, startMariadbTls, type MariadbTlsServer } from '../support/mariadbTlsServer.js';
import { projectRoot } from '../support/projectRoot.js';
import {
  adminRotation, expectAppServes, expectRotationsServed, RotatingCredential, rotationPhases, ROTATIONS, steadyLoad, TEST_CLIENT_ID,
  trustTestCa, type Held,
} from '../support/rotatingCredential.js';

const root = projectRoot(import.meta.url);
const rows = <T>(r: unknown) => (r as [T[]])[0];

describe('Entra token passwords on MariaDB (own server, TLS required)', () => {
  let server: MariadbTlsServer | null = null;
  const skip = mariadbTlsUnavailable();
  const user = `id-api-${randomBytes(3).toString('hex')}`;
  const database = 'sm';

  beforeAll(async () => {
    if (skip) return;
    server = await startMariadbTls();
    trustTestCa(server.caPem);
    const admin = await server.admin();
    await admin.query(`CREATE DATABASE ${database}`);
    await admin.query(`CREATE USER '${user}'@'%' IDENTIFIED BY 'not-a-token'`);
    await admin.end();
    // The postprovision hook's grants, run the way it runs them (the mysql client, the file after two SETs).
    const script = `SET @app_user = '${user}', @app_db = '${database}';\n` +
      readFileSync(path.join(root, 'infra/scripts/sql/mysql-app-grants.sql'), 'utf8');
    execFileSync('mysql', ['-S', server.socket, '-u', 'root', '-N', '-B'], { input: script, stdio: ['pipe', 'pipe', 'pipe'] });
  }, 120_000);

  afterAll(async () => {
    await server?.stop();
  });

  // A fresh connection per rotation: its id (ids only grow) is the watermark.
  const rotatingCredential = adminRotation(() => server!.admin(), async (admin, token) => {
    await admin.query(`ALTER USER '${user}'@'%' IDENTIFIED BY '${token}'`);
    return Number(rows<{ id: number }>(await admin.query('SELECT CONNECTION_ID() AS id'))[0]!.id);
  });

  it('keeps the pool serving across token rotations, with new connections on the new token', async (t) => {
    if (skip && IN_CI) throw new Error(`required under CI=true: ${skip}`);
    if (skip) return t.skip(skip);
    const cred = rotatingCredential();
    const tokens = new EntraTokenSource(cred);
    const target = { host: '127.0.0.1', port: server!.port, database, user };
    const pool = mysql.createPool({ ...(await mysqlEntraPoolOptions(target, tokens)), connectionLimit: 20 });
    bindTokenPassword(pool, tokens);
    const holdMany = async (n: number): Promise<Held[]> => {
      const conns = await Promise.all(Array.from({ length: n }, () => pool.getConnection()));
      try {
        return await Promise.all(conns.map(async (c) => {
          const [row] = rows<{ id: number; tls: string }>(await c.query(
            `SELECT CONNECTION_ID() AS id, VARIABLE_VALUE AS tls FROM information_schema.SESSION_STATUS WHERE VARIABLE_NAME = 'SSL_VERSION'`));
          expect(row!.tls).toMatch(/^TLSv1\.[23]$/);
          return { id: Number(row!.id), mark: Number(row!.id) };
        }));
      } finally {
        conns.forEach((c) => c.release());
      }
    };
    try {
      const load = steadyLoad(async () => void (await pool.query('SELECT 1')));
      const seen = await rotationPhases(cred, holdMany);
      const result = await load.stop();
      expectRotationsServed(cred, seen, await holdMany(2 + 3 * ROTATIONS + 2), result);
      await expect(mysql.createConnection({ ...target, password: cred.issued[0]!.token, ssl: { rejectUnauthorized: true } }))
        .rejects.toMatchObject({ errno: 1045 });
      // The hook's grants: the app's own tables in its database, nothing beyond it.
      await pool.query('CREATE TABLE grants_probe (k INT PRIMARY KEY)');
      await pool.query('INSERT INTO grants_probe VALUES (1)');
      await pool.query('ALTER TABLE grants_probe ADD COLUMN v INT NULL');
      await pool.query('DROP TABLE grants_probe');
      await expect(pool.query('SELECT COUNT(*) FROM mysql.user')).rejects.toMatchObject({ errno: 1142 });
      await expect(pool.query('CREATE DATABASE grants_probe_other')).rejects.toMatchObject({ errno: 1044 });
    } finally {
      tokens.close();
      await pool.end();
    }
  });

  it('the app starts with the mysql settings shape (host, database, user, client id) and serves an intent', async (t) => {
    if (skip && IN_CI) throw new Error(`required under CI=true: ${skip}`);
    if (skip) return t.skip(skip);
    await expectAppServes('mysql', server!.port, database, user, rotatingCredential());
  });

  it('with no credential injected, the app asks the managed identity endpoint for a token for AZURE_CLIENT_ID', async (t) => {
    if (skip && IN_CI) throw new Error(`required under CI=true: ${skip}`);
    if (skip) return t.skip(skip);
    const endpoint = await startIdentityEndpoint(async (token) => {
      const admin = await server!.admin();
      try {
        await admin.query(`ALTER USER '${user}'@'%' IDENTIFIED BY '${token}'`);
      } finally {
        await admin.end();
      }
    });
    try {
      await withProcessEnv(endpoint.env, () => expectAppServes('mysql', server!.port, database, user, null));
    } finally {
      await endpoint.stop();
    }
    expect(endpoint.requests.length).toBeGreaterThanOrEqual(1);
    for (const r of endpoint.requests) {
      expect(r).toEqual({ apiVersion: '2019-08-01', resource: 'https://ossrdbms-aad.database.windows.net', clientId: TEST_CLIENT_ID, secret: true });
    }
  });

  it('answers Azure\'s switch to mysql_clear_password with a valid token, NUL-terminated, and verifies TLS', async () => {
    const cred = new RotatingCredential(async () => 0, 60_000);
    const tokens = new EntraTokenSource(cred);
    try {
      const opts = await mysqlEntraPoolOptions({ host: 'x.mysql.database.azure.com', port: 3306, database: 'd', user: 'u' }, tokens);
      expect(opts.ssl).toEqual({ minVersion: 'TLSv1.2', rejectUnauthorized: true });
      const plugin = (opts.authPlugins as Record<string, (a: unknown) => (d: Buffer) => Promise<Buffer>>).mysql_clear_password!;
      const answer = await plugin({})(Buffer.alloc(0));
      expect(answer.toString()).toBe(`${cred.issued[0]!.token}\0`);
    } finally {
      tokens.close();
    }
  });
});
