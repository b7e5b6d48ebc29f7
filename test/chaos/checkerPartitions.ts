// Issue 25's rules on partitioned execution (EXECUTOR_PARTITIONS = P > 1): every lease row has its own epochs,
// events and fence, so the lease and fencing rules of checker.ts read the history per lease name (`Leases`), and:
//  - partition: an intent's stored partition is the one its partitionKey (else its id) hashes to, fixed at insert;
//    every fenced write names one of the P lease names; an accepted partitionKey is the one stored.
//  - one_executor: in each lease's commit order, no write of an epoch after a write of a later epoch (two executors
//    of one partition interleaved). An attempt of a partition-k intent carries an epoch of lease k held by its
//    writer: the lease rule of checker.ts, which reads attempts under their intent's partition's lease.
//  - key_order: intents of one partitionKey, each submitted after the previous was answered, are first started in
//    that (due) order: one executor, taking the earliest due first. Two started by one batch are sent side by side;
//    of those started by different batches, first attempts reaching the provider out of that order are counted (a
//    call's socket write can be overtaken), not failed.
//  - partition_isolation: a fault whose victim led some partitions (not all) must not pause the others: each of them
//    starts something within the SQL-lease resume bound after the fault began, as if nothing had happened.
// With one partition none of this applies and the history reads as one lease, exactly as before partitions.
import { assignPartition } from '../../src/intents/partition.js';
import type { AuditRow, History, IntentRow } from './history.js';
import type { FaultRecord } from './faults.js';

export interface PartitionStats {
  partitions: number;
  /** Pairs of same-key intents (submitted one after the other) whose start order was checked. */
  keyOrderPairs: number;
  /** … of which started by one batch (their calls sent side by side). */
  keySameBatch: number;
  /** … of those started by different batches, how many first attempts reached the provider in the other order
   *  (counted, not failed). */
  keyArrivalInversions: number;
}

/** How the history's rows map to leases: one lease (key '') unless the history has several partitions. */
export class Leases {
  readonly multi: boolean;
  readonly names: string[];
  private readonly intentPartition: Map<string, number | undefined>;

  constructor(private readonly h: History) {
    this.names = h.partitionLeases ?? [];
    this.multi = this.names.length > 1;
    this.intentPartition = new Map(h.intents.map((i) => [i.intentId, i.partition]));
  }

  /** The lease of a lease event or audit row. */
  of(row: { leaseName?: string }): string {
    return this.multi ? row.leaseName ?? '?' : '';
  }

  /** The lease an attempt must have been written under: its intent's partition's. */
  ofAttempt(a: { intentId: string }): string {
    if (!this.multi) return '';
    const p = this.intentPartition.get(a.intentId);
    return p === undefined ? '?' : this.names[p] ?? `?partition ${p}`;
  }

  /** The partition of an attempt's intent (undefined: unknown, or a history recorded before partitions). */
  partitionOf(a: { intentId: string }): number | undefined {
    return this.intentPartition.get(a.intentId);
  }

  /** Every lease key of the history (one with one partition). */
  keys(): string[] {
    return this.multi ? this.names : [''];
  }

  /** A message's prefix naming the lease (nothing with one partition: messages as before partitions). */
  label(lease: string): string {
    return this.multi ? `lease ${lease}: ` : '';
  }

  /** The leases a fault's resume is judged on: those of the partitions its victim led; null: any start (one
   *  partition, a fault on an instance that led nothing, or a history recorded before partitions). */
  hitBy(f: FaultRecord): string[] | null {
    if (!this.multi || !f.partitions || f.partitions.length === 0) return null;
    return f.partitions.map((p) => this.names[p] ?? `?partition ${p}`);
  }

  /** Did the fault hit every partition (a database restart, a lease table lock, or an instance leading them all)? */
  hitAll(f: FaultRecord): boolean {
    return !this.multi || !f.partitions || f.partitions.length >= this.names.length;
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

export function partitionChecks(h: History, leases: Leases, starts: AuditRow[], fail: (check: string, message: string) => void): PartitionStats {
  const stats: PartitionStats = { partitions: Math.max(1, leases.names.length), keyOrderPairs: 0, keySameBatch: 0, keyArrivalInversions: 0 };
  if (!leases.multi) return stats;
  const P = leases.names.length;
  const known = new Set(leases.names);

  // partition
  for (const i of h.intents) {
    if (i.partition === undefined) continue;
    const want = assignPartition({ intentId: i.intentId, partitionKey: i.partitionKey ?? null }, P);
    if (i.partition !== want) fail('partition', `intent ${i.intentId} (partitionKey ${i.partitionKey ?? 'none'}) is in partition ${i.partition}; its key hashes to ${want} of ${P}`);
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

  // key_order
  const firstAttempt = new Map(h.attempts.filter((a) => a.attemptNo === 1).map((a) => [a.intentId, a]));
  const firstArrival = new Map(h.provider.filter((p) => p.attemptNo === 1).map((p) => [p.key, p.arrivedAt]));
  const byKey = new Map<string, typeof h.accepted>();
  for (const a of h.accepted) if (a.partitionKey !== undefined && a.sentAt !== undefined) byKey.set(a.partitionKey, [...(byKey.get(a.partitionKey) ?? []), a]);
  for (const [key, list] of byKey) {
    const sorted = [...list].sort((a, b) => a.sentAt! - b.sentAt!);
    for (let k = 1; k < sorted.length; k++) {
      const x = sorted[k - 1]!, y = sorted[k]!;
      const ax = firstAttempt.get(x.intentId), ay = firstAttempt.get(y.intentId);
      if (x.at > y.sentAt! || !ax?.startedAtMs || !ay?.startedAtMs) continue; // order unknown, or one never started (cancelled)
      stats.keyOrderPairs++;
      if (ax.startedAtMs > ay.startedAtMs) {
        fail('key_order', `partitionKey ${key}: intent ${y.intentId} (sent ${y.sentAt}) first started at ${ay.startedAtMs} by ${ay.holderId} (epoch ${ay.epoch}), ` +
          `before intent ${x.intentId} (answered ${x.at}), first started at ${ax.startedAtMs} by ${ax.holderId} (epoch ${ax.epoch})`);
      }
      // Started by one batch (one statement, one start time): their calls go out side by side, in no set order.
      if (ax.startedAtMs === ay.startedAtMs) {
        stats.keySameBatch++;
        continue;
      }
      const rx = firstArrival.get(x.intentId), ry = firstArrival.get(y.intentId);
      if (rx !== undefined && ry !== undefined && rx > ry) stats.keyArrivalInversions++;
    }
  }

  // partition_isolation
  const boundMs = h.resumeBound * h.leaseMs;
  for (const f of h.faults) {
    if (leases.hitAll(f)) continue;
    const hit = new Set(f.partitions ?? []);
    for (let p = 0; p < P; p++) {
      if (hit.has(p)) continue;
      const lease = leases.names[p]!;
      const s = starts.find((a) => a.atMs > f.measureFrom && leases.of(a) === lease);
      if (!s) continue; // nothing to start on that partition afterwards: the drain rule judges it
      const ms = Math.round(s.atMs - f.measureFrom);
      if (ms > boundMs) {
        fail('partition_isolation', `${f.kind} (${f.detail}) hit partitions [${[...hit].join(',')}]: partition ${p} (${lease}) started nothing for ${ms} ms = ` +
          `${(ms / h.leaseMs).toFixed(2)} × lease > bound ${h.resumeBound.toFixed(2)}`);
      }
    }
  }
  return stats;
}
