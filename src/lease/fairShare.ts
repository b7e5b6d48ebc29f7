// Fair share of the partitions in `every-instance` timer mode (issue 25): every instance tries every partition, but
// takes at most share = ceil(P ÷ live instances), and one above its share hands ONE partition back per decision
// through the handover path (drain, then release) — never stealing: a partition moves only after its holder let it go.
// Pure: no SQL, no clock. The live instances come from the heartbeat rows (store/instancePorts.ts), each with the
// partitions it reported leading; this instance's own holdings are what it knows, not what its row says.
//
// Hand back the highest-numbered partition held when held > share, or when held − the fewest any other live instance
// holds ≥ 2, nothing is free and this instance is the first (by holder id) of those holding the most — only once that
// held on `confirmations` consecutive decisions (default 2; hysteresis). Free partitions are dealt out to the instances
// below their target — floor(P ÷ n), the share for the first P mod n by holder id — those holding fewest first, and
// each tries its own deal at once (the own deals of one view never collide, so a failed leader's partitions go to
// the instances below their target on one tick); the fewest also try the rest; one free for `patience` decisions
// (default 3) may be taken by any instance below its share.
//
// A silent instance (its row older than two heartbeats at the read: cut off from the database, the row still live
// until the window drops it) is counted in the share but nothing waits for it: free partitions are dealt to the
// others, it is not the fewest an imbalance is judged against, one free for `strandedAfter` decisions (default
// patience + 1) while every instance below its share is silent is taken by an instance at its share, and none is
// handed back while they stay silent (it would go to nobody). An instance whose beats come within two heartbeats keeps
// its turn. Converges to max − min ≤ 1 (test/unit/fairShare.test.ts simulates joins, leaves and a cut-off instance).
// With no list (the heartbeat never read, or its read is older than the liveness window) there is no cap: the lease
// alone keeps execution single.
//
// Only instances that can run every partition of the recorded count and whose timers run share (role `fair-share`,
// EXECUTOR_PARTITIONS ≥ the count, claimed at its first tick): one started but not ticking yet is counted by nobody, so
// no partition waits for it. One that cannot run them all is outside the share (`sharing: false`): nobody counts it, it
// takes only a partition it can run that stayed free one decision longer than a sharer below its share waits, and never
// hands back;
// what it leads is `elsewhere` to the sharers: claimed, and not divided. So every partition is led whenever some live
// instance can run it.

/** A live instance as its heartbeat row reports it. Only instances that may lead (run the timer) belong here. */
export interface LiveInstance {
  holderId: string;
  /** The partitions it reported leading at its last beat (may be one beat stale). */
  partitions: readonly number[];
  /** Its row was older than two heartbeats at the last read (its beats came that far apart): it may be cut off. */
  silent?: boolean;
}

export interface FairShareInput {
  /** P (EXECUTOR_PARTITIONS). */
  partitionCount: number;
  /** This instance's holder id (counted live whether or not its own row is in `live`). */
  self: string;
  /** The partitions this instance holds now (those it is handing back included). */
  held: readonly number[];
  /** Partitions of `held` being handed back (draining, not yet released): counted as gone; while any is, no other
   *  hand-back starts (one at a time). */
  draining?: readonly number[];
  /** The live instances (from the heartbeat rows), or null when unknown: then no cap. */
  live: readonly LiveInstance[] | null;
  /** Partitions led by instances outside the fair share (by their leases): claimed, and not divided. */
  elsewhere?: readonly number[];
  /** false: this instance cannot run every partition of the recorded count, so it is outside the fair share (default
   *  true): it takes only partitions free on one decision more than `patience`, and never hands one back. */
  sharing?: boolean;
}

export type FairShareReason =
  /** No live list: try every partition not held, no cap. */
  | 'unknown'
  /** Below the share: try the candidates, at most `acquireMax` of them. */
  | 'under'
  /** Outside the fair share: only partitions nobody took may be tried. */
  | 'spare'
  /** At the share, nothing to do. */
  | 'balanced'
  /** At the share, but a partition stayed free for `strandedAfter` decisions and every instance below its share is
   *  silent: try it (one). */
  | 'stranded'
  /** Above the share, but every instance below it is silent: nothing handed back (it would go to nobody). */
  | 'holding'
  /** A hand-back is due but waits for its confirmation (hysteresis). */
  | 'confirming'
  /** A hand-back is still draining: nothing else is decided until it is released. */
  | 'draining'
  /** Above the share: one partition handed back. */
  | 'over-share'
  /** At most the share, but 2 or more above another live instance with nothing free: one handed back. */
  | 'imbalanced';

