// The seeded fault schedule and its injectors. A fault: inject, let it last, recover, wait until the cluster
// executes again (a fenced start committed after the fault), pause, next. With `--overlap P`, a second,
// network-level fault (terminate / proxy_drop / proxy_blackhole) may hit another instance while the first is
// active: injected and the cluster not yet executing again.
import { chaosServer, restartPostgres, type ChaosCluster, type ChaosDb, type Slot } from './cluster.js';
import { sleep, type Rng } from './rng.js';
import { INDETERMINATE_DESCRIPTIONS, INDETERMINATE_KINDS, LOST_REPLY_KINDS, loseReply, stallCompletions, type LostReplyKind, type LostReplyRecord } from './lostReplies.js';
import { lockLeaseTable } from './leaseTableLock.js';
import { partitionLeaders, pickPartitionVictim } from './partitionTargets.js';

export const FAULT_KINDS = ['kill', 'stop', 'pause', 'terminate', 'proxy_drop', 'proxy_blackhole', 'pg_restart', 'lease_lock', 'blackhole_long', 'renew_late',
  ...INDETERMINATE_KINDS, 'partition_change'] as const;
export type FaultKind = (typeof FAULT_KINDS)[number];

export const FAULT_DESCRIPTIONS: Record<FaultKind, string> = {
  kill: 'SIGKILL the leader process, then start a replacement process (new holder id) in its slot',
  stop: 'SIGSTOP the leader for lease + 0.2–2 s, then SIGCONT (a paused ex-leader wakes up with stale state)',
  pause: 'SIGSTOP the leader for 0.3–1.5 s (< lease, a GC-like pause around its local deadline), then SIGCONT',
  terminate: 'pg_terminate_backend of every session of one instance (the leader 75 % of the time), 1–3 times',
  proxy_drop: "reset that instance's PostgreSQL connections and refuse new ones for 0.5–3 s (its own TCP proxy)",
  proxy_blackhole: "forward nothing on that instance's PostgreSQL connections for 1–4 s, then resume (late bytes) or reset",
  pg_restart: 'restart the PostgreSQL server (pg_ctlcluster … restart): every session of every instance breaks',
  lease_lock: 'lock the lease table (ACCESS EXCLUSIVE) for statement timeout + 0.1–0.4 s while the leader executes, then free it (the lease usually stays valid; leaseValid says)',
  blackhole_long: "forward nothing on the leader's PostgreSQL connections, without any reset, for lease + 0.5–1.5 s, then resume",
  renew_late: "hold the leader's PostgreSQL traffic around its local deadline (lease − margin ± 0.3 s), then deliver it: a renew applied late",
  ...INDETERMINATE_DESCRIPTIONS,
  partition_change: 'POST a random new partition count 1..C to a live host (--partition-changes, issue 26; its own schedule, alongside the other faults)',
};

export interface FaultRecord {
  kind: FaultKind;
  slot: number | null;
  victim: string | null;
  victimWasLeader: boolean;
  epochAtFault: number | null;
  startedAt: number;
  endedAt: number;
  /** Resume is measured from here (the injection; pg_restart: the server back; lost_*: the loss; complete_stall: its end). */
  measureFrom: number;
  /** Writes of this holder before `until` do not count as the cluster resuming (killed / stopped victim). */
  exclude: { holderId: string; until: number } | null;
  detail: string;
  /** Wall time of the first fenced start after the fault, as seen while the run was going (null: none yet). */
  resumedAt: number | null;
  /** Injected while another fault (on another instance) was active: before the cluster resumed from it. */
  alongside?: boolean;
  /** The lease stayed valid in the database during the fault (lost replies, complete_stall; lease_lock: its expiry read under
   *  the lock, false when the lock outlasted it): stricter checks apply. */
  leaseValid?: boolean;
  /** lost_*: the reply lost (the victim is the instance that lost it). */
  lostReply?: LostReplyRecord;
  /** Issue 25, P > 1: the partitions whose leader the fault hit — those its victim led when it was chosen (none: a
   *  follower), every partition for a fault on the database (restart, lease table lock, stalled completions) or a
   *  lost reply caught on another instance. Resumes are judged on these; the others must not pause. Absent: P = 1. */
  partitions?: number[];
}

