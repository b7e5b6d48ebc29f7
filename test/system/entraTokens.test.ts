// Entra tokens as database passwords, against servers that check passwords: a stub credential hands out
// short-lived tokens and makes each new one the database user's only valid password. Through several
// rotations the pool (the app's own options, token cache and driver path) serves a steady load with no failed
// request, keeps its old connections, and opens new ones with the new token; the first token is refused at
// the end. PostgreSQL: a cluster of the test's own with scram-sha-256 over TLS (the shared server trusts
// loopback). MariaDB: a user with a password on the shared server (no TLS there). Then the app itself starts
// with the postgresql settings shape (host + database + user + client id) and serves an intent.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { readFileSync } from 'node:fs';
import path from 'node:path';
import tls from 'node:tls';
import mysql from 'mysql2/promise';
import pg from 'pg';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { createApp } from '../../src/app.js';
import type { ApiRequest } from '../../src/intents/http.js';
import { EntraTokenSource, OSS_RDBMS_SCOPE } from '../../src/store/entraToken.js';
import { openPgPool } from '../../src/store/postgres/db.js';
import { pgEntraOptions } from '../../src/store/postgres/entra.js';
import { bindTokenPassword, mysqlEntraPoolOptions } from '../../src/store/mysql/entraOptions.js';
import { projectRoot } from '../support/projectRoot.js';
import { RotatingCredential, steadyLoad } from '../support/rotatingCredential.js';
import { scramClusterUnavailable, startScramCluster, type ScramCluster } from '../support/pgScramCluster.js';

const LIFETIME_MS = 1_200; // refreshed at half its lifetime (the 5-minute default margin is capped there)
const ROTATIONS = 3;
const CLIENT_ID = '00000000-0000-4000-8000-000000000001';
const root = projectRoot(import.meta.url);

function apiRequest(method: string, path_: string, body: string, params: Record<string, string> = {}): ApiRequest {
  const headers = new Headers({ 'content-type': 'application/json', 'idempotency-key': `smoke-${randomBytes(4).toString('hex')}` });
  return { method, url: `http://localhost/api/${path_}`, headers, params, text: async () => body };
}

/** One connection's identity on the server and where it stands against a rotation watermark. */
interface Held { id: number; mark: number }

/** Phase k (after the k-th rotation) holds 2 + 3k connections at once: more than the pool can have had before
 *  (the previous phase's plus the load's two), so at least one is opened after the rotation. */
async function phases(cred: RotatingCredential, holdMany: (n: number) => Promise<Held[]>) {
  const seen: Held[][] = [await holdMany(2)];
  for (let k = 1; k <= ROTATIONS; k++) {
    await cred.waitForIssued(k + 1);
    seen.push(await holdMany(2 + 3 * k));
  }
  return seen;
}

function expectRotationsServed(cred: RotatingCredential, seen: Held[][], final: Held[], load: { ok: number; failures: unknown[] }) {
  expect(load.failures).toEqual([]);
  expect(load.ok).toBeGreaterThan(20);
  expect(cred.issued.length).toBeGreaterThanOrEqual(ROTATIONS + 1);
  expect(new Set(cred.issued.map((i) => i.scope))).toEqual(new Set([OSS_RDBMS_SCOPE]));
  for (let k = 1; k <= ROTATIONS; k++) {
    // Opened after rotation k: it authenticated with token k + 1 or later (the only valid passwords then).
    expect(seen[k]!.some((h) => h.mark > cred.issued[k]!.mark), `phase ${k} opened a connection after rotation ${k}`).toBe(true);
  }
  // Nothing dropped: the first connections are still in the pool after every rotation.
  const finalIds = new Set(final.map((h) => h.id));
  expect(seen[0]!.every((h) => finalIds.has(h.id))).toBe(true);
}

