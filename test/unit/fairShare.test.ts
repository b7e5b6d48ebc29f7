// The fair-share policy of `every-instance` mode (src/lease/fairShare.ts): table-driven decisions, then a simulation —
// N instances and P partitions with leases, heartbeat reports that lag, joins and leaves (graceful and crashed), the
// order of the instances randomized each round by a seeded RNG — that converges to max − min ≤ 1 and stays there, a
// join moving at most ceil(P ÷ live) partitions and a leave moving only the leaver's.
import { describe, expect, it } from 'vitest';
import { decideFairShare, FairShare, INITIAL_FAIR_SHARE_STATE, type FairShareDecision, type FairShareInput, type FairShareOptions,
  type FairShareState } from '../../src/lease/fairShare.js';
import { createRng, type Rng } from '../chaos/rng.js';

const live = (spec: Record<string, number[]>) => Object.entries(spec).map(([holderId, partitions]) => ({ holderId, partitions }));
/** Decide `times` times in a row on the same input (the hysteresis needs repeats). */
function decideTimes(input: FairShareInput, times: number, state: FairShareState = INITIAL_FAIR_SHARE_STATE): FairShareDecision[] {
  const out: FairShareDecision[] = [];
  for (let i = 0; i < times; i++) {
    const r = decideFairShare(input, state);
    out.push(r.decision);
    state = r.state;
  }
  return out;
}

