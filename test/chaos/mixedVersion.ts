// The mixed-version campaign (`--mixed-version`): the previous release (test/support/previousRelease.json, built from
// git history by previousRelease.ts) and this checkout run side by side on one database under the campaign's faults.
// Phases, at fractions of the run's duration, beside the load and the faults (a phase step never takes a slot a fault
// holds, and a fault never takes one a step is stopping):
//   old only → this checkout's migrations while the old release runs → new processes start → the old ones stop one
//   by one (SIGTERM) → this release alone: a count change must start and complete → an old process becomes live
//   during a change (it must not take part: no claim, no lease acquired by its changer but partition 0's, whose claim
//   the database refuses) → the downgrade: old processes start beside the new ones, which then stop one by one, the
//   old release running alone on this one's schema to the end.
// Count changes go through this release's instances only: while an old process is live they must be answered 409
// older-release-live (judged here, with the answers recorded by partitionChanges.ts); once none is, 202.
import { chaosSql, type ChaosCluster, type ChaosDb, type Slot } from './cluster.js';
import type { FaultInjector } from './faults.js';
import type { ChaosHost } from './hostProcess.js';
import type { Violation } from './history.js';
import type { ChangeAnswer, PartitionChangeSchedule } from './partitionChanges.js';
import { readChanges, recordedCount } from './partitionChanges.js';
import type { OperatorSchedule } from './operatorActions.js';
import { sleep } from './rng.js';
import { runMigrate } from '../support/previousRelease.js';
import { PARTITION_SEPARATOR, partitionChangerHolderId } from '../../src/limits.js';
import { isOlderRelease } from '../../src/version.js';

/** The first release whose leaders read the cluster pause row (LEASE_NAME#*): an earlier one's are held only by their
 *  partition's row, so while one is live the operator pauses each partition (operatorActions.ts perPartition). */
export const CLUSTER_PAUSE_MIN_VERSION = '0.2.0';

/** Whether the previous release's leaders ignore a cluster pause (the operator pauses each partition while one is live). */
export const pausesEachPartition = (version: string) => isOlderRelease(version, CLUSTER_PAUSE_MIN_VERSION);

export interface MixedOptions {
  /** The previous release's build (previousRelease().root) and its version. */
  release: string;
  version: string;
  durationMs: number;
  /** INSTANCE_LIVE_WINDOW_MS of the hosts: a stopped process's row counts as live this long. */
  liveWindowMs: number;
  /** The environment of the slots to start per release (the cluster's full ones, and the smaller one if any). */
  slotEnvs: Record<string, string>[];
  log: (line: string) => void;
  /** When the old process of "an old process becomes live during a change" is delivered: once this release's changer
   *  claimed the change, or right after the request (as the preparing pass may end: the release guard's race). */
  joinAt: 'claimed' | 'request';
}

/** What the phases did, for the report. */
export interface MixedSummary {
  steps: string[];
  answers: ChangeAnswer[];
  joined: 'exercised' | 'change already completed' | 'not run';
  joinedAt?: MixedOptions['joinAt'];
  /** Leases an old changer took after the change it stepped had completed (found completed, released). */
  lateAcquisitions: number;
  /** Partition 0's lease an old changer took during a change this release requested: its claim refused by the
   *  database (the release guard), it held that lease and claimed nothing. */
  refusedHolds: number;
}

const STOP_WAIT_MS = 20_000;
/** How long the old process stays live during the change (the change must not complete meanwhile). */
const WAIT_WHILE_OLD_MS = 3_000;
/** How long a change with this release alone may take (the campaign's own changes get as long). */
const CHANGE_WAIT_MS = 60_000;

export class MixedVersionPhases {
  readonly answers: ChangeAnswer[] = [];
  readonly summary: MixedSummary = { steps: [], answers: this.answers, joined: 'not run', lateAcquisitions: 0, refusedHolds: 0 };
  /** Set while a step that must not overlap a fault runs (the main loop waits for it before its next fault). */
  private exclusive: Promise<void> | null = null;
  private loop: Promise<void> | null = null;
  private failure: Error | null = null;
  private ended = false;
  /** When a phase sent each process it stopped its SIGTERM. */
  private readonly stopping = new Map<ChaosHost, number>();
  /** Slots stopped for good (their reservation is never given back: no fault, no replacement). */
  private readonly retired = new Set<number>();
  private operator: OperatorSchedule | null = null;