/** The kinds that may run alongside another fault: they need no leader and leave the process running. */
const ALONGSIDE_KINDS = ['terminate', 'proxy_drop', 'proxy_blackhole'] as const satisfies readonly FaultKind[];

export interface FaultOptions {
  leaseMs: number;
  /** DB_STATEMENT_TIMEOUT_MS of the hosts (lease_lock outlasts it). */
  statementTimeoutMs?: number;
  pgRestart: boolean;
  resumeWaitMs: number;
  /** Asked before every PostgreSQL restart: false (someone else is testing on the server) → another fault. */
  mayRestartPg: () => boolean;
  /** Only these kinds are drawn (`--faults`; default: every kind). */
  kinds?: readonly FaultKind[];
  /** The hosts' settle window (complete_stall outlasts it); default 2 × statement timeout. */
  settleWindowMs?: number;
  /** Issue 25: the lease name of each partition; more than one: faults aimed at "the leader" hit the leader of one
   *  partition (drawn), and record every partition that instance led. */
  partitionLeases?: string[];
  /** Issue 26: the partition count the database records now (--partition-changes: may be below the lease names'). */
  recordedCount?: () => Promise<number>;
}

/** Faults on the database itself: they hit every partition's leader at once. */
const ALL_PARTITIONS_KINDS: readonly FaultKind[] = ['pg_restart', 'lease_lock', 'complete_stall'];

/** A `stop` lasts the lease plus up to this much. */
export const STOP_EXTRA_MAX_MS = 2_000;

const WEIGHTS: Record<FaultKind, number> = { kill: 3, stop: 3, pause: 1.5, terminate: 2.5, proxy_drop: 2, proxy_blackhole: 2, pg_restart: 1.5,
  lease_lock: 2, blackhole_long: 1.5, renew_late: 1.5,
  lost_acquire: 1, lost_renew: 1, lost_start: 1, lost_complete: 1, lost_release: 1, lost_orphans: 1, complete_stall: 1.5,
  partition_change: 0 }; // drawn on a schedule of its own (partitionChanges.ts), alongside the others

const isLostReply = (k: FaultKind): k is LostReplyKind => (LOST_REPLY_KINDS as readonly string[]).includes(k);

/** Kinds aimed at the leader (with partitions: the leader of a partition). */
const NEEDS_LEADER = (kind: FaultKind) => kind === 'kill' || kind === 'stop' || kind === 'pause' || kind === 'lease_lock' || kind === 'blackhole_long'
  || kind === 'renew_late' || (INDETERMINATE_KINDS as readonly string[]).includes(kind);

/** A fault with its victim chosen (and reserved: a fault alongside never picks the same instance). */
export interface Target {
  kind: FaultKind;
  slot: Slot | null;
  leader: { slot: Slot; epoch: number } | null;
  rng: Rng;
  alongside: boolean;
  /** P > 1: the partitions the victim led when chosen (see FaultRecord.partitions). */
  partitions?: number[];
}

export class FaultInjector {
  readonly faults: FaultRecord[] = [];
  /** Times (wall ms) a leader-targeted fault found no live leader for 10 s: a liveness violation. */
  readonly leaderless: number[] = [];
  pgRestartsSkipped = 0;
  /** Slots of the active faults (from injection until the cluster resumed): a fault alongside never picks them. */
  private readonly busy = new Set<number>();
  /** Kinds of the active primary faults. */
  private readonly active: FaultKind[] = [];

  /** `alongsideRng`: its own stream (whether, when and what to inject alongside), so the main schedule —
   *  kinds, victims, durations, pauses — is the same with or without overlap. */
  constructor(private readonly cluster: ChaosCluster, private readonly db: ChaosDb, private readonly rng: Rng,
    private readonly o: FaultOptions, private readonly alongsideRng: Rng = rng) {}

  pickKind(): FaultKind {
    const w = { ...WEIGHTS };
    if (!this.o.pgRestart) w.pg_restart = 0;
    if (this.o.kinds) for (const k of FAULT_KINDS) if (!this.o.kinds.includes(k)) w[k] = 0;
    const kind = this.rng.weighted(w);
    if (kind !== 'pg_restart' || this.o.mayRestartPg()) return kind;
    this.pgRestartsSkipped++;
    return 'kill';
  }