describe('fair share: one decision', () => {
  it.each<[string, FairShareInput, Partial<FairShareDecision>]>([
    ['alone, nothing held: share P, try every partition',
      { partitionCount: 4, self: 'a', held: [], live: live({ a: [] }) }, { liveInstances: 1, share: 4, acquireMax: 4, reason: 'under', handBack: null }],
    ['own row not listed yet: still counted', { partitionCount: 4, self: 'a', held: [], live: [] }, { liveInstances: 1, share: 4, acquireMax: 4 }],
    ['two instances, 5 partitions: share 3', { partitionCount: 5, self: 'a', held: [0], live: live({ a: [0], b: [1, 2] }) },
      { liveInstances: 2, share: 3, acquireMax: 2, reason: 'under' }],
    ['at the share: nothing to take, nothing to give', { partitionCount: 4, self: 'a', held: [0, 1], live: live({ a: [0, 1], b: [2, 3] }) },
      { share: 2, acquire: [], acquireMax: 0, handBack: null, reason: 'balanced' }],
    ['no list: no cap, every partition not held', { partitionCount: 3, self: 'a', held: [1], live: null },
      { liveInstances: 0, share: 3, acquireMax: 2, reason: 'unknown' }],
    ['over the share: first decision only confirms', { partitionCount: 4, self: 'a', held: [0, 1, 2, 3], live: live({ a: [0, 1, 2, 3], b: [] }) },
      { share: 2, handBack: null, reason: 'confirming', acquire: [] }],
    ['a hand-back still draining: nothing else', { partitionCount: 4, self: 'a', held: [0, 1, 2, 3], draining: [3], live: live({ a: [0, 1, 2, 3], b: [] }) },
      { handBack: null, reason: 'draining', acquire: [] }],
    ['above the fewest but not among them: free partitions wait (patience)', { partitionCount: 7, self: 'b', held: [3, 4], live: live({ a: [0, 1, 2], c: [5] }) },
      { share: 3, acquire: [], acquireMax: 0, reason: 'under' }],
  ])('%s', (_name, input, want) => {
    expect(decideFairShare(input).decision).toMatchObject(want);
  });

  it('free partitions are tried before the ones others report, none twice, none held', () => {
    const d = decideFairShare({ partitionCount: 6, self: 'a', held: [0], live: live({ b: [1, 2], c: [3] }) }).decision;
    expect(d.acquire.slice(0, 2).sort()).toEqual([4, 5]);
    expect(d.acquire.slice(2).sort()).toEqual([1, 2, 3]);
    expect(d.acquireMax).toBe(1);
  });

  it('free partitions are dealt out: instances deciding on the same view try different ones first (no collision)', () => {
    // A dead holder's four partitions are free; three survivors hold none: targets 2, 1, 1 in holder-id order.
    const view = live({ a: [], b: [], c: [] });
    const first = (self: string) => {
      const d = decideFairShare({ partitionCount: 4, self, held: [], live: view }).decision;
      return d.acquire.slice(0, d.acquireMax);
    };
    expect([first('a'), first('b'), first('c')]).toEqual([[0, 1], [2], [3]]);
  });

  it('over the share: the highest-numbered partition, on the second decision in a row, then again two decisions later', () => {
    const input = { partitionCount: 4, self: 'a', held: [0, 1, 2, 3], live: live({ a: [0, 1, 2, 3], b: [] }) };
    expect(decideTimes(input, 4).map((d) => [d.reason, d.handBack])).toEqual([['confirming', null], ['over-share', 3], ['confirming', null], ['over-share', 3]]);
  });

  it('a condition that does not hold twice in a row hands nothing back (no thrash on a one-decision flap)', () => {
    const fs = new FairShare();
    const over = { partitionCount: 4, self: 'a', held: [0, 1, 2, 3], live: live({ a: [0, 1, 2, 3], b: [] }) };
    const alone = { ...over, live: live({ a: [0, 1, 2, 3] }) };
    expect([over, alone, over, alone, over].map((i) => fs.decide(i).handBack)).toEqual([null, null, null, null, null]);
  });

  it('imbalanced (3, 3, 1 with nothing free): only the first of those holding the most hands one back', () => {
    const spec = { a: [0, 1, 2], b: [3, 4, 5], c: [6] };
    const of = (self: string) => decideTimes({ partitionCount: 7, self, held: spec[self as keyof typeof spec], live: live(spec) }, 2)[1]!;
    expect(of('a')).toMatchObject({ handBack: 2, reason: 'imbalanced' });
    expect(of('b')).toMatchObject({ handBack: null, reason: 'balanced' });
    expect(of('c')).toMatchObject({ handBack: null, reason: 'under', acquireMax: 1 }); // to floor(7 ÷ 3): a and b hold the one share
  });

  it('imbalanced but a partition is free: nobody hands back (the free one goes to the fewest first)', () => {
    const spec = { a: [0, 1, 2], b: [3, 4, 5], c: [] };
    const d = decideTimes({ partitionCount: 7, self: 'a', held: spec.a, live: live(spec) }, 3);
    expect(d.map((x) => x.handBack)).toEqual([null, null, null]);
    const c = decideFairShare({ partitionCount: 7, self: 'c', held: [], live: live(spec) }).decision;
    expect([c.acquire[0], c.acquireMax]).toEqual([6, 2]);
  });

  it('a partition free for `patience` decisions may be taken by an instance that is not among the fewest', () => {
    const input = { partitionCount: 7, self: 'b', held: [3, 4], live: live({ a: [0, 1, 2], c: [5] }) };
    expect(decideTimes(input, 3).map((d) => d.acquire)).toEqual([[], [], [6]]);
  });

  it('at the share, a partition free for `strandedAfter` decisions, every instance below the share silent, is tried (one); then nothing goes back to them while they stay silent', () => {
    // d's turn (it holds none) but it misses its beats (cut off, its row still live): a, b and c are at their share.
    const fs = new FairShare({ patience: 1 });
    const silentD = { holderId: 'd', partitions: [], silent: true };
    const at = { partitionCount: 4, self: 'a', held: [0], live: [...live({ a: [0], b: [1], c: [2] }), silentD] };
    expect([1, 2, 3].map(() => fs.decide(at)).map((d) => [d.reason, d.acquire.slice(0, d.acquireMax)]))
      .toEqual([['balanced', []], ['stranded', [3]], ['stranded', [3]]]);
    // It took 3: over its share of 1, but the only instance below it is silent: held, however long.
    const over = { ...at, held: [0, 3], live: [...live({ a: [0, 3], b: [1], c: [2] }), silentD] };
    expect(new Set(Array.from({ length: 20 }, () => fs.decide(over)).map((d) => `${d.reason} ${d.handBack}`))).toEqual(new Set(['holding null']));
    // d beats again: the usual confirmation, then the hand-back (to d).
    const back = { ...over, live: live({ a: [0, 3], b: [1], c: [2], d: [] }) };
    expect([fs.decide(back), fs.decide(back)].map((d) => [d.reason, d.handBack])).toEqual([['confirming', null], ['over-share', 3]]);
  });

  it('a silent instance still renewing its leases keeps them claimed: the really free partition is the one dealt', () => {
    // i0 beats late (silent) but its leases of 0 and 1 are live (the lease read lists them); 3 is free after a leave.
    const view = [{ holderId: 'i0', partitions: [0, 1], silent: true }, ...live({ i1: [2] })];
    const d = decideFairShare({ partitionCount: 4, self: 'i1', held: [2], live: view }).decision;
    expect(d.acquire.slice(0, d.acquireMax)).toEqual([3]);
  });

  it('a silent instance is not the fewest an imbalance is judged by: nothing goes back to nobody', () => {
    // 2, 2, 1 and a silent 0 over 5 (share 2): without d nobody is 2 above another.
    const view = [...live({ a: [0, 1], b: [2, 3], c: [4] }), { holderId: 'd', partitions: [], silent: true }];
    expect(decideTimes({ partitionCount: 5, self: 'a', held: [0, 1], live: view }, 3).map((d) => d.reason)).toEqual(['balanced', 'balanced', 'balanced']);
    // The same with d beating: a is the first of those holding the most, 2 above d: one goes back (to d).
    const awake = live({ a: [0, 1], b: [2, 3], c: [4], d: [] });
    expect(decideTimes({ partitionCount: 5, self: 'a', held: [0, 1], live: awake }, 2).map((d) => d.reason)).toEqual(['confirming', 'imbalanced']);
  });

  it('at the share, a partition whose turn is an instance that beats is never taken, however long it stays free', () => {
    const fs = new FairShare({ patience: 1 });
    const at = { partitionCount: 4, self: 'a', held: [0], live: live({ a: [0], b: [1], c: [2], d: [] }) };
    expect(new Set(Array.from({ length: 20 }, () => fs.decide(at).reason))).toEqual(new Set(['balanced']));
    // One of two instances below the share beats (c): it may still take the free partition 5, so nobody at the share does.
    const two = { partitionCount: 6, self: 'a', held: [0, 1], live: [...live({ a: [0, 1], b: [2, 3], c: [4] }), { holderId: 'd', partitions: [], silent: true }] };
    expect(new Set(decideTimes(two, 5).map((d) => d.reason))).toEqual(new Set(['balanced']));
  });

  it('an instance below its share is not held back: it takes at patience, before those at their share', () => {
    const d = decideTimes({ partitionCount: 4, self: 'd', held: [], live: live({ a: [0], b: [1], c: [2], d: [] }) }, 1)[0]!;
    expect([d.reason, d.acquire.slice(0, d.acquireMax)]).toEqual(['under', [3]]);
  });

  it('a failover: one below the share but not the fewest tries first what nobody is dealt, not the fewest one\'s deal', () => {
    // A leader of 0, 1 and 2 is gone (its leases expired, its row too): b holds none, c holds 3; share 2 each.
    for (const [b, c] of [['b', 'c'], ['h1', 'h2'], ['x7', 'y3'], ['s1', 's2']] as const) {
      const spec = { [b]: [] as number[], [c]: [3] };
      const deal = decideFairShare({ partitionCount: 4, self: b, held: [], live: live(spec) }, INITIAL_FAIR_SHARE_STATE, { patience: 1 }).decision;
      const patient = decideFairShare({ partitionCount: 4, self: c, held: [3], live: live(spec) }, INITIAL_FAIR_SHARE_STATE, { patience: 1 }).decision;
      const tries = (d: FairShareDecision) => d.acquire.slice(0, d.acquireMax);
      expect(tries(deal), `${b}`).toEqual([0, 1]);
      expect(tries(patient), `${c}`).toEqual([2]); // all three taken on the same tick
    }
  });

  // Campaign seed 39017: a leader of 0, 1 and 2 cut off, back with none; s0 took 1, s1 holds 3. Free: 0 and 2.
  it('a failover: one below its target but not the fewest takes its own deal on the first decision, beside the fewest', () => {
    const view = live({ s0: [1], s1: [3], s2: [] });
    const first = (self: string, held: number[]) => {
      const d = decideFairShare({ partitionCount: 4, self, held, live: view }).decision; // default patience: 3
      return d.acquire.slice(0, d.acquireMax);
    };
    // Dealt fewest first: s2 (none) gets 0; s0 (below its target of 2, the share slot by holder id) gets 2; s1 is at 1.
    expect([first('s2', []), first('s0', [1]), first('s1', [3])]).toEqual([[0], [2], []]);
  });

  it('a leave of 16 among 4 (64 partitions): the survivors fill to 21, and only the first by holder id to 22', () => {
    const spec = { a: Array.from({ length: 16 }, (_, i) => i), b: Array.from({ length: 16 }, (_, i) => 16 + i), c: Array.from({ length: 16 }, (_, i) => 32 + i) };
    const max = (self: 'a' | 'b' | 'c') => decideFairShare({ partitionCount: 64, self, held: spec[self], live: live(spec) }).decision.acquireMax;
    expect([max('a'), max('b'), max('c')]).toEqual([6, 5, 5]);
  });

  it('partitions outside 0..P−1 in a report or in held are ignored', () => {
    const d = decideFairShare({ partitionCount: 2, self: 'a', held: [0, 7], live: live({ b: [1, 9, -1] }) }).decision;
    expect(d).toMatchObject({ share: 1, reason: 'balanced', handBack: null });
  });
});

