// The pg pool wrapper on the real server: URL options are kept beside ours, statements are bounded,
// driver errors map to the neutral kinds once, and a killed backend does not poison the pool.
import { describe, expect, inject, it } from 'vitest';
import { openPgPool } from '../../src/store/postgres/db.js';
import { StoreError } from '../../src/store/ports.js';
import { PG_TEST_URL } from '../support/pgServer.js';

describe('pg pool (PostgreSQL server)', () => {
  it('keeps URL options, applies the statement timeout, maps errors, survives a killed backend', async (t) => {
    const skip = inject('pgUnavailable');
    if (skip) return t.skip(skip);
    const url = `${PG_TEST_URL}${PG_TEST_URL.includes('?') ? '&' : '?'}options=${encodeURIComponent('-c search_path=pg_catalog')}`;
    const db = openPgPool({ url, max: 2, statementTimeoutMs: 300, applicationName: 'pool-test' }, () => {});
    try {
      expect((await db.query<{ search_path: string }>('SHOW search_path')).rows[0]!.search_path).toBe('pg_catalog');
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
});
