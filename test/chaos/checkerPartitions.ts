// Issue 25's rules on partitioned execution (EXECUTOR_PARTITIONS = P > 1): every lease row has its own epochs,
// events and fence, so the lease and fencing rules of checker.ts read the history per lease name (`Leases`), and:
//  - partition: an intent's stored partition is the one its partitionKey (else its id) hashes to, fixed at insert;
//    every fenced write names one of the P lease names; an accepted partitionKey is the one stored.
//  - one_executor: in each lease's commit order, no write of an epoch after a write of a later epoch (two executors
//    of one partition interleaved). An attempt of a partition-k intent carries an epoch of lease k held by its
//    writer: the lease rule of checker.ts, which reads attempts under their intent's partition's lease.
//  - key_order (keyOrder.ts): intents of one partitionKey, each submitted after the previous was answered, are first
//    started in that (due) order.
//  - partition_isolation: a fault whose victim led some partitions (not all) must not pause the others: each of them
//    starts something within the SQL-lease resume bound after the fault began, as if nothing had happened.
// With one partition none of this applies and the history reads as one lease, exactly as before partitions.
// Issue 26: the count may change during a run (checkerChanges.ts): an intent's partition is read at the time of each
// attempt, faults are judged on the partitions of the count at the time, and a change's pause is no fault's.
import type { AuditRow, History, IntentRow } from './history.js';
import type { FaultRecord } from './faults.js';
import { changeChecks, CountTimeline, type ChangeStats } from './checkerChanges.js';
import { keyOrder, type KeyOrderStats } from './keyOrder.js';
import { drainHalts, pauseHalts } from './checkerOperator.js';

export interface PartitionStats extends KeyOrderStats, ChangeStats {
  partitions: number;
}

/** How the history's rows map to leases: one lease (key '') unless the history has several partitions. */
/** A drain's handovers belong to it when completed this soon after its request (a leader waits at most
 *  PROVIDER_TIMEOUT_MS + a renew interval for its calls; the campaign's 1.3 s, with room for a loaded machine). */
const DRAIN_HALT_WITHIN_MS = 5_000;

export class Leases {
  readonly multi: boolean;
  /** Lease names of partitions 0..C−1 (C: the hosts' EXECUTOR_PARTITIONS; the recorded count may be lower). */
  readonly names: string[];
  readonly timeline: CountTimeline;
  private readonly intents: Map<string, IntentRow>;
  /** The operator's pauses (from a pause's request to its resume's answer) and drains (from the request to the
   *  handovers' completion). */
  private readonly halts: { from: number; until: number; what: string }[];

  constructor(private readonly h: History) {
    this.names = h.partitionLeases ?? [];
    this.multi = this.names.length > 1;
    this.intents = new Map(h.intents.map((i) => [i.intentId, i]));
    this.timeline = new CountTimeline(h.partitionChanges, Math.max(1, this.names.length));
    const iso = (t: number) => new Date(t).toISOString();
    this.halts = [...pauseHalts(h.operatorActions).map((p) => ({ ...p, what: `the resume of the pause requested at ${iso(p.from)} was answered` })),
      ...drainHalts(h.operatorActions, h.audit, DRAIN_HALT_WITHIN_MS).map((d) => ({ ...d, what: `the drain requested at ${iso(d.from)} completed` }))];
  }

  /** A halt of execution at some moment of [fromMs, toMs]: a change of the count (which also renumbers the
   *  partitions), else an operator's pause or drain (`startMs`: when it began); `endMs` when it ended (null: never). */
  haltDuring(fromMs: number, toMs: number): { what: string; startMs: number; endMs: number | null; renumbers: boolean; operator: boolean } | undefined {
    const c = this.timeline.activeDuring(fromMs, toMs);
    if (c) return { what: `partition change ${c.changeId} completed`, startMs: c.requestedAtMs, endMs: c.completedAtMs, renumbers: true, operator: false };
    const p = this.halts.filter((x) => x.from <= toMs && x.until > fromMs).sort((a, b) => a.from - b.from)[0];
    return p && { what: p.what, startMs: p.from, endMs: Number.isFinite(p.until) ? p.until : null, renumbers: false, operator: true };
  }

  /** The lease names of the partitions of the count at `tMs`. */
  leasesAt(tMs: number): string[] {
    return this.names.slice(0, this.timeline.countAt(tMs));
  }

  /** The lease of a lease event or audit row. */
  of(row: { leaseName?: string }): string {
    return this.multi ? row.leaseName ?? '?' : '';
  }