describe('fair share: an instance that cannot run every partition (outside the share)', () => {
  // Recorded count 4; `c` runs one partition (EXECUTOR_PARTITIONS=1): its own view has P = 1, and it is not a sharer.
  it.each<[string, FairShareInput, number, Partial<FairShareDecision> & { tried?: number[] }]>([
    ['outside: a partition free for `patience` decisions (3) is not tried yet (a sharer below its share would take it)',
      { partitionCount: 1, self: 'c', held: [], sharing: false, live: live({ a: [1, 2], b: [3] }) }, 3, { acquire: [], acquireMax: 0, reason: 'spare' }],
    ['outside: one free for one decision more is tried',
      { partitionCount: 1, self: 'c', held: [], sharing: false, live: live({ a: [1, 2], b: [3] }) }, 4, { acquire: [0], acquireMax: 1, reason: 'spare' }],
    ['outside: what a sharer leads is never tried', { partitionCount: 1, self: 'c', held: [], sharing: false, live: live({ a: [0, 1], b: [2, 3] }) }, 3,
      { acquire: [], acquireMax: 0, reason: 'spare' }],
    ['outside: holding its one partition with three sharers around, it never hands it back',
      { partitionCount: 1, self: 'c', held: [0], sharing: false, live: live({ a: [1], b: [2], d: [] }) }, 3, { handBack: null, reason: 'spare' }],
    ['sharer: the smaller instance is not counted, so 4 over 3 sharers is share 2 and the free partition is taken',
      { partitionCount: 4, self: 'a', held: [1], live: live({ a: [1], b: [2], d: [3] }) }, 1, { liveInstances: 3, share: 2, tried: [0] }],
    ['sharer: what the smaller instance leads is claimed and not divided: 3 over 3, share 1, nothing to take',
      { partitionCount: 4, self: 'a', held: [1], elsewhere: [0], live: live({ a: [1], b: [2], d: [3] }) }, 1, { share: 1, acquire: [], reason: 'balanced' }],
    ['sharer: 2 sharers, the smaller one leads 0: shares of the 3 others are 2 and 1, and 0 is never tried',
      { partitionCount: 4, self: 'b', held: [], elsewhere: [0], live: live({ a: [1, 2], b: [] }) }, 1, { share: 2, tried: [3] }],
    ['sharer: over the share of what is divided, it hands one back (to the sharer below it)',
      { partitionCount: 4, self: 'a', held: [1, 2, 3], elsewhere: [0], live: live({ a: [1, 2, 3], b: [] }) }, 2, { share: 2, handBack: 3, reason: 'over-share' }],
  ])('%s', (_name, input, times, want) => {
    const d = decideTimes(input, times).at(-1)!;
    expect({ ...d, tried: d.acquire.slice(0, d.acquireMax) }).toMatchObject(want);
    expect(d.acquire.every((x) => x < input.partitionCount && !(input.elsewhere ?? []).includes(x))).toBe(true);
  });
});

