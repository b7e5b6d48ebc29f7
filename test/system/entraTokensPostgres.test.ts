// Entra tokens as PostgreSQL passwords, against a server that checks them: a cluster of the test's own with
// scram-sha-256 over TLS (the machine's shared server trusts loopback). A stub credential hands out short-lived
// tokens and makes each new one the role's only valid password. Through several rotations the pool (the app's
// own options, token cache and pg path) serves a steady load with no failed request, keeps its old connections
// and opens new ones with the new token; the first token is refused at the end. Then the app itself starts with
// the postgresql settings shape (host + database + user + client id) and serves an intent: with the stub, and
// with no credential injected at all, its own ManagedIdentityCredential reaching a local identity endpoint.
import { execFileSync } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import path from 'node:path';
import pg from 'pg';
import { IN_CI } from '../support/pgServer.js';
import { afterAll, beforeAll, describe, expect, it } from 'vitest';
import { EntraTokenSource } from '../../src/store/entraToken.js';
import { openPgPool } from '../../src/store/postgres/db.js';
import { pgEntraOptions } from '../../src/store/postgres/entra.js';
import { projectRoot } from '../support/projectRoot.js';
import {
  adminRotation, expectAppServes, expectRotationsServed, RotatingCredential, rotationPhases, ROTATIONS, steadyLoad, TEST_CLIENT_ID,
  trustTestCa, type Held,
} from '../support/rotatingCredential.js';
import { scramClusterUnavailable, startScramCluster, type ScramCluster } from '../support/pgScramCluster.js';
import { startIdentityEndpoint, withProcessEnv } from '../support/identityEndpoint.js';

const root = projectRoot(import.meta.url);

describe('Entra token passwords on PostgreSQL (own cluster, scram-sha-256 over TLS)', () => {
  let cluster: ScramCluster | null = null;
  const skip = scramClusterUnavailable();
  const user = `id-api-${randomBytes(3).toString('hex')}`;

  beforeAll(async () => {
    if (skip) return;
    cluster = await startScramCluster();
    trustTestCa(cluster.caPem);
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

  // Watermark: the server clock once the new password is in force (backend_start is compared to it).
  const rotatingCredential = adminRotation(() => cluster!.admin(), async (admin, token) => {
    await admin.query(`ALTER ROLE "${user}" PASSWORD '${token}'`);
    return Number((await admin.query<{ ms: string }>('SELECT (extract(epoch FROM clock_timestamp()) * 1000)::bigint AS ms')).rows[0]!.ms);
  });

  it('keeps the pool serving across token rotations, with new connections on the new token', async (t) => {
    if (skip && IN_CI) throw new Error(`required under CI=true: ${skip}`);
    if (skip) return t.skip(skip);
    const cred = rotatingCredential();
    const tokens = new EntraTokenSource(cred);
    const target = { kind: 'postgresEntra' as const, host: '127.0.0.1', port: cluster!.port, database: 'sm', user, clientId: TEST_CLIENT_ID };
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
      const seen = await rotationPhases(cred, holdMany);
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
    if (skip && IN_CI) throw new Error(`required under CI=true: ${skip}`);
    if (skip) return t.skip(skip);
    await expectAppServes('postgresql', cluster!.port, 'sm', user, rotatingCredential());
  });

  it('with no credential injected, the app asks the managed identity endpoint for a token for AZURE_CLIENT_ID', async (t) => {
    if (skip && IN_CI) throw new Error(`required under CI=true: ${skip}`);
    if (skip) return t.skip(skip);
    const endpoint = await startIdentityEndpoint(async (token) => {
      const admin = await cluster!.admin();
      try {
        await admin.query(`ALTER ROLE "${user}" PASSWORD '${token}'`);
      } finally {
        await admin.end();
      }
    });
    try {
      await withProcessEnv(endpoint.env, () => expectAppServes('postgresql', cluster!.port, 'sm', user, null));
    } finally {
      await endpoint.stop();
    }
    expect(endpoint.requests.length).toBeGreaterThanOrEqual(1);
    for (const r of endpoint.requests) {
      expect(r).toEqual({ apiVersion: '2019-08-01', resource: 'https://ossrdbms-aad.database.windows.net', clientId: TEST_CLIENT_ID, secret: true });
    }
  });
});