  /** Choose (and reserve) the victim of a fault of `kind`; null when it needs a leader and there is none. */
  async target(kind: FaultKind): Promise<Target | null> {
    if (this.partitioned) return this.targetPartitioned(kind);
    const leader = await this.cluster.leaderSlot(10_000);
    const needsLeader = NEEDS_LEADER(kind);
    if (needsLeader && !leader) {
      this.leaderless.push(Date.now());
      return null;
    }
    const slot: Slot | null = kind === 'pg_restart' ? null
      : needsLeader || (leader && this.rng.chance(0.75)) ? leader!.slot : this.rng.pick(this.cluster.live());
    if (slot && !this.reserve(slot)) return null; // being stopped for good (mixed-version campaign)
    return { kind, slot, leader, rng: this.rng, alongside: false };
  }

  private get partitioned(): boolean {
    return (this.o.partitionLeases?.length ?? 1) > 1;
  }

  /** P > 1: "the leader" is the leader of a partition drawn among the led ones (partitionTargets.ts). */
  private async targetPartitioned(kind: FaultKind): Promise<Target | null> {
    const led = await partitionLeaders(this.cluster, this.o.partitionLeases!, 10_000);
    const needsLeader = NEEDS_LEADER(kind);
    if (!led && needsLeader) {
      this.leaderless.push(Date.now());
      return null;
    }
    const v = pickPartitionVictim({ led, count: await this.count(), rng: this.rng, live: this.cluster.live(), needsLeader,
      noVictim: kind === 'pg_restart', everyPartition: ALL_PARTITIONS_KINDS.includes(kind) });
    if (v.slot && !this.reserve(v.slot)) return null; // being stopped for good (mixed-version campaign)
    return { kind, slot: v.slot, leader: v.leader, rng: this.rng, alongside: false, partitions: v.partitions };
  }

  /** Reserve a slot (no other fault, or the mixed-version campaign's stop, takes it meanwhile); false if reserved. */
  reserve(slot: Slot): boolean {
    if (this.busy.has(slot.index)) return false;
    this.busy.add(slot.index);
    return true;
  }

  /** Faults in progress (primary ones; one alongside always runs with a primary one). */
  get activeCount(): number {
    return this.active.length;
  }

  /** With chance `p`, after 0–1 s: a network-level fault on an instance no active fault uses — only while a
   *  primary fault is still active (not during a PostgreSQL restart, which hits everyone). Null otherwise. */
  async maybeInjectAlongside(p: number): Promise<FaultRecord | null> {
    const r = this.alongsideRng;
    if (p <= 0 || !r.chance(p)) return null;
    const kind = r.pick(ALONGSIDE_KINDS);
    await sleep(r.int(0, 1_000));
    const led = this.partitioned ? await partitionLeaders(this.cluster, this.o.partitionLeases!, 0) : null;
    const leader = this.partitioned ? null : await this.cluster.leaderSlot(0);
    const free = this.cluster.live().filter((s) => !this.busy.has(s.index));
    if (this.active.length === 0 || this.active.includes('pg_restart') || free.length === 0) return null;
    const slot = r.pick(free);
    this.busy.add(slot.index);
    if (!this.partitioned) return this.run({ kind, slot, leader, rng: r, alongside: true });
    const partitions = led ? led.of(slot) : [];
    return this.run({ kind, slot, leader: partitions.length ? { slot, epoch: led!.leaders[partitions[0]!]!.epoch } : null, rng: r, alongside: true, partitions });
  }