  /** The lease an attempt must have been written under: its intent's partition's when it started. */
  ofAttempt(a: { intentId: string; startedAtMs?: number }): string {
    if (!this.multi) return '';
    const p = this.partitionOf(a);
    return p === undefined ? '?' : this.names[p] ?? `?partition ${p}`;
  }

  /** The partition of an attempt's intent when the attempt started (the stored one when the count never changed;
   *  undefined: unknown, or a history recorded before partitions). */
  partitionOf(a: { intentId: string; startedAtMs?: number }): number | undefined {
    const i = this.intents.get(a.intentId);
    if (!i || i.partition === undefined) return undefined;
    return this.timeline.any && a.startedAtMs !== undefined ? this.timeline.partitionAt(i, a.startedAtMs) : i.partition;
  }

  /** Every lease key of the history (one with one partition). */
  keys(): string[] {
    return this.multi ? this.names : [''];
  }

  /** A message's prefix naming the lease (nothing with one partition: messages as before partitions). */
  label(lease: string): string {
    return this.multi ? `lease ${lease}: ` : '';
  }

  /** The partitions a fault's resume is judged on: those its victim led that the count had when its resume began to
   *  be measured; null: any start (one partition, a fault on an instance that led nothing, or a history recorded
   *  before partitions). */
  private hitPartitions(f: FaultRecord): number[] | null {
    if (!this.multi || !f.partitions || f.partitions.length === 0) return null;
    const count = this.timeline.countAt(f.measureFrom);
    const hit = f.partitions.filter((p) => p < count);
    return hit.length ? hit : null;
  }

  /** The leases a fault's resume is judged on (see hitPartitions). */
  hitBy(f: FaultRecord): string[] | null {
    return this.hitPartitions(f)?.map((p) => this.names[p] ?? `?partition ${p}`) ?? null;
  }

  /** Did the fault hit every partition (a database restart, a lease table lock, an instance leading them all, or a
   *  change of the count, which pauses them all)? */
  hitAll(f: FaultRecord): boolean {
    if (!this.multi || !f.partitions || f.kind === 'partition_change') return true;
    const hit = new Set(f.partitions);
    return Array.from({ length: this.timeline.countAt(f.measureFrom) }, (_, k) => k).every((p) => hit.has(p));
  }
}

const firstStartAfter = (starts: AuditRow[], lease: string | null, leases: Leases, from: number, f: FaultRecord) =>
  starts.find((a) => a.atMs > from && (lease === null || leases.of(a) === lease) && !(f.exclude && a.holderId === f.exclude.holderId && a.atMs < f.exclude.until));

/** The resume of a fault: the first start after `from` on each lease it hit (the slowest of them), or on any lease. */
export function resumeAfter(starts: AuditRow[], leases: Leases, f: FaultRecord, from: number, on: string[] | null): number | null {
  if (on === null) return firstStartAfter(starts, null, leases, from, f)?.atMs ?? null;
  let last = Number.NEGATIVE_INFINITY;
  for (const lease of on) {
    const s = firstStartAfter(starts, lease, leases, from, f);
    if (!s) return null;
    last = Math.max(last, s.atMs);
  }
  return last;
}

/** The resume of a fault across halts: a change active while the fault's resume was awaited paused every partition
 *  (and renumbered them): the resume is then the first start on any partition after the change completed, measured
 *  from that completion (`from`), and `change` names it; an operator's pause likewise, from its resume's answer, on
 *  the same partitions. Null `at`: never resumed. */
export function resumeAcrossChanges(starts: AuditRow[], leases: Leases, f: FaultRecord, from: number, on: string[] | null, boundMs = Number.POSITIVE_INFINITY):
  { at: number | null; from: number; change: { what: string } | null } {
  let change: { what: string } | null = null;
  for (;;) {
    const at = resumeAfter(starts, leases, f, from, on);
    const c = leases.haltDuring(from, at ?? Number.POSITIVE_INFINITY);
    if (!c) return { at, from, change };
    // An operator's pause or drain excuses only a resume it delayed: not one that came in time anyway, nor one
    // already overdue when it began.
    if (c.operator && ((at !== null && at - from <= boundMs) || c.startMs > from + boundMs)) return { at, from, change };
    change = { what: c.what };
    if (c.endMs === null) return { at: null, from, change };
    from = c.endMs;
    // A change renumbers the partitions (one may also complete inside a pause): then any start resumes.
    if (c.renumbers || (on !== null && on.some((l) => !leases.leasesAt(from).includes(l)))) on = null;
  }
}