// ── Simulation ────────────────────────────────────────────────────────────────────────────────────────────────
interface SimInstance { id: string; fs: FairShare; held: Set<number>; draining: number | null; report: number[];
  /** Partition handed back → the first round it may take it again (PartitionShare's cool-down of two periods). */
  cooling: Map<number, number> }

class Sim {
  owner: (string | null)[];
  /** A crashed holder's leases stay until this round. */
  expires: number[];
  lastHolder: (string | null)[];
  alive = new Map<string, SimInstance>();
  /** Rows of crashed instances still inside the liveness window: id → last round listed. */
  ghosts = new Map<string, { report: number[]; until: number }>();
  round = 0;
  moves = 0;
  handBacks = 0;
  next = 0;
  /** Instances cut off from the database: still listed (their rows live, silent), deciding and acquiring nothing. */
  cut = new Set<string>();

  constructor(readonly p: number, readonly rng: Rng, readonly o = { leaseRounds: 4, windowRounds: 2, reportLag: 0.5 },
    readonly opts: FairShareOptions = {}) {
    this.owner = Array(p).fill(null);
    this.expires = Array(p).fill(0);
    this.lastHolder = Array(p).fill(null);
  }

  join(): string {
    const id = `i${String(this.next++).padStart(2, '0')}`;
    this.alive.set(id, { id, fs: new FairShare(this.opts), held: new Set(), draining: null, report: [], cooling: new Map() });
    return id;
  }

