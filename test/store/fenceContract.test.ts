// Fence race, per dialect: a fenced transaction holds the lease row lock to commit, so either a competing
// acquire waits for our commit, or our fence reports leaseLost — never a write with our epoch committed
// after a newer epoch exists. Proven with the shared audit sequence, not timing.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import { staleWrites } from '../support/fenceChecker.js';
import type { Stores } from '../../src/store/stores.js';

const NAME = 'submission-manager-executor';
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(dialects)('fence contract: $name', (dialect) => {
  let ctx: DialectContext;
  let a: Stores;
  let b: Stores;
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    a = await ctx.openStores({ poolMax: 2 });
    b = await ctx.openStores({ poolMax: 2 });
  });

  const check = async () => {
    const violations = staleWrites(await ctx.auditLog(), await a.lease.listEvents(NAME));
    expect(violations).toEqual([]);
  };

  it('an acquire after expiry waits for the open fenced transaction to commit', async () => {
    const acq = await a.lease.tryAcquire(NAME, 'A', 300);
    if (!acq.acquired) throw new Error('A did not acquire');
    const token = { leaseName: NAME, holderId: 'A', leaseEpoch: acq.lease.leaseEpoch };
    let release!: () => void;
    const hold = new Promise<void>((r) => (release = r));
    let fenced!: () => void;
    const fencedNow = new Promise<void>((r) => (fenced = r));
    const write = ctx.fencedHold(a, token, hold, fenced);
    await fencedNow;
    await sleep(450); // the lease is now expired in database time, but A still holds the row lock
    let bDone = false;
    const bAcquire = b.lease.tryAcquire(NAME, 'B', 60_000).then((o) => ((bDone = true), o));
    await sleep(300);
    release();
    const w = await write;
    const bOut = await bAcquire;
    expect(bDone).toBe(true);
    expect(w.kind).toBe('ok');
    expect(bOut.acquired).toBe(true);
    const events = await a.lease.listEvents(NAME);
    const bEvent = events.find((e) => e.leaseEpoch === token.leaseEpoch + 1)!;
    expect(w.kind === 'ok' && w.value).toBeLessThan(bEvent.seq);
    await check();
  });

  it('a fenced transaction after a newer acquire reports leaseLost and writes nothing', async () => {
    const acq = await a.lease.tryAcquire(NAME, 'A', 200);
    if (!acq.acquired) throw new Error('A did not acquire');
    const token = { leaseName: NAME, holderId: 'A', leaseEpoch: acq.lease.leaseEpoch };
    await sleep(300);
    expect((await b.lease.tryAcquire(NAME, 'B', 60_000)).acquired).toBe(true);
    const w = await ctx.fencedHold(a, token, Promise.resolve());
    expect(w).toEqual({ kind: 'leaseLost' });
    expect((await ctx.auditLog()).filter((x) => x.leaseEpoch === token.leaseEpoch)).toEqual([]);
    await check();
  });

  it('a fenced transaction after expiry (nobody acquired yet) reports leaseLost', async () => {
    const acq = await a.lease.tryAcquire(NAME, 'A', 200);
    if (!acq.acquired) throw new Error('A did not acquire');
    await sleep(300);
    const w = await ctx.fencedHold(a, { leaseName: NAME, holderId: 'A', leaseEpoch: acq.lease.leaseEpoch }, Promise.resolve());
    expect(w).toEqual({ kind: 'leaseLost' });
  });

  it('many fenced writers racing many expiries never commit a stale epoch', async () => {
    const holders = [a, b, await ctx.openStores({ poolMax: 2 })];
    for (let round = 0; round < 6; round++) {
      await Promise.all(holders.map(async (s, i) => {
        const out = await s.lease.tryAcquire(NAME, `H${i}`, 150);
        const epoch = out.acquired ? out.lease.leaseEpoch : (out.current?.leaseEpoch ?? 0);
        // Everyone tries to write with the epoch they believe in, some of them stale, some mid-expiry.
        for (let k = 0; k < 3; k++) {
          await ctx.fencedHold(s, { leaseName: NAME, holderId: `H${i}`, leaseEpoch: epoch }, sleep(40 * k).then(() => {}));
        }
      }));
      await sleep(60);
    }
    const audit = await ctx.auditLog();
    expect(audit.length).toBeGreaterThan(0);
    await check();
  });
});