  /** Apply a targeted fault, recover from it, wait (bounded) until the cluster executes again, then release
   *  its victim's reservation. */
  async run({ kind, slot, leader, rng: r, alongside, partitions }: Target): Promise<FaultRecord> {
    const f: FaultRecord = {
      kind, slot: slot?.index ?? null, victim: slot?.holderId ?? null, victimWasLeader: !!slot && slot === leader?.slot,
      epochAtFault: leader?.epoch ?? null, startedAt: Date.now(), endedAt: 0, measureFrom: 0, exclude: null, detail: '', resumedAt: null,
      ...(alongside ? { alongside } : {}), ...(partitions ? { partitions } : {}),
    };
    f.measureFrom = f.startedAt;
    this.faults.push(f);
    if (!alongside) this.active.push(kind);
    try {
      await this.apply(f, slot, r);
      f.endedAt = Date.now();
      f.resumedAt = await this.waitResumed(f);
      // Pacing: a start that committed while the fault was still active (a batch in flight at the injection) is
      // no recovery. The next fault waits for a start after this one ended, so two faults' recovery windows never
      // overlap unless --overlap asks for it (found by the 100-run campaign: a second lease_lock 1 s after the
      // first ended, before the cluster had started anything, failed the first one's lease_valid_resume rule).
      if (f.resumedAt !== null && f.resumedAt <= f.endedAt) await this.waitResumed(f, f.endedAt);
    } finally {
      if (slot) this.busy.delete(slot.index);
      if (!alongside) this.active.splice(this.active.indexOf(kind), 1);
    }
    return f;
  }

  private async apply(f: FaultRecord, slot: Slot | null, r: Rng): Promise<void> {
    if (isLostReply(f.kind)) {
      const waitMs = 3 * this.o.leaseMs + 2_000;
      const lost = await loseReply(f.kind, this.cluster, slot!, r, waitMs);
      if (!lost) {
        f.detail = `no committed ${f.kind.slice('lost_'.length)} within ${waitMs} ms while ${f.victim} led: nothing lost`;
        return;
      }
      if (f.partitions && lost.slot !== slot) f.partitions = [...Array(await this.count()).keys()]; // which partition: unknown
      f.slot = lost.slot.index;
      f.victim = lost.record.holderId;
      f.lostReply = lost.record;
      f.measureFrom = lost.record.at; // resume counts from the loss, not from arming the trap
      f.leaseValid = true;
      f.detail = `${lost.record.statement === 'orphans' ? 'orphan recovery' : lost.record.statement} of ${f.victim} committed, reply lost, then ${lost.record.end === 'reset' ? 'reset' : 'held until the client gave up'} ` +
        `(${lost.record.endedAt - lost.record.at} ms)`;
      return;
    }
    switch (f.kind) {
      case 'kill': {
        const host = slot!.host!;
        host.signal('SIGKILL');
        f.exclude = { holderId: slot!.holderId, until: Number.POSITIVE_INFINITY };
        await host.exited;
        slot!.host = null;
        await this.respawn(slot!);
        f.detail = `killed ${f.victim}; replacement ${slot!.holderId}`;
        break;
      }
      case 'stop':
      case 'pause': {
        const ms = f.kind === 'stop' ? this.o.leaseMs + r.int(200, STOP_EXTRA_MAX_MS) : r.int(300, 1_500);
        slot!.stopped = true;
        slot!.host!.signal('SIGSTOP');
        await sleep(ms);
        slot!.host!.signal('SIGCONT');
        slot!.stopped = false;
        f.exclude = { holderId: slot!.holderId, until: Date.now() };
        f.detail = `stopped ${f.victim} for ${ms} ms`;
        break;
      }
      case 'terminate': {
        const times = r.int(1, 3);
        let n = 0;
        for (let i = 0; i < times; i++) {
          n += await this.cluster.terminateSessions(slot!).catch(() => 0);
          if (i + 1 < times) await sleep(r.int(100, 400));
        }
        f.detail = `terminated ${n} sessions of ${f.victim} (${times}×)`;
        break;
      }
      case 'proxy_drop': {
        const ms = r.int(500, 3_000);
        await slot!.proxy.drop(ms);
        f.detail = `dropped ${f.victim}'s connections for ${ms} ms`;
        break;
      }
      case 'proxy_blackhole': {
        const ms = r.int(1_000, 4_000);
        const end = r.chance(0.5) ? 'resume' : 'reset';
        await slot!.proxy.blackhole(ms, end);
        f.detail = `blackholed ${f.victim}'s connections for ${ms} ms, then ${end}`;
        break;
      }
      case 'lease_lock': {
        // Past the statement timeout (statement timeout + 0.1–0.4 s). The lease usually outlives it, but not always:
        // a bridge never renews, so the last renew can be up to about a tick old when the lock begins (campaign on
        // 2620eb3, seed 400005: 652 ms left, a 1 166-ms lock): lockLeaseTable says whether the lock outlasted it.
        const ms = (this.o.statementTimeoutMs ?? 1_000) + r.int(100, 400);
        const lock = await lockLeaseTable(this.db, ms);
        f.leaseValid = lock.leaseValid;
        f.detail = `locked the lease table for ${ms} ms while ${f.victim} led` +
          (lock.leaseValid ? '' : ` (its lease expired under the lock, ${lock.leftMs ?? '?'} ms after it began)`);
        break;
      }
      case 'blackhole_long': {
        const ms = this.o.leaseMs + r.int(500, 1_500);
        await slot!.proxy.blackhole(ms, 'resume');
        f.detail = `blackholed ${f.victim}'s connections for ${ms} ms (no reset), then resumed`;
        break;
      }
      case 'renew_late': {
        const ms = Math.max(200, this.o.leaseMs - 400 + r.int(-300, 300));
        await slot!.proxy.blackhole(ms, 'resume');
        f.detail = `held ${f.victim}'s traffic for ${ms} ms around its local deadline, then delivered it late`;
        break;
      }
      case 'complete_stall': {
        const settle = this.o.settleWindowMs ?? 2 * (this.o.statementTimeoutMs ?? 1_000);
        const ms = settle + r.int(300, 1_000);
        const n = await stallCompletions(this.db, ms);
        f.measureFrom = Date.now(); // the stall is the fault: resume counts from its end
        f.leaseValid = true;
        f.detail = `locked every intent in flight (${n}) for ${ms} ms (settle window ${settle} ms) while ${f.victim} led`;
        break;
      }
      case 'pg_restart': {
        const t = Date.now();
        await restartPostgres();
        f.measureFrom = Date.now();
        f.detail = `${chaosServer() === 'mariadb' ? 'MariaDB' : 'PostgreSQL'} restart took ${f.measureFrom - t} ms`;
        break;
      }
    }
  }