  constructor(private readonly cluster: ChaosCluster, private readonly db: ChaosDb, private readonly injector: FaultInjector,
    private readonly o: MixedOptions, private changes: PartitionChangeSchedule | null = null) {}

  useChanges(changes: PartitionChangeSchedule | null): void {
    this.changes = changes;
  }

  /** The operator's actions: held while an old process joins a change, and, when the old release's leaders ignore a
   *  cluster pause, while old processes start for the downgrade (no cluster pause in force then). */
  useOperator(operator: OperatorSchedule | null): void {
    this.operator = operator;
  }

  /** Resolves when no exclusive step runs (the fault loop calls it before each fault). */
  async gate(): Promise<void> {
    while (this.exclusive) await this.exclusive;
  }

  /** Run the phases from now (`fromMs`: the load's start), each at its fraction of the duration. */
  start(fromMs: number): void {
    const at = (f: number) => sleep(Math.max(0, fromMs + f * this.o.durationMs - Date.now()));
    this.loop = (async () => {
      await at(0.08);
      // Alone, as operations.md asks (a quiet hour): the migration's locks hold writes to its tables until it commits
      // (seconds on a loaded machine, past the campaign's 2-s lease: every leader loses its lease; production's 60 s
      // outlasts it), which is not a fault under test.
      await this.step('migrate', () => this.exclusively(() => this.migrate()));
      await at(0.16);
      await this.step('start new', () => this.startSlots(null));
      for (let i = 0; this.remaining(true).length > 0; i++) {
        await at(0.26 + 0.06 * i);
        await this.step(`stop old ${i + 1}`, () => this.stopOne(true));
      }
      await at(0.5);
      await this.step('change, this release alone', () => this.changeAlone());
      await at(0.6);
      await this.step('old joins a change', () => this.exclusively(() => this.oldJoinsChange()));
      await at(0.72);
      await this.step('downgrade: start old', () => this.startOldBeside());
      for (let i = 0; this.remaining(false).length > 0; i++) {
        await at(0.78 + 0.05 * i);
        await this.step(`stop new ${i + 1}`, () => this.stopOne(false));
      }
    })().catch((e: unknown) => {
      this.failure = e as Error;
    }).finally(() => {
      this.ended = true;
    });
  }

  /** Whether phases are still to run (the fault loop goes on until they are done: every phase under faults). */
  get running(): boolean {
    return this.loop !== null && !this.ended;
  }

  /** Wait for every phase (after the fault loop); throws a phase's failure. */
  async finish(): Promise<void> {
    await this.loop;
    if (this.failure) throw this.failure;
  }

  private async step(name: string, run: () => Promise<string>): Promise<void> {
    const t = Date.now();
    const detail = await run();
    const line = `${name}: ${detail} (${Date.now() - t} ms)`;
    this.summary.steps.push(line);
    this.o.log(`    mixed-version    ${line}`);
  }

  private async exclusively(run: () => Promise<string>): Promise<string> {
    let done = () => {};
    this.exclusive = new Promise<void>((r) => (done = r));
    try {
      while (this.injector.activeCount > 0) await sleep(100);
      return await run();
    } finally {
      this.exclusive = null;
      done();
    }
  }

  /** Whether a process of the old release is live (the operator then pauses each partition when that release's leaders
   *  ignore a cluster pause, operatorActions.ts). */
  oldLive(): boolean {
    return this.live(true).length > 0;
  }

  /** Live slots of the old release (`old`) or of this one. */
  private live(old: boolean): Slot[] {
    return this.cluster.live().filter((s) => !!s.release === old);
  }

  private async migrate(): Promise<string> {
    const r = await runMigrate(this.db.url);
    if (r.code !== 0) throw new Error(`this release's migrate exited ${r.code} while the old release ran:\n${r.out.slice(-2000)}`);
    return `this release's migrations applied while ${this.live(true).length} old process(es) ran`;
  }

