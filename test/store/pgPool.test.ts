// The pg pool wrapper on the real server: URL options are kept beside ours, statements are bounded,
// driver errors map to the neutral kinds once, and a killed backend does not poison the pool.
import net from 'node:net';
import { describe, expect, inject, it } from 'vitest';
import { openPgPool } from '../../src/store/postgres/db.js';
import { StoreError } from '../../src/store/ports.js';
import { PG_TEST_URL } from '../support/pgServer.js';

describe('pg pool (PostgreSQL server)', () => {
  it('keeps URL options, applies the statement timeout, maps errors, survives a killed backend', async (t) => {
    const skip = inject('pgUnavailable');
    if (skip) return t.skip(skip);
    const url = `${PG_TEST_URL}${PG_TEST_URL.includes('?') ? '&' : '?'}options=${encodeURIComponent('-c search_path=pg_catalog -c default_transaction_isolation=serializable')}`;
    const db = openPgPool({ url, max: 2, statementTimeoutMs: 300, applicationName: 'pool-test' }, () => {});
    try {
      expect((await db.query<{ search_path: string }>('SHOW search_path')).rows[0]!.search_path).toBe('pg_catalog');
      // READ COMMITTED is ours to set (a partition change's switch relies on it), whatever the URL or database says.
      expect((await db.query<{ default_transaction_isolation: string }>('SHOW default_transaction_isolation')).rows[0]!.default_transaction_isolation).toBe('read committed');
      const timedOut = await db.query('SELECT pg_sleep(2)').catch((e: unknown) => e);
      expect(timedOut).toBeInstanceOf(StoreError);
      expect(timedOut).toMatchObject({ kind: 'transient', code: '57014' });
      const dup = await db.transaction(async (tx) => {
        await tx.query('CREATE TEMP TABLE u (k int PRIMARY KEY)');
        await tx.query('INSERT INTO u VALUES (1)');
        await tx.query('INSERT INTO u VALUES (1)');
      }).catch((e: unknown) => e);
      expect(dup).toMatchObject({ kind: 'conflict', code: '23505' });
      const syntax = await db.query('SELEC 1').catch((e: unknown) => e);
      expect(syntax).toMatchObject({ kind: 'fatal' });
      // Kill our own backends: the in-flight statement fails as transient, the next one works.
      const victim = db.query('SELECT pg_sleep(0.25)').catch((e: unknown) => e);
      await new Promise((r) => setTimeout(r, 50));
      const killer = openPgPool({ url: PG_TEST_URL, max: 1, statementTimeoutMs: 2_000 });
      await killer.query(`SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = 'pool-test' AND pid <> pg_backend_pid()`);
      await killer.close();
      expect(await victim).toMatchObject({ kind: 'transient' });
      expect((await db.query<{ one: number }>('SELECT 1 AS one')).rows[0]!.one).toBe(1);
    } finally {
      await db.close();
    }
  });

  // A backend terminated right as its connection is set up (pg_terminate_backend in a chaos run, 1 crash in 18 runs):
  // its FATAL can arrive in the same TCP read as the ReadyForQuery that hands the new client out. pg-pool takes its
  // idle listener off before the hand-out, and ours is attached a microtask later, so the FATAL was an 'error' event
  // with no listener: the process died. A proxy staging exactly that read: the statement fails, the process lives.
  it('a FATAL in the same read as a new connection\'s ReadyForQuery fails the statement, not the process', async (t) => {
    const skip = inject('pgUnavailable');
    if (skip) return t.skip(skip);
    const target = new URL(PG_TEST_URL);
    const fatal = errorPacket({ S: 'FATAL', V: 'FATAL', C: '57P01', M: 'terminating connection due to administrator command' });
    const proxy = net.createServer((client) => {
      const server = net.connect(Number(target.port || 5432), target.hostname);
      client.pipe(server);
      let buffered = Buffer.alloc(0);
      server.on('data', (chunk: Buffer) => {
        buffered = Buffer.concat([buffered, chunk]);
        const z = readyForQueryEnd(buffered);
        if (z < 0) return; // still in the startup exchange: hold it back, so the hand-out and the FATAL share one read
        client.end(Buffer.concat([buffered.subarray(0, z), fatal]));
        server.destroy();
      });
      server.on('error', () => client.destroy());
      client.on('error', () => server.destroy());
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    const url = new URL(PG_TEST_URL);
    url.host = `127.0.0.1:${(proxy.address() as net.AddressInfo).port}`;
    const db = openPgPool({ url: url.toString(), max: 2, statementTimeoutMs: 1_000, applicationName: 'pool-fatal-test' }, () => {});
    const uncaught: unknown[] = [];
    const onUncaught = (e: unknown) => uncaught.push(e);
    process.on('uncaughtException', onUncaught);
    try {
      for (let i = 0; i < 3; i++) {
        const failed = await db.query('SELECT 1').catch((e: unknown) => e);
        expect(failed).toBeInstanceOf(StoreError);
        expect(failed).toMatchObject({ kind: 'transient' });
      }
      await new Promise((r) => setTimeout(r, 100));
      expect(uncaught).toEqual([]);
    } finally {
      process.off('uncaughtException', onUncaught);
      await db.close();
      await new Promise<void>((r) => proxy.close(() => r()));
    }
  });
});

/** A backend ErrorResponse ('E') with the given fields. */
function errorPacket(fields: Record<string, string>): Buffer {
  const body = Buffer.concat([...Object.entries(fields).map(([k, v]) => Buffer.from(`${k}${v}\0`)), Buffer.from([0])]);
  const head = Buffer.alloc(5);
  head.write('E', 0);
  head.writeInt32BE(body.length + 4, 1);
  return Buffer.concat([head, body]);
}

/** The end offset of the first ReadyForQuery ('Z') message in `b` (-1: not there yet). */
function readyForQueryEnd(b: Buffer): number {
  let at = 0;
  while (at + 5 <= b.length) {
    const len = b.readInt32BE(at + 1);
    if (at + 1 + len > b.length) return -1;
    if (b[at] === 0x5a) return at + 1 + len;
    at += 1 + len;
  }
  return -1;
}