  /** A replacement process; the database may be briefly unreachable, so try a few times. */
  private async respawn(slot: Slot): Promise<void> {
    for (let i = 0; ; i++) {
      try {
        await this.cluster.spawn(slot);
        return;
      } catch (e) {
        if (i >= 4) throw new Error(`could not start a replacement process: ${(e as Error).message}`);
        await sleep(1_000);
      }
    }
  }

  /** First fenced start committed after `from` (default: the fault's measureFrom; database time, same machine
   *  clock), not by the victim; with partitions, the last of the first starts of the partitions the fault hit. */
  async firstStartAfter(f: FaultRecord, from = f.measureFrom): Promise<number | null> {
    const exclude = { holderId: f.exclude?.holderId ?? '', untilMs: f.exclude?.until ?? Number.POSITIVE_INFINITY };
    const count = f.partitions?.length ? await this.count() : 0; // partitions the count no longer has start nothing
    const on = f.partitions?.filter((p) => p < count) ?? [];
    if (!on.length) return this.db.firstStartAfter(from, exclude);
    let last = Number.NEGATIVE_INFINITY;
    for (const p of on) {
      const t = await this.db.firstStartAfter(from, exclude, this.o.partitionLeases![p]!);
      if (t === null) return null;
      last = Math.max(last, t);
    }
    return last;
  }

  /** The partition count now: the recorded one (issue 26), else every lease name's. */
  private async count(): Promise<number> {
    const all = this.o.partitionLeases?.length ?? 1;
    return this.o.recordedCount ? Math.min(all, await this.o.recordedCount().catch(() => all)) : all;
  }

  async waitResumed(f: FaultRecord, from = f.measureFrom): Promise<number | null> {
    const end = Date.now() + this.o.resumeWaitMs;
    for (;;) {
      const t = await this.firstStartAfter(f, from).catch(() => null);
      if (t !== null || Date.now() > end) return t;
      await sleep(200);
    }
  }
}
