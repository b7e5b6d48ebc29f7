// Embedded PGlite runs on the event loop's thread: statements that keep coming (several instances' executors on one
// database) must still leave the event loop its turns, or no timer fires and no socket is read until they stop (a
// provider's answer waits unread while its call times out).
import { describe, expect, it } from 'vitest';
import { fromPglite } from '../../src/store/postgres/db.js';
import { newPglite } from '../support/pgliteTemplate.js';

describe('PGlite statements and the event loop', () => {
  it('a timer fires while statements and transactions run back to back', async () => {
    const db = fromPglite(await newPglite());
    try {
      let fired = false;
      setTimeout(() => (fired = true), 1);
      const t0 = performance.now();
      const running = () => !fired && performance.now() - t0 < 2_000; // without turns: they stop only at 2 s
      const statements = async () => { while (running()) await db.query('SELECT 1'); };
      const transactions = async () => { while (running()) await db.transaction(async (tx) => tx.query('SELECT 1')); };
      await Promise.all([statements(), statements(), transactions()]);
      expect(fired).toBe(true);
    } finally {
      await db.close();
    }
  });
});
