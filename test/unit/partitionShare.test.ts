// PartitionShare (src/lease/partitionShare.ts): the fair share's owner per app. Decides at most once per half period,
// on a live list no older than a heartbeat (read again first), allows only the decision's first acquireMax
// candidates (partition timers ticking at once never overshoot), and hands one partition back locally, cancelled
// when the lease goes first.
import { describe, expect, it } from 'vitest';
import { PartitionShare } from '../../src/lease/partitionShare.js';
import { silentLogger } from '../../src/observability/logger.js';
import type { LeadershipChange } from '../../src/lease/leaseManager.js';
import type { LiveInstance } from '../../src/lease/fairShare.js';
import type { Clock } from '../../src/lease/clock.js';

const PERIOD = 1_000;

function rig(p: number, held: number[], live: LiveInstance[], recorded = p) {
  let now = 0;
  const clock = { nowMs: () => now } as unknown as Clock;
  const leading = new Set(held);
  const listeners: ((c: LeadershipChange) => void)[][] = Array.from({ length: p }, () => []);
  const leases = Array.from({ length: p }, (_, k) => ({
    requireLeader: () => (leading.has(k) ? { leaseName: `L#${k}`, holderId: 'me', leaseEpoch: 1 } : null),
    onChange: (fn: (c: LeadershipChange) => void) => { listeners[k]!.push(fn); return () => {}; },
  }));
  let listedAt = 0;
  let beats = 0;
  const heartbeat = {
    live,
    liveSharers: () => heartbeat.live,
    listAgeMs: () => now - listedAt,
    beat: async () => { beats++; listedAt = now; },
  };
  const requested: number[] = [];
  const cancelled: number[] = [];
  const holders: { value: ({ holderId: string; expiresInMs: number } | null)[] | null } = { value: null };
  const share = new PartitionShare(leases, () => recorded, heartbeat, { request: (k) => requested.push(k), cancel: (k) => cancelled.push(k) },
    'me', PERIOD, 300, async () => {
      if (!holders.value) throw new Error('no lease read');
      return holders.value;
    }, clock, silentLogger);
  return {
    share, heartbeat, requested, cancelled, holders,
    get beats() { return beats; },
    advance: (ms: number) => { now += ms; },
    lose: (k: number) => {
      leading.delete(k);
      for (const fn of listeners[k]!) fn({ kind: 'lost', reason: 'released', token: { leaseName: `L#${k}`, holderId: 'me', leaseEpoch: 1 } } as LeadershipChange);
    },
  };
}