export interface FairShareDecision {
  /** Live instances counted (this one included); 0 when unknown. */
  liveInstances: number;
  /** ceil(partitions divided ÷ liveInstances) (those led outside the share are not divided); P when unknown. */
  share: number;
  /** Partitions to try, in order (free ones first); stop after `acquireMax` acquired. Empty when none may be taken. */
  acquire: number[];
  acquireMax: number;
  /** The one partition to hand back now (drain, then release), or null. */
  handBack: number | null;
  reason: FairShareReason;
}

export interface FairShareState {
  /** Consecutive decisions on which a hand-back was due. */
  due: number;
  /** Partitions free at the last decision → on how many consecutive decisions they were seen free. */
  freeFor: ReadonlyMap<number, number>;
}

export const INITIAL_FAIR_SHARE_STATE: FairShareState = { due: 0, freeFor: new Map() };

export interface FairShareOptions {
  /** Consecutive decisions a hand-back must be due before it happens (≥ 1; default 2). */
  confirmations?: number;
  /** Decisions a partition must be seen free before an instance that is not among the fewest may take it (default 3). */
  patience?: number;
  /** Decisions a partition must be seen free, every instance below its share silent, before an instance at its share
   *  takes it (default patience + 1, at least that: after those below their share). */
  strandedAfter?: number;
}

/** FNV-1a of the holder id: where this instance starts its walk over the partitions (spreads concurrent starters). */
function offsetOf(holderId: string, p: number): number {
  let h = 0x811c9dc5;
  for (let i = 0; i < holderId.length; i++) h = Math.imul(h ^ holderId.charCodeAt(i), 0x01000193) >>> 0;
  return h % p;
}

