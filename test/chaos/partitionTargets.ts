// Issue 25: who leads which partition, and the victim of a fault aimed at "the leader" when there are several
// partitions (--partitions N > 1): the leader of one partition, drawn among the led ones; the fault records every
// partition that instance led, so its resumes are judged on them and the other partitions must not pause.
import type { ChaosCluster, Slot } from './cluster.js';
import type { Rng } from './rng.js';

export interface PartitionLeaders {
  /** The live, running leader of each partition (index = partition), or null. */
  leaders: ({ slot: Slot; epoch: number } | null)[];
  /** The partitions a slot leads. */
  of(slot: Slot): number[];
}

/** The leader of each partition (lease names `leaseNames`), waiting up to `timeoutMs` until at least `atLeast` are
 *  led; null when fewer are. */
export async function partitionLeaders(cluster: ChaosCluster, leaseNames: string[], timeoutMs: number, atLeast = 1): Promise<PartitionLeaders | null> {
  const end = Date.now() + timeoutMs;
  do {
    const all = await cluster.leases();
    const leaders = leaseNames.map((n) => {
      const l = all?.get(n);
      const slot = l?.live ? cluster.slots.find((s) => s.holderId === l.holderId && s.host && !s.stopped) : undefined;
      return slot ? { slot, epoch: l!.epoch } : null;
    });
    if (leaders.filter((x) => x).length >= atLeast) return { leaders, of: (s) => leaders.flatMap((l, p) => (l?.slot === s ? [p] : [])) };
    await new Promise((r) => setTimeout(r, 100));
  } while (Date.now() < end);
  return null;
}

export interface PartitionVictim {
  slot: Slot | null;
  /** The victim as "the leader" when it leads something (epoch: the drawn partition's, when it leads that one); else
   *  the drawn partition's leader (another instance), or null. */
  leader: { slot: Slot; epoch: number } | null;
  partitions: number[];
}

/** The victim of a fault: with `needsLeader` the leader of a drawn partition, else that leader 75 % of the time and
 *  a live instance otherwise (as with one partition); none for a database restart. `everyPartition`: a fault on the
 *  database itself (restart, lease table lock, stalled completions), which hits every partition's leader at once. */
export function pickPartitionVictim(o: { led: PartitionLeaders | null; count: number; rng: Rng; live: Slot[]; needsLeader: boolean; noVictim: boolean; everyPartition: boolean }): PartitionVictim {
  const { led, rng } = o;
  const ledPartitions = led ? led.leaders.flatMap((l, p) => (l ? [p] : [])) : [];
  const p = ledPartitions.length ? rng.pick(ledPartitions) : null;
  const leader = p === null ? null : led!.leaders[p]!;
  const slot: Slot | null = o.noVictim ? null : o.needsLeader || (leader && rng.chance(0.75)) ? leader!.slot : rng.pick(o.live);
  const mine = slot && led ? led.of(slot) : [];
  const partitions = o.everyPartition || !slot ? Array.from({ length: o.count }, (_, k) => k) : mine;
  return {
    slot, partitions,
    leader: slot && mine.length ? { slot, epoch: led!.leaders[p !== null && mine.includes(p) ? p : mine[0]!]!.epoch } : leader,
  };
}