  private async startSlots(release: string | null, count = this.o.slotEnvs.length): Promise<string> {
    const slots = await Promise.all(this.o.slotEnvs.slice(0, count).map((env) => this.cluster.add(env, true, release)));
    return `started ${slots.map((s) => s.holderId).join(', ')}`;
  }

  /** Slots of the old release (`old`) or of this one not yet stopped for good (a killed one's slot is refilled). */
  private remaining(old: boolean): Slot[] {
    return this.cluster.slots.filter((s) => !!s.release === old && !this.retired.has(s.index));
  }

  /** Stop one process of the old release (or of this one) for good: SIGTERM, wait for its exit. A slot that a fault
   *  holds (a kill's replacement not started yet) is waited for. */
  private async stopOne(old: boolean): Promise<string> {
    for (;;) {
      const slot = this.remaining(old).find((s) => s.host && !s.stopped && this.injector.reserve(s));
      if (slot) return this.stopSlot(slot);
      await sleep(200);
    }
  }

  /** The slot's process stopped gracefully (killed after STOP_WAIT_MS); the slot stays empty and reserved. */
  private async stopSlot(slot: Slot): Promise<string> {
    const host = slot.host!;
    this.stopping.set(host, Date.now()); // it may leave the registry at once (a graceful stop), long before it exits
    slot.stopped = true; // out of live() at once
    host.signal('SIGTERM');
    const graceful = await Promise.race([host.exited.then(() => true), sleep(STOP_WAIT_MS).then(() => false)]);
    if (!graceful) {
      host.signal('SIGKILL');
      await host.exited;
    }
    slot.host = null;
    this.retired.add(slot.index);
    return `stopped ${slot.holderId}${graceful ? '' : ` (killed: still running ${STOP_WAIT_MS} ms after SIGTERM)`}`;
  }

  /** Through a live process of this release: POST /api/ops/partitions to a count other than the recorded one; sent
   *  again (the same count: the same change) through another one after a 5xx or no answer (a fault on that process). */
  private async request(): Promise<{ status: number; changeId: string | null; to: number; via: string }> {
    const from = await recordedCount(this.db);
    let to = 0;
    let last = { status: 0, changeId: null as string | null, to, via: '' };
    for (let i = 0; i < 10; i++) {
      const able = this.live(false).filter((s) => s.partitions > 1);
      const via = able[i % Math.max(1, able.length)];
      if (!via) throw new Error('no live process of this release to request a count change through');
      if (i === 0) to = from === via.partitions ? from - 1 : from + 1;
      try {
        const r = await fetch(`${via.host!.api}/ops/partitions`, { method: 'POST', body: JSON.stringify({ count: to }),
          headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(5_000) });
        const body = (await r.json().catch(() => ({}))) as { change?: { changeId?: string } };
        last = { status: r.status, changeId: body.change?.changeId ?? null, to, via: via.holderId };
        if (r.status < 500) return last;
      } catch {
        last = { status: 0, changeId: null, to, via: via.holderId };
      }
      await sleep(500);
    }
    return last;
  }

  private async completed(changeId: string, waitMs: number): Promise<{ completedAtMs: number | null; changer: string | null }> {
    const end = Date.now() + waitMs;
    for (;;) {
      const c = (await readChanges(this.db).catch(() => [])).find((x) => x.changeId === changeId);
      if (c?.completedAtMs != null || Date.now() > end) return { completedAtMs: c?.completedAtMs ?? null, changer: c?.changer ?? null };
      await sleep(100);
    }
  }

  /** This release alone: the schedule's changes are answered 202 again; one more is made here and must complete. */
  private async changeAlone(): Promise<string> {
    await this.changes?.hold();
    try {
      const r = await this.request();
      if (r.status !== 202 || !r.changeId) throw new Error(`with this release alone, POST /ops/partitions {count: ${r.to}} via ${r.via} answered ${r.status}`);
      const c = await this.completed(r.changeId, CHANGE_WAIT_MS);
      if (c.completedAtMs === null) throw new Error(`change ${r.changeId} to ${r.to} not completed within ${CHANGE_WAIT_MS} ms with this release alone`);
      return `change to ${r.to} via ${r.via} completed by ${c.changer}`;
    } finally {
      this.changes?.release();
    }
  }