/** One decision and the state for the next. */
export function decideFairShare(input: FairShareInput, state: FairShareState = INITIAL_FAIR_SHARE_STATE, opts: FairShareOptions = {}):
{ decision: FairShareDecision; state: FairShareState } {
  const confirmations = Math.max(1, opts.confirmations ?? 2);
  const patience = Math.max(1, opts.patience ?? 3);
  const strandedAfter = Math.max(patience + 1, opts.strandedAfter ?? patience + 1);
  const p = input.partitionCount;
  const inRange = (x: number) => Number.isInteger(x) && x >= 0 && x < p;
  const draining = new Set(input.draining ?? []);
  const held = [...new Set(input.held.filter((x) => inRange(x) && !draining.has(x)))].sort((a, b) => a - b);
  const mine = new Set(input.held);
  const start = offsetOf(input.self, Math.max(1, p));
  const walk = (want: (x: number) => boolean) => Array.from({ length: p }, (_, i) => (start + i) % p).filter(want);

  if (input.live === null) {
    const acquire = walk((x) => !mine.has(x));
    return { decision: { liveInstances: 0, share: p, acquire, acquireMax: acquire.length, handBack: null, reason: 'unknown' },
      state: { due: 0, freeFor: new Map() } };
  }

  const others = new Map<string, Set<number>>();
  const silent = new Set<string>();
  for (const i of input.live) {
    if (i.holderId === input.self) continue;
    others.set(i.holderId, new Set(i.partitions.filter(inRange)));
    if (i.silent) silent.add(i.holderId);
  }
  const liveInstances = others.size + 1;
  const claimed = new Set(mine);
  for (const s of others.values()) for (const x of s) claimed.add(x);
  // The sharers divide what the instances outside the share do not lead.
  const outside = new Set((input.elsewhere ?? []).filter((x) => inRange(x) && !claimed.has(x)));
  for (const x of outside) claimed.add(x);
  const divided = p - outside.size;
  const share = Math.ceil(divided / liveInstances);
  const freeNow = walk((x) => !claimed.has(x));
  const freeFor = new Map(freeNow.map((x) => [x, (state.freeFor.get(x) ?? 0) + 1]));
  const result = (d: Omit<FairShareDecision, 'liveInstances' | 'share'>, due = 0) =>
    ({ decision: { liveInstances, share, ...d }, state: { due, freeFor } });

  if (draining.size > 0) return result({ acquire: [], acquireMax: 0, handBack: null, reason: 'draining' });
  if (input.sharing === false) {
    const spare = freeNow.filter((x) => (freeFor.get(x) ?? 0) > patience);
    return result({ acquire: spare, acquireMax: spare.length, handBack: null, reason: 'spare' });
  }

  // Hand one back?
  const counts = [...others.entries()].map(([holderId, s]) => ({ holderId, n: s.size }));
  const awake = counts.filter((c) => !silent.has(c.holderId));
  const fewest = awake.length ? Math.min(...awake.map((c) => c.n)) : held.length;
  const most = Math.max(held.length, ...counts.map((c) => c.n));
  const firstOfMost = held.length === most && counts.every((c) => c.n < most || c.holderId > input.self);
  const over = held.length > share;
  const imbalanced = !over && held.length - fewest >= 2 && freeNow.length === 0 && firstOfMost;
  // The instances whose turn a free partition is (below the share) all miss their beats: none can take one.
  const waiting = counts.filter((c) => c.n < share);
  const cutOff = waiting.length > 0 && waiting.every((c) => silent.has(c.holderId));
  if (over && cutOff) return result({ acquire: [], acquireMax: 0, handBack: null, reason: 'holding' });
  if (over || imbalanced) {
    const due = state.due + 1;
    if (due < confirmations) return result({ acquire: [], acquireMax: 0, handBack: null, reason: 'confirming' }, due);
    return result({ acquire: [], acquireMax: 0, handBack: held[held.length - 1]!, reason: over ? 'over-share' : 'imbalanced' });
  }

  // Take some?
  if (held.length >= share) {
    // Left free this long while every instance whose turn it is misses its beats: taking it makes this one over its
    // share, and 'holding' keeps it from handing it straight back to nobody while they stay silent.
    const left = held.length === share && cutOff ? freeNow.filter((x) => (freeFor.get(x) ?? 0) >= strandedAfter) : [];
    if (left.length > 0) return result({ acquire: left, acquireMax: 1, handBack: null, reason: 'stranded' });
    return result({ acquire: [], acquireMax: 0, handBack: null, reason: 'balanced' });
  }
  // Fill up to floor(P ÷ n); only P mod n instances go to the share: those already there, then the first by holder id
  // of those below it. So free partitions spread over the instances that need them, whatever their order.
  const base = Math.floor(divided / liveInstances);
  const slots = (divided % liveInstances) - counts.filter((c) => c.n > base).length;
  const rank = awake.filter((c) => c.n <= base && c.holderId < input.self).length;
  const target = slots > rank ? share : base;
  const amongFewest = held.length <= fewest;
  // The free partitions are dealt out among the instances that need them, each up to its target (the share slots go
  // in holder-id order, as `target` says), those holding fewest first (then by holder id): `before` is what those
  // ahead of this one are dealt, `othersDealt` what all the others are.
  const byId = (a: { holderId: string }, b: { holderId: string }) => (a.holderId < b.holderId ? -1 : a.holderId > b.holderId ? 1 : 0);
  const all = [...awake, { holderId: input.self, n: held.length }].sort(byId);
  let extraLeft = (divided % liveInstances) - all.filter((c) => c.n > base).length;
  const needs = all.map((c) => ({ ...c, need: Math.max(0, (c.n > base ? share : extraLeft-- > 0 ? share : base) - c.n) }));
  let before = 0;
  let othersDealt = 0;
  for (const c of needs.sort((a, b) => a.n - b.n || byId(a, b))) {
    if (c.holderId === input.self) before = othersDealt;
    else othersDealt += c.need;
  }
  const free = [...freeNow].sort((a, b) => a - b);
  // Below its target with a deal of its own (the free partitions cover those holding fewer first): try it now, on the
  // same tick as the fewest (own deals of one view never collide).
  const ownDeal = held.length < target ? free.slice(before, before + (target - held.length)) : [];
  if (!amongFewest && ownDeal.length > 0) return result({ acquire: ownDeal, acquireMax: ownDeal.length, handBack: null, reason: 'under' });
  if (!amongFewest || held.length >= target) {
    // Not the one that needs them most: only partitions nobody took for `patience` decisions, up to the share — those
    // dealt to no one first, then the others' deals from the last (their first picks collide least).
    const undealt = new Set(free.slice(othersDealt));
    const order = [...walk((x) => undealt.has(x)), ...free.slice(0, othersDealt).reverse()];
    const patient = order.filter((x) => (freeFor.get(x) ?? 0) >= patience);
    return result({ acquire: patient, acquireMax: patient.length ? share - held.length : 0, handBack: null, reason: 'under' });
  }
  // This instance tries its own deal first: instances deciding on the same view (the same lease read) then try
  // different partitions instead of colliding on one and waiting a tick for the next (a failover's cost).
  const dealt = free.slice(before, before + (target - held.length));
  // Partitions others report are tried after the free ones (a report may be a beat stale; an acquire never steals).
  const acquire = [...dealt, ...freeNow.filter((x) => !dealt.includes(x)), ...walk((x) => !mine.has(x) && claimed.has(x) && !outside.has(x))];
  return result({ acquire, acquireMax: target - held.length, handBack: null, reason: 'under' });
}

/** The policy with its state kept between decisions: one per instance, asked once per timer round. */
export class FairShare {
  private state: FairShareState = INITIAL_FAIR_SHARE_STATE;

  constructor(private readonly opts: FairShareOptions = {}) {}

  decide(input: FairShareInput): FairShareDecision {
    const out = decideFairShare(input, this.state, this.opts);
    this.state = out.state;
    return out.decision;
  }
}
