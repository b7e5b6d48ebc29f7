// The spec's five acceptance tests, in process, with 3 instances (distinct holder ids, own connections)
// against each dialect, and a real HTTP provider.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectWithProvider } from '../support/dialectFixture.js';
import type { RecordingProvider } from '../support/recordingProvider.js';
import { LEASE_NAME, runTicks, startInstances, submit, type TestInstance } from '../support/instances.js';
import { staleWrites } from '../support/fenceChecker.js';
import { dbTextToDate, describePickup, MAX_READS_BEFORE_START, readsBetween, recordRefreshReads } from '../support/pickup.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(dialects)('executor spec tests: $name', (dialect) => {
  let ctx: DialectContext;
  let provider: RecordingProvider;
  let inst: TestInstance[];
  useDialectWithProvider(dialect, async (fresh, started) => {
    ctx = fresh;
    provider = started;
    inst = await startInstances(ctx, 3, { providerUrl: provider.url, leaseMs: 1_500 });
  });

  const allSucceeded = (n: number) => async () => {
    const s = Object.entries(await ctx.statusCounts());
    return s.length === 1 && s[0]![0] === 'succeeded' && s[0]![1] === n;
  };
  const noStaleWrites = async () =>
    expect(staleWrites(await ctx.auditLog(), await inst[0]!.stores.lease.listEvents(LEASE_NAME))).toEqual([]);

  it('1. single leader on concurrent start; only it executes', async () => {
    const summaries = await Promise.all(inst.map((i) => i.executor.tick(300)));
    expect(summaries.filter((s) => s.role === 'leader')).toHaveLength(1);
    // Ticking on while the intents arrive: the leader keeps its lease (submitted first, a loaded runner could take
    // longer than the lease, and a follower would rightly take over).
    const ticking = runTicks(inst, allSucceeded(20));
    for (let k = 0; k < 20; k++) await submit(inst[k % 3]!.stores, { k });
    await ticking;
    const leader = summaries.find((s) => s.role === 'leader')!;
    const attempts = await ctx.attemptRows();
    // Judged by the lease's own record: the leader elected at the start holds the first epoch, and every attempt
    // and call ran under an epoch its holder acquired. A later epoch exists only where that lease lapsed (a runner
    // starved for longer than the 1.5 s lease misses its renewals; the new acquire is the store's proof it had
    // ended), and then it is the one leader it records.
    const acquired = (await inst[0]!.stores.lease.listEvents(LEASE_NAME)).filter((e) => e.event === 'acquired');
    expect(acquired[0]).toMatchObject({ holderId: leader.holderId, leaseEpoch: leader.leaseEpoch });
    const holderOf = new Map(acquired.map((e) => [e.leaseEpoch, e.holderId]));
    for (const a of attempts) expect(holderOf.get(a.leaseEpoch), `attempt of epoch ${a.leaseEpoch}`).toBe(a.holderId);
    for (const c of provider.calls) expect(holderOf.has(c.leaseEpoch), `call of epoch ${c.leaseEpoch}`).toBe(true);
    if (acquired.length === 1) {
      expect(new Set(attempts.map((a) => a.holderId))).toEqual(new Set([leader.holderId]));
      expect(new Set(attempts.map((a) => a.leaseEpoch))).toEqual(new Set([leader.leaseEpoch]));
    } else console.log(`[spec 1] the lease lapsed under load: epochs ${JSON.stringify(acquired.map((e) => [e.leaseEpoch, e.holderId]))}`);
    await noStaleWrites();
  });

  it('2. failover after expiry: a follower becomes leader and executes', async () => {
    const first = await Promise.all(inst.map((i) => i.executor.tick(200)));
    const leaderIdx = first.findIndex((s) => s.role === 'leader');
    const survivors = inst.filter((_, i) => i !== leaderIdx); // the leader "crashes": no more ticks
    // The crashed leader's row as it left it: its expiry is a database time.
    const crashed = (await inst[0]!.stores.lease.get(LEASE_NAME))!;
    expect(crashed.leaseEpoch).toBe(first[leaderIdx]!.leaseEpoch);
    await submit(survivors[0]!.stores, { after: 'crash' });
    await runTicks(survivors, allSucceeded(1), 20_000, 300); // a liveness guard: when is judged below, on database times
    const newEpochs = new Set(provider.calls.map((c) => c.leaseEpoch));
    expect(newEpochs.has(first[leaderIdx]!.leaseEpoch!)).toBe(false);
    const events = await inst[0]!.stores.lease.listEvents(LEASE_NAME);
    expect(events.filter((e) => e.event === 'acquired').map((e) => e.leaseEpoch)).toEqual([1, 2]);
    // Not before the old lease ended (database times): epoch 2 was acquired once the row expired, or once the old
    // leader, its ticks stopped, handed it back at its local deadline (in process its timers still run).
    const released = events.find((e) => e.event === 'released' && e.leaseEpoch === 1);
    const next = events.find((e) => e.event === 'acquired' && e.leaseEpoch === 2)!;
    if (released) expect(released.seq).toBeLessThan(next.seq);
    expect(next.at.getTime()).toBeGreaterThanOrEqual(Math.min(released?.at.getTime() ?? Infinity, crashed.expiresAt.getTime()));
    await noStaleWrites();
  });

  it('3. no execution without leadership: followers never call the provider or write attempts', async () => {
    const first = await Promise.all(inst.map((i) => i.executor.tick(100)));
    const followers = inst.filter((_, i) => first[i]!.role === 'follower');
    const leader = inst.find((_, i) => first[i]!.role === 'leader')!;
    expect(followers).toHaveLength(2);
    // The leader only renews (it would execute if it ticked), every 300 ms, so its lease stays held however slow the
    // runner: the followers see a live leader throughout.
    let renewing = true;
    const renews = (async () => {
      while (renewing) {
        expect(await leader.lease.renew()).toBe(true);
        await sleep(300);
      }
    })();
    try {
      for (let k = 0; k < 10; k++) await submit(followers[0]!.stores, { k });
      for (let r = 0; r < 5; r++) {
        const sums = await Promise.all(followers.map((f) => f.executor.tick(100)));
        expect(sums.every((s) => s.role === 'follower' && s.started === 0)).toBe(true);
      }
    } finally {
      renewing = false;
      await renews;
    }
    expect(provider.calls).toHaveLength(0);
    expect(await ctx.attemptRows()).toHaveLength(0);
    expect(followers.every((f) => f.executor.refresher.schedule.size === 0)).toBe(true); // followers build no schedule
  });

  it('4. the leader stops immediately on lease loss (lease stolen in SQL mid-batch)', async () => {
    provider.answer = () => ({ status: 200, delayMs: 150 });
    const leader = inst[0]!;
    expect((await leader.executor.tick(50)).role).toBe('leader');
    for (let k = 0; k < 60; k++) await submit(leader.stores, { k });
    const tick = leader.executor.tick(5_000);
    await provider.waitFor((c) => c.length >= 5);
    // Another instance takes the lease behind the leader's back (as after a pause), with its event.
    await ctx.stealLease(LEASE_NAME, 'thief');
    const sum = await tick;
    expect(sum.leaseLost).toBe(true);
    expect(leader.lease.requireLeader()).toBeNull();
    // Nothing started after the theft (database time: the fenced START is refused), and every call sent belongs to
    // an attempt started before it; of the 60, the rest were never sent.
    const stolen = (await leader.stores.lease.listEvents(LEASE_NAME)).find((e) => e.holderId === 'thief')!;
    const rows = await ctx.attemptRows();
    expect(rows.filter((a) => a.startedAt >= stolen.at)).toEqual([]);
    for (const c of provider.calls) expect(rows.some((a) => a.intentId === c.intentId && a.attemptNo === c.attemptNo)).toBe(true);
    expect(provider.calls.length).toBeLessThan(60);
    expect(leader.executor.refresher.schedule.size).toBe(0); // schedule dropped
    await noStaleWrites();
    const after = await Promise.all(inst.map((i) => i.executor.tick(50)));
    expect(after.every((s) => s.role === 'follower')).toBe(true);
  });

  // Judged by the leader's own record (test/support/pickup.ts), not by a wall-clock lag.
  it('5. a follower-submitted intent is started by the first refresh that began after its commit', async () => {
    const leaderIdx = (await Promise.all(inst.map((i) => i.executor.tick(50)))).findIndex((s) => s.role === 'leader');
    const leader = inst[leaderIdx]!;
    const follower = inst[(leaderIdx + 1) % 3]!;
    const reads = recordRefreshReads(leader.executor.refresher);
    const tick = leader.executor.tick(3_000);
    await sleep(300);
    const intent = await submit(follower.stores, { via: 'follower' });
    const committedBy = dbTextToDate(await ctx.dbNowText());
    await provider.waitFor((c) => c.some((x) => x.intentId === intent.intentId), 10_000);
    const startedAt = (await ctx.attemptRows()).find((a) => a.intentId === intent.intentId)!.startedAt;
    const between = readsBetween(reads, committedBy, startedAt);
    expect(between.length, describePickup(intent.intentId, committedBy, startedAt, between)).toBeLessThanOrEqual(MAX_READS_BEFORE_START);
    expect(reads.length).toBeGreaterThan(0);
    await tick;
  });
});