  /** An old process becomes live while a change is active: it starts, its database traffic is held (its instance row
   *  ages out of the live window) while a change is requested through this release, then delivered. The change must
   *  wait for it (it is stopped after a while) and complete without it. */
  private async oldJoinsChange(): Promise<string> {
    await this.changes?.hold();
    await this.operator?.hold();
    try {
      const [slot] = await Promise.all([this.cluster.add(this.o.slotEnvs[0]!, true, this.o.release)]);
      if (!this.injector.reserve(slot!)) throw new Error('a fault took the new slot');
      const s = slot!;
      // Delivered once a changer of this release claimed the change (it holds lease 0 from then on), or 500 ms after the
      // request: as the small table's preparing pass ends, so the old changer may take lease 0 first and try to claim
      // (the database refuses it: the release guard, reliability.md).
      let deliver = () => {};
      const held = s.proxy.holdUntil(new Promise<void>((resolve) => (deliver = resolve)), 'resume');
      await sleep(this.o.liveWindowMs + 700);
      const r = await this.request();
      if (r.changeId) await (this.o.joinAt === 'claimed' ? this.claimed(r.changeId, 10_000) : sleep(500));
      this.summary.joinedAt = this.o.joinAt;
      deliver();
      await held;
      await this.liveAgain(s.holderId);
      const atLive = r.changeId ? await this.completed(r.changeId, 0) : null;
      if (r.status !== 202 || !r.changeId) {
        await this.stopSlot(s);
        this.summary.joined = 'not run';
        return `change to ${r.to} answered ${r.status} (the held old process still counted as live): not exercised`;
      }
      const whileLive = atLive?.completedAtMs != null ? atLive : await this.completed(r.changeId, WAIT_WHILE_OLD_MS);
      const stopped = await this.stopSlot(s);
      const c = whileLive.completedAtMs !== null ? whileLive : await this.completed(r.changeId, CHANGE_WAIT_MS);
      this.summary.joined = atLive?.completedAtMs != null ? 'change already completed' : 'exercised';
      return `${s.holderId} (${this.o.version}) live again during change ${r.changeId} to ${r.to}: ` +
        `${whileLive.completedAtMs === null ? 'the change waited for it' : `completed while it was live, by ${whileLive.changer}`}; ${stopped}; ` +
        `${c.completedAtMs === null ? `NOT completed within ${CHANGE_WAIT_MS} ms after` : `completed by ${c.changer}`}`;
    } finally {
      this.changes?.release();
      this.operator?.release();
    }
  }

  /** Until a changer claimed the change (or `waitMs`). */
  private async claimed(changeId: string, waitMs: number): Promise<void> {
    for (const end = Date.now() + waitMs; Date.now() < end;) {
      const c = await this.db.sql<{ changer: string | null }>('SELECT changer FROM submission_manager_partition_changes WHERE change_id = $1', [changeId]).catch(() => []);
      if (c[0]?.changer) return;
      await sleep(50);
    }
  }

  /** Until the process's instance row is live again (its first heartbeat after its traffic was delivered). */
  private async liveAgain(holderId: string): Promise<void> {
    for (const end = Date.now() + 10_000; Date.now() < end;) {
      const r = await this.db.sql<{ age: number | string }>(`SELECT ${chaosSql.epochMs(chaosSql.now())} - ${chaosSql.epochMs('last_seen_at')} AS age
        FROM submission_manager_instances WHERE holder_id = $1`, [holderId]).catch(() => []);
      if (r[0] && Number(r[0].age) < this.o.liveWindowMs / 2) return;
      await sleep(50);
    }
  }

