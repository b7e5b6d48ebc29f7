// The lease contract, run unchanged against every dialect (PGlite, PostgreSQL server, SQL Server when configured).
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import type { Stores } from '../../src/store/stores.js';
import type { LeaseRow } from '../../src/store/ports.js';

const NAME = 'submission-manager-executor';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(dialects)('lease contract: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    s = await ctx.openStores();
  });

  it('acquires when the row is missing, with epoch 1 and database times', async () => {
    expect(await s.lease.get(NAME)).toBeNull();
    const out = await s.lease.tryAcquire(NAME, 'a', 60_000);
    expect(out.acquired).toBe(true);
    if (!out.acquired) return;
    expect(out.lease).toMatchObject({ leaseName: NAME, holderId: 'a', leaseEpoch: 1 });
    expect(out.lease.expiresAt.getTime() - out.lease.acquiredAt.getTime()).toBe(60_000);
    expect(out.lease.renewedAt.getTime()).toBe(out.lease.acquiredAt.getTime());
  });

  it('refuses while held and tells the caller when it expires', async () => {
    await s.lease.tryAcquire(NAME, 'a', 60_000);
    const out = await s.lease.tryAcquire(NAME, 'b', 60_000);
    expect(out.acquired).toBe(false);
    if (out.acquired) return;
    expect(out.current).toMatchObject({ holderId: 'a', leaseEpoch: 1 });
    const remaining = out.current!.expiresAt.getTime() - out.dbNow.getTime();
    expect(remaining).toBeGreaterThan(55_000);
    expect(remaining).toBeLessThanOrEqual(60_000);
    expect((await s.lease.get(NAME))?.holderId).toBe('a');
  });

  it('acquires an expired lease with epoch + 1, also for the same holder', async () => {
    await s.lease.tryAcquire(NAME, 'a', 150);
    await sleep(200);
    const same = await s.lease.tryAcquire(NAME, 'a', 150);
    expect(same.acquired && same.lease.leaseEpoch).toBe(2);
    await sleep(200);
    const other = await s.lease.tryAcquire(NAME, 'b', 60_000);
    expect(other.acquired && other.lease).toMatchObject({ holderId: 'b', leaseEpoch: 3 });
    const events = await s.lease.listEvents(NAME);
    expect(events.map((e) => [e.event, e.holderId, e.leaseEpoch])).toEqual([
      ['acquired', 'a', 1], ['acquired', 'a', 2], ['acquired', 'b', 3]]);
  });

  it('renews only for the holder with the current epoch, before expiry, keeping the epoch', async () => {
    const out = await s.lease.tryAcquire(NAME, 'a', 300);
    if (!out.acquired) throw new Error('not acquired');
    const token = { leaseName: NAME, holderId: 'a', leaseEpoch: 1 };
    // A longer duration than the acquire's, so the extension shows even when both land in the same millisecond.
    const renewed = await s.lease.renew(token, 400);
    expect(renewed?.leaseEpoch).toBe(1);
    expect(renewed!.expiresAt.getTime()).toBeGreaterThan(out.lease.expiresAt.getTime());
    expect(renewed!.acquiredAt.getTime()).toBe(out.lease.acquiredAt.getTime());
    expect(await s.lease.renew({ ...token, holderId: 'b' }, 300)).toBeNull();
    expect(await s.lease.renew({ ...token, leaseEpoch: 2 }, 300)).toBeNull();
    await sleep(600);
    expect(await s.lease.renew(token, 300)).toBeNull(); // expired: renew must not resurrect it
    expect((await s.lease.get(NAME))?.leaseEpoch).toBe(1);
  });

  it('release expires the row in place; another holder acquires at once with epoch + 1', async () => {
    await s.lease.tryAcquire(NAME, 'a', 60_000);
    const token = { leaseName: NAME, holderId: 'a', leaseEpoch: 1 };
    expect(await s.lease.release({ ...token, holderId: 'b' })).toBe(false);
    expect(await s.lease.release(token)).toBe(true);
    const row = await s.lease.get(NAME);
    expect(row).not.toBeNull();
    expect(row!.expiresAt.getTime()).toBeLessThanOrEqual(row!.dbNow.getTime());
    expect(await s.lease.release(token)).toBe(false); // already released
    const b = await s.lease.tryAcquire(NAME, 'b', 60_000);
    expect(b.acquired && b.lease.leaseEpoch).toBe(2);
    expect(await s.lease.renew(token, 60_000)).toBeNull();
    const events = await s.lease.listEvents(NAME);
    expect(events.map((e) => e.event)).toEqual(['acquired', 'released', 'acquired']);
  });

  it('never deletes the row: epochs keep growing across many acquire/release cycles', async () => {
    for (let i = 1; i <= 10; i++) {
      const out = await s.lease.tryAcquire(NAME, `h${i % 3}`, 60_000);
      expect(out.acquired && out.lease.leaseEpoch).toBe(i);
      expect(await s.lease.release({ leaseName: NAME, holderId: `h${i % 3}`, leaseEpoch: i })).toBe(true);
    }
    expect((await s.lease.get(NAME))?.leaseEpoch).toBe(10);
  });

  it('keeps leases of different names independent', async () => {
    expect((await s.lease.tryAcquire('a-lease', 'x', 60_000)).acquired).toBe(true);
    expect((await s.lease.tryAcquire('b-lease', 'y', 60_000)).acquired).toBe(true);
    expect((await s.lease.tryAcquire('a-lease', 'y', 60_000)).acquired).toBe(false);
  });

  it('race: 20 contenders on separate connections, several expiry rounds → leases never overlap', async () => {
    const contenders = await Promise.all(Array.from({ length: 20 }, () => ctx.openStores({ poolMax: 1 })));
    const won: LeaseRow[] = [];
    for (let round = 0; round < 4; round++) {
      const outs = await Promise.all(contenders.map((c, i) => c.lease.tryAcquire(NAME, `c${i}`, 250)));
      const winners = outs.flatMap((o) => (o.acquired ? [o.lease] : []));
      // Usually one winner; on a loaded machine the 20 statements can span more than the 250 ms lease, and a
      // later one may then win after the first winner's lease expired. Never two at once (checked below).
      expect(winners.length).toBeGreaterThanOrEqual(1);
      won.push(...winners);
      await sleep(300);
    }
    won.sort((a, b) => a.leaseEpoch - b.leaseEpoch);
    expect(won.map((w) => w.leaseEpoch)).toEqual(won.map((_, i) => i + 1)); // one epoch per successful acquire
    for (let i = 1; i < won.length; i++) {
      expect(won[i]!.acquiredAt.getTime()).toBeGreaterThanOrEqual(won[i - 1]!.expiresAt.getTime()); // no overlap in database time
    }
    const events = await s.lease.listEvents(NAME);
    expect(events.map((e) => e.leaseEpoch)).toEqual(won.map((w) => w.leaseEpoch));
  });
});