  leave(id: string, crash: boolean): number {
    const inst = this.alive.get(id)!;
    this.alive.delete(id);
    const n = inst.held.size;
    for (const x of inst.held) {
      if (crash) this.expires[x] = this.round + this.o.leaseRounds;
      else this.owner[x] = null;
    }
    if (crash) this.ghosts.set(id, { report: inst.report, until: this.round + this.o.windowRounds });
    return n;
  }

  private free(x: number) {
    const o = this.owner[x] ?? null;
    return o === null || (!this.alive.has(o) && this.round >= this.expires[x]!);
  }

  step() {
    this.round++;
    for (const [id, g] of this.ghosts) if (this.round > g.until) this.ghosts.delete(id);
    const order = [...this.alive.values()];
    for (let i = order.length - 1; i > 0; i--) {
      const j = this.rng.int(0, i);
      [order[i], order[j]] = [order[j]!, order[i]!];
    }
    for (const inst of order) {
      if (this.cut.has(inst.id)) continue;
      if (inst.draining !== null) { // drained since the last round: released now
        inst.held.delete(inst.draining);
        this.owner[inst.draining] = null;
        inst.cooling.set(inst.draining, this.round + 4);
        inst.draining = null;
      }
      const listed = [...[...this.alive.values()].map((x) => ({ holderId: x.id, partitions: x.report, silent: this.cut.has(x.id) })),
        ...[...this.ghosts].map(([holderId, g]) => ({ holderId, partitions: g.report }))];
      const d = inst.fs.decide({ partitionCount: this.p, self: inst.id, held: [...inst.held], live: listed });
      if (d.handBack !== null) {
        expect(inst.held.has(d.handBack)).toBe(true);
        inst.draining = d.handBack;
        this.handBacks++;
      }
      let got = 0;
      for (const x of d.acquire) {
        if (got >= d.acquireMax) break;
        if (!this.free(x) || (inst.cooling.get(x) ?? 0) > this.round) continue;
        this.owner[x] = inst.id;
        inst.held.add(x);
        if (this.lastHolder[x] !== null && this.lastHolder[x] !== inst.id) this.moves++;
        this.lastHolder[x] = inst.id;
        got++;
      }
      // Never above the share by an acquire, but for one stranded partition taken at the share.
      expect(inst.held.size - (inst.draining === null ? 0 : 1)).toBeLessThanOrEqual(Math.max(d.share + (d.reason === 'stranded' ? 1 : 0), inst.held.size - got));
      if (this.rng.chance(1 - this.o.reportLag)) inst.report = [...inst.held];
    }
    // Instances whose report lagged beat at the end of the round.
    for (const inst of this.alive.values()) if (this.rng.chance(0.5)) inst.report = [...inst.held];
  }

  balanced(): boolean {
    const counts = [...this.alive.values()].map((x) => x.held.size);
    const everyOwned = this.owner.every((o, x) => o !== null && this.alive.get(o)?.held.has(x));
    return everyOwned && Math.max(...counts) - Math.min(...counts) <= 1 && [...this.alive.values()].every((x) => x.draining === null);
  }

