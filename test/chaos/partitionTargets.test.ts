// Issue 25: a fault aimed at "the leader" with partitions hits the leader of one drawn partition and records every
// partition that instance led; a database-wide fault records all; a follower none.
import { describe, expect, it } from 'vitest';
import { pickPartitionVictim, type PartitionLeaders } from './partitionTargets.js';
import { createRng } from './rng.js';
import type { Slot } from './cluster.js';

const slot = (index: number) => ({ index, holderId: `h${index}` }) as unknown as Slot;
const [s0, s1, s2] = [slot(0), slot(1), slot(2)];
// s0 leads partitions 0 and 2 (epochs 5 and 7), s1 leads 1 (epoch 3), partition 3 has no leader, s2 leads nothing.
const leaders = [{ slot: s0, epoch: 5 }, { slot: s1, epoch: 3 }, { slot: s0, epoch: 7 }, null];
const led: PartitionLeaders = { leaders, of: (s) => leaders.flatMap((l, p) => (l?.slot === s ? [p] : [])) };
const base = { led, count: 4, live: [s0, s1, s2], needsLeader: true, noVictim: false, everyPartition: false };

describe('partition fault targets', () => {
  it('a leader-aimed fault hits the leader of a drawn partition and records all the partitions that instance leads', () => {
    const seen = new Map<number, number[]>();
    for (let seed = 1; seed <= 40; seed++) {
      const v = pickPartitionVictim({ ...base, rng: createRng(seed) });
      expect(v.leader?.slot).toBe(v.slot);
      seen.set(v.slot!.index, v.partitions);
    }
    expect(seen).toEqual(new Map([[0, [0, 2]], [1, [1]]])); // never s2, never the unled partition 3
  });

  it('a fault on the database records every partition; one on a follower none', () => {
    const restart = pickPartitionVictim({ ...base, rng: createRng(1), noVictim: true, everyPartition: true });
    expect(restart).toMatchObject({ slot: null, partitions: [0, 1, 2, 3] });
    const lock = pickPartitionVictim({ ...base, rng: createRng(1), everyPartition: true });
    expect(lock.partitions).toEqual([0, 1, 2, 3]);
    const followers = [...Array(60).keys()].map((seed) => pickPartitionVictim({ ...base, rng: createRng(seed), needsLeader: false }))
      .filter((v) => v.slot === s2);
    expect(followers.length).toBeGreaterThan(0);
    for (const v of followers) expect(v).toMatchObject({ partitions: [] }); // and not "the leader"
    for (const v of followers) expect(v.leader?.slot).not.toBe(s2);
  });
});