describe('Entra token passwords on PostgreSQL (own cluster, scram-sha-256 over TLS)', () => {
  let cluster: ScramCluster | null = null;
  const skip = scramClusterUnavailable();
  const user = `id-api-${randomBytes(3).toString('hex')}`;

  beforeAll(async () => {
    if (skip) return;
    cluster = await startScramCluster();
    // Trust the cluster's certificate like a public CA: the app's TLS settings (verify, TLS 1.2+) stay as they are.
    tls.setDefaultCACertificates([...tls.getCACertificates('default'), cluster.caPem]);
    const admin = await cluster.admin();
    await admin.query(`CREATE ROLE "${user}" LOGIN PASSWORD 'not-a-token'`);
    await admin.query('CREATE DATABASE sm');
    await admin.end();
    // The postprovision hook's grants, run the way it runs them (psql -v … -f): enough for the app to migrate and run.
    execFileSync('psql', ['-h', cluster.socketDir, '-p', String(cluster.port), '-U', 'postgres', '-d', 'sm', '-v', 'ON_ERROR_STOP=1',
      '-v', `app_role=${user}`, '-v', 'app_db=sm', '-f', path.join(root, 'infra/scripts/sql/postgresql-app-grants.sql')], { stdio: 'pipe' });
  }, 120_000);

  afterAll(async () => {
    await cluster?.stop();
  });

  const rotatingCredential = () => new RotatingCredential(async (token) => {
    const admin = await cluster!.admin();
    try {
      await admin.query(`ALTER ROLE "${user}" PASSWORD '${token}'`);
      // Watermark: the server clock once the new password is in force (backend_start is compared to it).
      return Number((await admin.query<{ ms: string }>('SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms')).rows[0]!.ms);
    } finally {
      await admin.end();
    }
  }, LIFETIME_MS);

  it('keeps the pool serving across token rotations, with new connections on the new token', async (t) => {
    if (skip) return t.skip(skip);
    const cred = rotatingCredential();
    const tokens = new EntraTokenSource(cred);
    const target = { kind: 'postgresEntra' as const, host: '127.0.0.1', port: cluster!.port, database: 'sm', user, clientId: CLIENT_ID };
    const db = openPgPool({ ...(await pgEntraOptions(target, tokens)), max: 20, statementTimeoutMs: 5_000 });
    const backend = `SELECT pg_backend_pid() AS id, (extract(epoch FROM backend_start) * 1000)::bigint AS mark,
      ssl FROM pg_stat_activity JOIN pg_stat_ssl USING (pid) WHERE pid = pg_backend_pid()`;
    const holdMany = async (n: number): Promise<Held[]> => {
      let arrived = 0;
      let release!: () => void;
      const all = new Promise<void>((r) => (release = r));
      return Promise.all(Array.from({ length: n }, () => db.transaction(async (tx) => {
        const row = (await tx.query<{ id: number; mark: string; ssl: boolean }>(backend)).rows[0]!;
        expect(row.ssl).toBe(true);
        if (++arrived === n) release();
        await all; // every connection held at once
        return { id: row.id, mark: Number(row.mark) };
      }).catch((e: unknown) => {
        release(); // one failed connection must not leave the others waiting
        throw e;
      })));
    };
    try {
      const load = steadyLoad(async () => void (await db.query('SELECT 1')));
      const seen = await phases(cred, holdMany);
      const result = await load.stop();
      expectRotationsServed(cred, seen, await holdMany(2 + 3 * ROTATIONS + 2), result);
      // The server really checks: the first token no longer opens a connection.
      const stale = new pg.Client({ host: '127.0.0.1', port: cluster!.port, user, database: 'sm', password: cred.issued[0]!.token, ssl: true });
      await expect(stale.connect()).rejects.toMatchObject({ code: '28P01' });
      // The hook's grants: tables of its own in its database (the app's migrations, below), nothing server-wide.
      await db.exec('CREATE TABLE grants_probe (k int PRIMARY KEY); INSERT INTO grants_probe VALUES (1); DROP TABLE grants_probe');
      await expect(db.query('CREATE DATABASE grants_probe_other')).rejects.toMatchObject({ code: '42501' });
      await expect(db.query('CREATE ROLE grants_probe_role')).rejects.toMatchObject({ code: '42501' });
    } finally {
      tokens.close();
      await db.close();
    }
  });

  it('the app starts with the postgresql settings shape (host, database, user, client id) and serves an intent', async (t) => {
    if (skip) return t.skip(skip);
    const cred = rotatingCredential();
    const app = await createApp({
      env: {
        DATABASE_ENGINE: 'postgresql', DATABASE_HOST: `127.0.0.1:${cluster!.port}`, DATABASE_NAME: 'sm',
        DATABASE_USER: user, AZURE_CLIENT_ID: CLIENT_ID, LOG_LEVEL: 'silent',
      },
      credential: cred,
    });
    try {
      expect(app.config.database).toMatchObject({ kind: 'postgresEntra', host: '127.0.0.1', port: cluster!.port, user });
      await app.stores.ping();
      const res = await app.handlers.postIntent(apiRequest('POST', 'intents', JSON.stringify({ payload: { hello: 'pg' } })));
      expect(res.status).toBe(201);
      const id = (JSON.parse(String(res.body)) as { intentId: string }).intentId;
      expect((await app.handlers.getIntent(apiRequest('GET', `intents/${id}`, '', { id }))).status).toBe(200);
      expect(await app.lease.tryAcquire()).toBe(true);
      expect(cred.issued.length).toBeGreaterThanOrEqual(1);
    } finally {
      await app.close();
    }
  });
});

