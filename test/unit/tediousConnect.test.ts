// The SQL Server driver really starts a connection on this Node: a connection attempt against a closed local
// port must fail as a refused connection (ECONNREFUSED inside a tedious ConnectionError), never with a
// TypeError from a missing runtime API (tedious 20 needs Promise.withResolvers, i.e. Node >= 22). A server that
// accepts and hangs up reaches tedious' pre-login path, where Node 20 fails with that TypeError.
import net from 'node:net';
import sql from 'mssql';
import tds from 'tedious';
import { describe, expect, it } from 'vitest';
import { buildMssqlConfig } from '../../src/store/mssql/pool.js';

/** A local port with nothing listening (bound, then closed). */
async function closedPort(): Promise<number> {
  const srv = net.createServer();
  await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
  const port = (srv.address() as net.AddressInfo).port;
  await new Promise<void>((r) => srv.close(() => r()));
  return port;
}

/** The error, its causes and the members of any AggregateError among them. */
const causes = (e: unknown, depth = 0): unknown[] => {
  if (!e || depth > 8) return [];
  const { cause, errors, originalError } = e as { cause?: unknown; errors?: unknown[]; originalError?: unknown };
  return [e, ...causes(cause, depth + 1), ...causes(originalError, depth + 1), ...(errors ?? []).flatMap((x) => causes(x, depth + 1))];
};
const refused = (e: unknown) => causes(e).some((c) => (c as { code?: string }).code === 'ECONNREFUSED');

function tediousConnect(port: number): Promise<Error> {
  const conn = new tds.Connection({
    server: '127.0.0.1',
    authentication: { type: 'default', options: { userName: 'sa', password: 'x' } },
    options: { port, encrypt: false, connectTimeout: 5_000 },
  });
  return new Promise<Error>((resolve) => {
    conn.on('connect', (e) => {
      conn.close();
      resolve(e ?? new Error('connected?'));
    });
    conn.connect();
  });
}

describe('tedious connects on this Node', () => {
  it('a tedious Connection to a closed port fails with ECONNREFUSED, not a TypeError', async () => {
    const err = await tediousConnect(await closedPort());
    expect(err).not.toBeInstanceOf(TypeError);
    expect(err).toBeInstanceOf(tds.ConnectionError);
    expect(refused(err), err.message).toBe(true);
  });

  it('a server that accepts and hangs up gives a ConnectionError (the pre-login path runs), not a TypeError', async () => {
    const srv = net.createServer((socket) => socket.destroy());
    await new Promise<void>((r) => srv.listen(0, '127.0.0.1', r));
    try {
      const err = await tediousConnect((srv.address() as net.AddressInfo).port);
      expect(err, err.message).not.toBeInstanceOf(TypeError);
      expect(err).toBeInstanceOf(tds.ConnectionError);
      expect((err as { code?: string }).code).toBe('ESOCKET');
    } finally {
      await new Promise<void>((r) => srv.close(() => r()));
    }
  });

  it("the app's mssql pool config (mssql → tedious) fails the same way", async () => {
    const port = await closedPort();
    const pool = new sql.ConnectionPool(buildMssqlConfig({ kind: 'mssql', url: `mssql://sa:x@127.0.0.1:${port}/master` },
      { poolMax: 1, statementTimeoutMs: 2_000, connectTimeoutMs: 5_000 }));
    const err = await pool.connect().then(() => new Error('connected?'), (e: Error) => e);
    await pool.close().catch(() => {});
    expect(err).not.toBeInstanceOf(TypeError);
    expect(err).toBeInstanceOf(sql.ConnectionError);
    expect(refused(err), err.message).toBe(true);
    expect(causes(err).some((c) => c instanceof TypeError), err.message).toBe(false);
  });
});