describe('PartitionShare', () => {
  it('alone (no other sharer): every partition may be tried', async () => {
    const r = rig(4, [], [{ holderId: 'me', partitions: [] }]);
    await r.share.onTick();
    expect([0, 1, 2, 3].filter((k) => r.share.mayAcquire(k))).toHaveLength(4);
  });

  it('only the decision\'s first acquireMax candidates: timers ticking at once cannot take more than the share', async () => {
    // Two sharers, nothing held: share 2 each; the other holds nothing yet either.
    const r = rig(4, [], [{ holderId: 'me', partitions: [] }, { holderId: 'zz', partitions: [] }]);
    await r.share.onTick();
    const allowed = [0, 1, 2, 3].filter((k) => r.share.mayAcquire(k));
    expect(allowed.length).toBeGreaterThanOrEqual(1);
    expect(allowed.length).toBeLessThanOrEqual(2);
  });

  it('a silent sharer whose turn a free partition is: one at its share may try it on its second decision', async () => {
    const view = [{ holderId: 'me', partitions: [] }, { holderId: 'b', partitions: [] }, { holderId: 'c', partitions: [] },
      { holderId: 'd', partitions: [], silent: true }];
    const r = rig(4, [0], view);
    r.holders.value = [{ holderId: 'me', expiresInMs: 2_000 }, { holderId: 'b', expiresInMs: 2_000 }, { holderId: 'c', expiresInMs: 2_000 }, null];
    await r.share.onTick();
    expect(r.share.mayAcquire(3)).toBe(false);
    r.advance(PERIOD / 2);
    await r.share.onTick();
    expect(r.share.mayAcquire(3)).toBe(true);
  });

  it('a stale live list is read again before deciding; a fresh decision is reused for half a period', async () => {
    const r = rig(2, [], [{ holderId: 'me', partitions: [] }]);
    r.advance(500); // list 500 ms old > 300 ms
    await r.share.onTick();
    expect(r.beats).toBe(1);
    await r.share.onTick(); // same decision (within half a period): no read
    expect(r.beats).toBe(1);
    r.advance(PERIOD / 2);
    await r.share.onTick();
    expect(r.beats).toBe(2);
  });

  it('what others lead is judged by the leases: a dead instance\'s row still claiming partitions does not hold them back', async () => {
    // 4 partitions over me [3], b [2] and 'dead', whose row is still in the live window claiming 0 and 1: by the rows
    // they stay claimed (nobody takes them until the row ages out); by the leases they are free and, once seen free
    // for the policy's patience (3 decisions), taken.
    const live = [{ holderId: 'me', partitions: [3] }, { holderId: 'b', partitions: [2] }, { holderId: 'dead', partitions: [0, 1] }];
    const decide = async (r: ReturnType<typeof rig>) => {
      r.advance(PERIOD / 2);
      await r.share.onTick();
      return [0, 1].filter((k) => r.share.mayAcquire(k));
    };
    const byRows = rig(4, [3], live);
    for (let i = 0; i < 5; i++) expect(await decide(byRows)).toEqual([]);
    const byLeases = rig(4, [3], live);
    byLeases.holders.value = [null, null, { holderId: 'b', expiresInMs: 60_000 }, { holderId: 'me', expiresInMs: 60_000 }];
    const seen: number[][] = [];
    for (let i = 0; i < 5; i++) seen.push(await decide(byLeases));
    expect(seen.some((a) => a.length > 0), JSON.stringify(seen)).toBe(true);
  });

  it('a foreign lease running out makes the next tick decide afresh (a dead leader\'s partition is taken at once)', async () => {
    // 'dead' leads partition 0 and is still in the live list: balanced, nothing to take.
    const r = rig(2, [1], [{ holderId: 'me', partitions: [1] }, { holderId: 'dead', partitions: [0] }]);
    r.holders.value = [{ holderId: 'dead', expiresInMs: 200 }, { holderId: 'me', expiresInMs: 60_000 }];
    await r.share.onTick();
    expect(r.share.mayAcquire(0)).toBe(false);
    // Its row left the live window and its lease ran out: the first tick past the expiry decides again and takes it,
    // well inside half a period.
    r.heartbeat.live = [{ holderId: 'me', partitions: [1] }];
    r.holders.value = [null, { holderId: 'me', expiresInMs: 60_000 }];
    r.advance(150);
    await r.share.onTick();
    expect(r.share.mayAcquire(0), 'before the foreign lease ran out: the last decision stands').toBe(false);
    r.advance(100);
    await r.share.onTick();
    expect(r.share.mayAcquire(0)).toBe(true);
  });

  it('above its share: hands one partition back (after the confirming decision), once; cancelled if the lease goes first', async () => {
    const r = rig(4, [0, 1, 2, 3], [{ holderId: 'me', partitions: [0, 1, 2, 3] }, { holderId: 'zz', partitions: [] }]);
    await r.share.onTick(); // confirming
    expect(r.requested).toEqual([]);
    r.advance(PERIOD / 2);
    await r.share.onTick();
    expect(r.requested).toEqual([3]);
    r.advance(PERIOD / 2);
    await r.share.onTick(); // draining: nothing more
    expect(r.requested).toEqual([3]);
    expect([0, 1, 2, 3].some((k) => r.share.mayAcquire(k))).toBe(false);
    r.lose(3);
    expect(r.cancelled).toEqual([3]);
    // Handed back: not re-taken by this instance for two periods, even when the policy would let it.
    r.heartbeat.live = [{ holderId: 'me', partitions: [0, 1, 2] }];
    r.advance(PERIOD / 2);
    await r.share.onTick();
    expect(r.share.mayAcquire(3)).toBe(false);
    r.advance(2 * PERIOD);
    await r.share.onTick();
    expect(r.share.mayAcquire(3)).toBe(true);
  });

  it('a process running fewer partitions than recorded is outside the share: it takes only what stayed free', async () => {
    // Recorded count 4; this process runs 1 (EXECUTOR_PARTITIONS=1); three sharers lead 1, 2 and 3, partition 0 is free.
    const sharers = [{ holderId: 'a', partitions: [1] }, { holderId: 'b', partitions: [2] }, { holderId: 'c', partitions: [3] }];
    const r = rig(1, [], sharers, 4);
    r.holders.value = [null];
    expect(r.share.sharing()).toBe(false);
    const seen: boolean[] = [];
    for (let i = 0; i < 3; i++) {
      await r.share.onTick();
      seen.push(r.share.mayAcquire(0));
      r.advance(PERIOD / 2);
    }
    expect(seen, 'free on one decision: left to the sharers; on the next: taken').toEqual([false, true, true]);
    expect(r.share.claimsShare(), 'outside the share: never claims it').toBe(false);
    // A single-partition process inside the share (the count shrank to 1) is not gated at all; its row claims the
    // share from its first tick (one beat then, none after).
    const one = rig(1, [], sharers, 1);
    await one.share.onTick();
    await one.share.onTick();
    expect([one.share.sharing(), one.share.mayAcquire(0), one.share.claimsShare(), one.beats]).toEqual([true, true, true, 1]);
  });

  it('claims its place in the share only from its first tick, and beats at once then', async () => {
    const r = rig(4, [], [{ holderId: 'a', partitions: [0, 1] }]);
    r.holders.value = [{ holderId: 'a', expiresInMs: 3_000 }, { holderId: 'a', expiresInMs: 3_000 }, null, null];
    r.advance(100); // the start's beat is fresh: no beat is due for the list's age
    expect(r.share.claimsShare(), 'started, no timer fired: not claimed').toBe(false);
    await r.share.onTick();
    expect([r.share.claimsShare(), r.beats]).toEqual([true, 1]);
    r.advance(100);
    await r.share.onTick();
    expect(r.beats, 'only the first tick beats for the claim').toBe(1);
  });
});
