// The fair share with instances of different EXECUTOR_PARTITIONS (src/lease/fairShare.ts), simulated in rounds as
// PartitionShare feeds it: an instance shares only when it can run every partition of the recorded count (else it
// is outside: `sharing: false`, its view limited to the partitions it runs), the live list holds the sharers, and
// what an instance outside leads is `elsewhere` to the sharers. Judged: every partition some live instance can run
// is led once settled, nobody ever tries a partition it cannot run, the instances outside never hand back, and the
// sharers stay within one of each other — across crashes, graceful leaves and the recorded count shrinking and growing.
import { describe, expect, it } from 'vitest';
import { FairShare } from '../../src/lease/fairShare.js';
import { createRng, type Rng } from '../chaos/rng.js';

interface Inst { id: string; cap: number; fs: FairShare; held: Set<number>; draining: number | null }

class CapSim {
  owner = new Map<number, string>();
  /** Leases of crashed holders: valid until this round. */
  crashedUntil = new Map<string, number>();
  alive = new Map<string, Inst>();
  round = 0;
  next = 0;

  constructor(public count: number, readonly rng: Rng) {}

  join(cap: number): string {
    const id = `i${this.next++}`;
    this.alive.set(id, { id, cap, fs: new FairShare({ patience: 1 }), held: new Set(), draining: null });
    return id;
  }

  leave(id: string, crash: boolean): void {
    const inst = this.alive.get(id)!;
    this.alive.delete(id);
    if (crash) this.crashedUntil.set(id, this.round + 3);
    else for (const x of inst.held) this.owner.delete(x);
  }

  /** A change of the recorded count: every lease is taken by the change, then freed (nobody leads meanwhile). */
  recount(count: number): void {
    this.count = count;
    this.owner.clear();
    for (const i of this.alive.values()) { i.held.clear(); i.draining = null; }
  }

  private holder(x: number): string | null {
    const o = this.owner.get(x);
    if (o === undefined) return null;
    if (this.alive.has(o) || (this.crashedUntil.get(o) ?? 0) > this.round) return o;
    this.owner.delete(x);
    return null;
  }

  step(): void {
    this.round++;
    const order = [...this.alive.values()];
    for (let i = order.length - 1; i > 0; i--) {
      const j = this.rng.int(0, i);
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    for (const inst of order) {
      if (inst.draining !== null) {
        inst.held.delete(inst.draining);
        this.owner.delete(inst.draining);
        inst.draining = null;
      }
      const p = Math.min(this.count, inst.cap);
      const sharers = [...this.alive.values()].filter((i) => i.cap >= this.count).map((i) => i.id);
      const holders = Array.from({ length: p }, (_, x) => this.holder(x));
      const d = inst.fs.decide({ partitionCount: p, self: inst.id, held: [...inst.held], sharing: inst.cap >= this.count,
        live: sharers.map((holderId) => ({ holderId, partitions: holders.flatMap((h, x) => (h === holderId ? [x] : [])) })),
        elsewhere: holders.flatMap((h, x) => (h !== null && h !== inst.id && !sharers.includes(h) ? [x] : [])) });
      expect(d.acquire.every((x) => x < inst.cap), `${inst.id} (runs ${inst.cap}) tries ${d.acquire}`).toBe(true);
      if (d.handBack !== null) {
        expect(inst.cap, `${inst.id} outside the share hands back`).toBeGreaterThanOrEqual(this.count);
        inst.draining = d.handBack;
      }
      let got = 0;
      for (const x of d.acquire) {
        if (got >= d.acquireMax) break;
        if (this.holder(x) !== null) continue;
        this.owner.set(x, inst.id);
        inst.held.add(x);
        got++;
      }
    }
  }

  /** Every partition that a live instance can run is led by a live instance; the sharers within one of each other. */
  settled(): boolean {
    const canRun = Math.min(this.count, Math.max(0, ...[...this.alive.values()].map((i) => i.cap)));
    const led = Array.from({ length: canRun }, (_, x) => this.owner.get(x)).every((o) => o !== undefined && this.alive.has(o));
    const counts = [...this.alive.values()].filter((i) => i.cap >= this.count).map((i) => i.held.size);
    return led && (counts.length === 0 || Math.max(...counts) - Math.min(...counts) <= 1);
  }

  settle(what: string, max = 60): void {
    let calm = 0;
    for (let r = 0; r < max; r++) {
      this.step();
      calm = this.settled() ? calm + 1 : 0;
      if (calm >= 10) return;
    }
    throw new Error(`${what}: not settled in ${max} rounds (count ${this.count}): ${[...this.alive.values()]
      .map((i) => `${i.id}(runs ${i.cap})=${[...i.held]}`).join(' ')}; owners ${[...this.owner].join(' ')}`);
  }
}

describe('fair share with instances of different EXECUTOR_PARTITIONS (seeded simulation)', () => {
  it.each<[string, number, number[]]>([
    ['4 partitions; three run 4, one runs 1', 4, [4, 4, 4, 1]],
    ['4 partitions; two run 4, one runs 1', 4, [4, 4, 1]],
    ['4 partitions; one runs 4, two run 1', 4, [4, 1, 1]],
    ['4 partitions; one runs 2, one runs 1 (nobody runs 2 and 3)', 4, [2, 1]],
    ['8 partitions; two run 8, one runs 4, one runs 1', 8, [8, 8, 4, 1]],
  ])('%s: settled at start, after a crash and a leave, and after the count shrinks to 1 and grows back', (_n, count, caps) => {
    for (let seed = 1; seed <= 10; seed++) {
      const sim = new CapSim(count, createRng(seed * 104_729 + count));
      const ids = caps.map((c) => sim.join(c));
      sim.settle(`seed ${seed} start`);
      sim.leave(ids[0]!, true);
      sim.settle(`seed ${seed} after a crash`);
      if (ids.length > 2) {
        sim.leave(ids[1]!, false);
        sim.settle(`seed ${seed} after a leave`);
      }
      sim.join(caps[0]!);
      sim.settle(`seed ${seed} after a join`);
      sim.recount(1);
      sim.settle(`seed ${seed} after the count shrank to 1`);
      sim.recount(count);
      sim.settle(`seed ${seed} after the count grew back to ${count}`);
    }
  });

  it('the smaller instance started first keeps its partition; the others divide the rest without trying it', () => {
    const sim = new CapSim(4, createRng(7));
    const small = sim.join(1);
    sim.settle('alone');
    expect(sim.owner.get(0)).toBe(small);
    sim.join(4);
    sim.join(4);
    sim.join(4);
    sim.settle('joined');
    expect(sim.owner.get(0)).toBe(small);
    expect([...sim.alive.values()].filter((i) => i.cap === 4).map((i) => i.held.size)).toEqual([1, 1, 1]);
  });
});