  /** Step until balanced and then quiet (no move, no hand-back) for `quiet` rounds; the rounds it took. */
  settle(max = 300, quiet = 12): number {
    const start = this.round;
    let calm = 0;
    while (this.round - start < max) {
      const [m, h] = [this.moves, this.handBacks];
      this.step();
      calm = this.balanced() && m === this.moves && h === this.handBacks ? calm + 1 : 0;
      if (calm >= quiet) return this.round - start;
    }
    throw new Error(`not settled in ${max} rounds: ${[...this.alive.values()].map((x) => `${x.id}=${[...x.held]}`).join(' ')}; owners ${this.owner}`);
  }
}

describe('fair share: simulation (seeded)', () => {
  const shapes: [number, number][] = [[1, 1], [1, 3], [2, 2], [3, 2], [4, 3], [5, 2], [7, 3], [8, 4], [9, 4], [10, 3], [16, 5], [64, 3], [64, 6], [3, 5]];

  it.each(shapes)('P=%i, %i instances: start together, then a join, a graceful leave and a crash, 10 seeds each', (p, n) => {
    for (let seed = 1; seed <= 10; seed++) {
      const sim = new Sim(p, createRng(seed * 7919 + p * 31 + n));
      for (let i = 0; i < n; i++) sim.join();
      sim.settle();
      const steady = sim.moves;
      sim.settle(50, 30);
      expect(sim.moves, `seed ${seed}: moves while settled`).toBe(steady);

      // A join moves at most ceil(P ÷ live) partitions, each handed back once.
      const [m0, h0] = [sim.moves, sim.handBacks];
      sim.join();
      sim.settle();
      const share = Math.ceil(p / sim.alive.size);
      expect(sim.moves - m0, `seed ${seed}: moves after a join`).toBeLessThanOrEqual(share);
      expect(sim.handBacks - h0, `seed ${seed}: hand-backs after a join`).toBe(sim.moves - m0);

      // A graceful leave, then a crash: only the leaver's partitions move, nothing is handed back.
      for (const crash of [false, true]) {
        if (sim.alive.size < 2) break;
        const [m1, h1] = [sim.moves, sim.handBacks];
        const ids = [...sim.alive.keys()];
        const leaver = ids[sim.rng.int(0, ids.length - 1)]!;
        const had = sim.leave(leaver, crash);
        sim.settle();
        expect(sim.moves - m1, `seed ${seed}: moves after ${crash ? 'a crash' : 'a leave'} of ${leaver} (held ${had})`).toBe(had);
        expect(sim.handBacks - h1, `seed ${seed}: hand-backs after a leave`).toBe(0);
      }
    }
  });

  it('an instance cut off with its row still live: a partition whose turn is its own is led again within a few rounds, and balance returns once it is back', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const sim = new Sim(4 + (seed % 5), createRng(seed * 131), undefined, { patience: 1 });
      for (let i = 0; i < 4; i++) sim.join();
      sim.settle();
      // The victim gives up what it holds and is cut off: listed with nothing, never acquiring.
      const victim = [...sim.alive.keys()][seed % 4]!;
      const inst = sim.alive.get(victim)!;
      for (const x of inst.held) sim.owner[x] = null;
      inst.held.clear();
      inst.report = [];
      sim.cut.add(victim);
      const freeFor = Array(sim.p).fill(0);
      const [m0, had] = [sim.moves, sim.owner.filter((o) => o === null).length];
      for (let r = 0; r < 40; r++) {
        sim.step();
        sim.owner.forEach((o, x) => { freeFor[x] = o === null ? freeFor[x] + 1 : 0; });
        expect(Math.max(...freeFor), `seed ${seed}, round ${r}: a partition free that long`).toBeLessThanOrEqual(4);
      }
      // Each partition it gave up moved once: held while it stays silent, not bounced between those at their share.
      expect(sim.moves - m0, `seed ${seed}: moves while ${victim} is cut off`).toBe(had);
      sim.cut.delete(victim);
      sim.settle();
      expect(sim.balanced()).toBe(true);
    }
  });

  it('a join of several at once and the leave of half: still max − min ≤ 1 and every partition owned', () => {
    for (let seed = 1; seed <= 20; seed++) {
      const sim = new Sim(16, createRng(seed));
      sim.join();
      sim.settle();
      for (let i = 0; i < 4; i++) sim.join();
      sim.settle();
      for (const id of [...sim.alive.keys()].slice(0, 2)) sim.leave(id, seed % 2 === 0);
      sim.settle();
      expect(sim.balanced()).toBe(true);
    }
  });
});