  /** The downgrade: no change in progress (the schedule's completes first), then old processes beside the new ones. A
   *  cluster pause in force holds them when their leaders read it (0.2.0 on); otherwise the operator lifts it first. */
  private async startOldBeside(): Promise<string> {
    const operator = pausesEachPartition(this.o.version) ? this.operator : null;
    await this.changes?.hold();
    await operator?.hold();
    try {
      return await this.startSlots(this.o.release, 2); // two: a rollback's first processes (one fewer start on a loaded machine)
    } finally {
      this.changes?.release(); // its requests now find an old process live: 409
      operator?.release(); // its pauses now go to each partition
    }
  }

  /** After the run (every process stopped): the count-change rules of the mixed-version campaign. */
  async judge(): Promise<Violation[]> {
    const v: Violation[] = [];
    const old = this.cluster.all.filter((h) => h.release !== undefined);
    const oldChangers = new Set(old.flatMap((h) => h.holderIds.map(partitionChangerHolderId)));
    const list = [...oldChangers];
    const changes = await readChanges(this.db);
    const guarded = new Set((await this.db.sql<{ change_id: string }>(
      'SELECT change_id FROM submission_manager_partition_changes WHERE requested_release IS NOT NULL'))
      .map((r) => String(r.change_id).toLowerCase()));
    if (list.length) {
      const marks = list.map((_, i) => `$${i + 1}`).join(', ');
      const taken = await this.db.sql<{ holder_id: string; lease_name: string; at_ms: number | string }>(
        `SELECT holder_id, lease_name, ${chaosSql.epochMs('at')} AS at_ms FROM submission_manager_lease_events
          WHERE event = 'acquired' AND holder_id IN (${marks}) ORDER BY seq`, list);
      // Taken while a change was active: it took part — unless it is partition 0's lease of a change this release
      // requested, whose claim the database refuses it (it takes the next leases only after a claim): counted.
      // Taken after the completion (its step read the layout before): its claim matches nothing, it finds the change
      // completed and lets go, as this release's changers do.
      for (const e of taken) {
        const at = Number(e.at_ms);
        const during = changes.find((c) => c.requestedAtMs <= at && at < (c.completedAtMs ?? Infinity));
        if (during && !e.lease_name.includes(PARTITION_SEPARATOR) && guarded.has(during.changeId.toLowerCase())) this.summary.refusedHolds++;
        else if (during) v.push({ check: 'mixed_version', message: `the old release's changer ${e.holder_id} acquired ${e.lease_name} during change ${during.changeId} (${during.fromCount} → ${during.toCount}): it took part` });
        else this.summary.lateAcquisitions++;
      }
    }
    for (const c of changes) {
      if (c.changer && oldChangers.has(c.changer)) v.push({ check: 'mixed_version', message: `change ${c.changeId} (${c.fromCount} → ${c.toCount}) claimed by the old release's changer ${c.changer}` });
    }
    for (const a of this.answers) {
      const anyOld = old.some((h) => h.startedAt - 2_000 <= a.answeredMs && (h.exitedAt ?? Infinity) >= a.atMs - this.o.liveWindowMs - 1_000);
      const surelyOld = old.some((h) => h.startedAt <= a.atMs - 1_000 && (this.stopping.get(h) ?? h.exitedAt ?? Infinity) > a.answeredMs
        && !this.faulted(h, a.atMs - this.o.liveWindowMs - 1_000, a.answeredMs));
      if (a.olderRelease && !anyOld) v.push({ check: 'mixed_version', message: `POST /ops/partitions {count: ${a.to}} via ${a.via} answered 409 older-release-live with no old process live (${a.olderInstances.join(', ')})` });
      if (a.status === 202 && surelyOld) v.push({ check: 'mixed_version', message: `POST /ops/partitions {count: ${a.to}} via ${a.via} answered 202 while an old process was live` });
    }
    return v;
  }

  /** Whether a fault hit the process's slot (or the whole database) between `from` and `to`. */
  private faulted(h: ChaosHost, from: number, to: number): boolean {
    const slot = this.cluster.holders.get(h.holderIds[0]!);
    return this.injector.faults.some((f) => f.kind !== 'partition_change' && (f.slot === null || f.slot === slot)
      && f.startedAt <= to && (f.endedAt || Infinity) >= from);
  }
}