export function partitionChecks(h: History, leases: Leases, starts: AuditRow[], fail: (check: string, message: string) => void): PartitionStats {
  const stats: PartitionStats = { partitions: Math.max(1, leases.names.length), keyOrderPairs: 0, keySameBatch: 0, keyArrivalInversions: 0, changes: [] };
  if (!leases.multi) return stats;
  Object.assign(stats, changeChecks(h, leases.timeline, starts, fail));
  const P = leases.names.length;
  const known = new Set(leases.names);

  // partition: the stored partition is the key's of the final count (every completed change moved every row).
  const count = leases.timeline.final;
  for (const i of h.intents) {
    if (i.partition === undefined) continue;
    const want = leases.timeline.partitionAt(i, Number.POSITIVE_INFINITY);
    if (i.partition !== want) fail('partition', `intent ${i.intentId} (partitionKey ${i.partitionKey ?? 'none'}) is in partition ${i.partition}; its key hashes to ${want} of ${count}`);
  }
  for (const a of h.audit) if (!known.has(a.leaseName ?? '?')) fail('partition', `audit seq ${a.seq} (${a.action}) names lease ${a.leaseName ?? 'none'}, not one of the ${P} partitions' leases`);
  for (const e of h.events) if (!known.has(e.leaseName ?? '?')) fail('partition', `lease event seq ${e.seq} (${e.event}) names lease ${e.leaseName ?? 'none'}, not one of the ${P} partitions' leases`);
  const intentById = new Map<string, IntentRow>(h.intents.map((i) => [i.intentId, i]));
  for (const a of h.accepted) {
    const i = intentById.get(a.intentId);
    if (i && i.partitionKey !== undefined && (a.partitionKey ?? null) !== i.partitionKey) {
      fail('partition', `intent ${a.intentId} was submitted with partitionKey ${a.partitionKey ?? 'none'} but stores ${i.partitionKey ?? 'none'}`);
    }
  }

  // one_executor
  for (const lease of leases.names) {
    let newest: AuditRow | null = null;
    for (const w of h.audit.filter((a) => leases.of(a) === lease).sort((a, b) => a.seq - b.seq)) {
      if (newest && w.epoch < newest.epoch) {
        fail('one_executor', `lease ${lease}: write seq ${w.seq} (${w.action}) by ${w.holderId} under epoch ${w.epoch} committed after seq ${newest.seq} by ${newest.holderId} under epoch ${newest.epoch}`);
      }
      if (!newest || w.epoch >= newest.epoch) newest = w;
    }
  }

  // key_order (keyOrder.ts)
  Object.assign(stats, keyOrder(h.accepted, h.attempts, h.provider, fail));

  // partition_isolation: the partitions of the count at the time (the others idle). A change of the count active
  // before such a partition's next start paused every partition: that pause is the change's, not the fault's.
  const boundMs = h.resumeBound * h.leaseMs;
  for (const f of h.faults) {
    if (leases.hitAll(f)) continue;
    const hit = new Set(f.partitions ?? []);
    for (let p = 0; p < leases.timeline.countAt(f.measureFrom); p++) {
      if (hit.has(p)) continue;
      const lease = leases.names[p]!;
      const s = starts.find((a) => a.atMs > f.measureFrom && leases.of(a) === lease);
      if (!s) continue; // nothing to start on that partition afterwards: the drain rule judges it
      if (leases.haltDuring(f.startedAt, s.atMs)) continue;
      // Another fault on p's leader before that start, beginning after f or not yet resumed from (no start of p since
      // its measureFrom) when f began, paused it: that fault's own liveness rule judges p, not f's isolation. (A change
      // of the count is judged above, by when it was active.)
      const startedSince = (from: number) => starts.some((a) => leases.of(a) === lease && a.atMs > from && a.atMs <= f.measureFrom);
      if (h.faults.some((g) => g !== f && g.kind !== 'partition_change' && (g.partitions ?? []).includes(p) && g.startedAt < s.atMs
        && (g.startedAt >= f.measureFrom || !startedSince(g.measureFrom)))) continue;
      const ms = Math.round(s.atMs - f.measureFrom);
      if (ms > boundMs) {
        fail('partition_isolation', `${f.kind} (${f.detail}) hit partitions [${[...hit].join(',')}]: partition ${p} (${lease}) started nothing for ${ms} ms = ` +
          `${(ms / h.leaseMs).toFixed(2)} × lease > bound ${h.resumeBound.toFixed(2)}`);
      }
    }
  }
  return stats;
}