describe('Entra token passwords on MariaDB (a user with a password)', () => {
  const user = `entra_${randomBytes(4).toString('hex')}`;
  const database = `entra_${randomBytes(4).toString('hex')}`;
  let root_: mysql.Connection | null = null;
  let unavailable: string | null = null;

  beforeAll(async () => {
    try {
      root_ = await mysql.createConnection({ host: '127.0.0.1', port: 3306, user: 'root' });
    } catch (e) {
      unavailable = `MariaDB not reachable at 127.0.0.1:3306: ${(e as Error).message}`;
      return;
    }
    await root_.query(`CREATE DATABASE \`${database}\``);
    await root_.query(`CREATE USER '${user}'@'%' IDENTIFIED BY 'not-a-token'`);
    // The postprovision hook's grants, run the way it runs them (the mysql client, the file after two SETs).
    const script = `SET @app_user = '${user}', @app_db = '${database}';\n` +
      readFileSync(path.join(root, 'infra/scripts/sql/mysql-app-grants.sql'), 'utf8');
    execFileSync('mysql', ['-h', '127.0.0.1', '-P', '3306', '-u', 'root', '-N', '-B'], { input: script, stdio: ['pipe', 'pipe', 'pipe'] });
  });

  afterAll(async () => {
    if (!root_) return;
    await root_.query(`DROP USER IF EXISTS '${user}'@'%'`);
    await root_.query(`DROP DATABASE IF EXISTS \`${database}\``);
    await root_.end();
  });

  it('keeps the pool serving across token rotations, with new connections on the new token', async (t) => {
    if (unavailable) return t.skip(unavailable);
    const cred = new RotatingCredential(async (token) => {
      // A fresh connection per rotation: its id (ids only grow) is the watermark.
      const admin = await mysql.createConnection({ host: '127.0.0.1', port: 3306, user: 'root' });
      try {
        await admin.query(`ALTER USER '${user}'@'%' IDENTIFIED BY '${token}'`);
        const [rows] = await admin.query('SELECT CONNECTION_ID() AS id');
        return Number((rows as Array<{ id: number }>)[0]!.id);
      } finally {
        await admin.end();
      }
    }, LIFETIME_MS);
    const tokens = new EntraTokenSource(cred);
    const target = { host: '127.0.0.1', port: 3306, database, user };
    const pool = mysql.createPool({ ...(await mysqlEntraPoolOptions(target, tokens, { tls: false })), connectionLimit: 20 });
    bindTokenPassword(pool, tokens);
    const acquire = () => pool.getConnection();
    const holdMany = async (n: number): Promise<Held[]> => {
      const conns = await Promise.all(Array.from({ length: n }, acquire));
      try {
        return await Promise.all(conns.map(async (c) => {
          const [rows] = await c.query('SELECT CONNECTION_ID() AS id');
          const id = Number((rows as Array<{ id: number }>)[0]!.id);
          return { id, mark: id };
        }));
      } finally {
        conns.forEach((c) => c.release());
      }
    };
    try {
      const load = steadyLoad(async () => {
        const c = await acquire();
        try {
          await c.query('SELECT 1');
        } finally {
          c.release();
        }
      });
      const seen = await phases(cred, holdMany);
      const result = await load.stop();
      expectRotationsServed(cred, seen, await holdMany(2 + 3 * ROTATIONS + 2), result);
      await expect(mysql.createConnection({ host: '127.0.0.1', port: 3306, user, password: cred.issued[0]!.token, database }))
        .rejects.toMatchObject({ errno: 1045 });
      // The hook's grants: the app's own tables in its database, nothing beyond it.
      await pool.query('CREATE TABLE grants_probe (k INT PRIMARY KEY)');
      await pool.query('INSERT INTO grants_probe VALUES (1)');
      await pool.query('ALTER TABLE grants_probe ADD COLUMN v INT NULL');
      await expect(pool.query('SELECT COUNT(*) FROM mysql.user')).rejects.toMatchObject({ errno: 1142 });
      await expect(pool.query('CREATE DATABASE grants_probe_other')).rejects.toMatchObject({ errno: 1044 });
    } finally {
      tokens.close();
      await pool.end();
    }
  });

  it('answers Azure\'s switch to mysql_clear_password with a valid token, NUL-terminated, and verifies TLS by default', async () => {
    const cred = new RotatingCredential(async () => 0, 60_000);
    const tokens = new EntraTokenSource(cred);
    try {
      const opts = await mysqlEntraPoolOptions({ host: 'x.mysql.database.azure.com', port: 3306, database: 'd', user: 'u' }, tokens);
      expect(opts.ssl).toMatchObject({ rejectUnauthorized: true, minVersion: 'TLSv1.2' });
      const plugin = (opts.authPlugins as Record<string, (a: unknown) => (d: Buffer) => Promise<Buffer>>).mysql_clear_password!;
      const answer = await plugin({})(Buffer.alloc(0));
      expect(answer.toString()).toBe(`${cred.issued[0]!.token}\0`);
    } finally {
      tokens.close();
    }
  });
});
