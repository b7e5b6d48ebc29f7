// Issue 26 in the campaign (`--partition-changes`, with --partitions C > 1): on a schedule of its own, alongside the
// other faults, POST a random new partition count 1..C to a live host (`POST /api/ops/partitions {count}`), wait until
// the change completes (its row in SQL), and record it as a fault of kind partition_change on every partition of the
// new count: its resume is measured from the completion. A POST whose answer is lost is retried with the same count,
// to any live host (harmless: the same change). The run's history carries every change (readChanges) for the checker.
import type { ChaosCluster, ChaosDb, Slot } from './cluster.js';
import { chaosSql } from './cluster.js';
import type { FaultInjector, FaultRecord } from './faults.js';
import type { PartitionChangeRow } from './history.js';
import { sleep, type Rng } from './rng.js';

/** The count the database records now (1 before any process recorded one). */
export async function recordedCount(db: ChaosDb): Promise<number> {
  const r = await db.sql<{ n: number | string }>('SELECT partition_count AS n FROM submission_manager_partition_count WHERE id = 1');
  return r[0] ? Number(r[0].n) : 1;
}

/** Every change the database recorded, oldest first (database times as epoch ms). */
export async function readChanges(db: ChaosDb): Promise<PartitionChangeRow[]> {
  const rows = await db.sql<Record<string, unknown>>(`SELECT change_id, from_count, to_count, state, changer, rows_moved,
      ${chaosSql.epochMs('requested_at')} AS requested_ms, ${chaosSql.epochMs('switched_at')} AS switched_ms,
      ${chaosSql.epochMs('completed_at')} AS completed_ms
    FROM submission_manager_partition_changes ORDER BY requested_at, change_id`);
  const ms = (x: unknown) => (x == null ? null : Number(x));
  return rows.map((r) => ({
    changeId: String(r.change_id), fromCount: Number(r.from_count), toCount: Number(r.to_count), state: String(r.state),
    changer: (r.changer as string | null) ?? null, rowsMoved: Number(r.rows_moved),
    requestedAtMs: Number(r.requested_ms), switchedAtMs: ms(r.switched_ms), completedAtMs: ms(r.completed_ms),
  }));
}

export interface ChangeScheduleOptions {
  /** C: the hosts' EXECUTOR_PARTITIONS; a change is to a count 1..C other than the recorded one. */
  maxCount: number;
  /** Pause between a change's resume and the next request (ms, drawn uniformly). */
  gapMs: [number, number];
  /** How long a change may take to complete before the injector gives up waiting (the checker then reports it). */
  completeWaitMs: number;
  log: (line: string) => void;
  /** Mixed-version campaign: every request's answer is recorded here (judged by mixedVersion.ts), and a 409
   *  older-release-live is no failure. */
  answers?: ChangeAnswer[];
  /** The instances requests go through (default every live one). */
  via?: (slot: Slot) => boolean;
}

/** A request's last answer: when sent and answered, through whom, and the instances a 409 older-release-live named. */
export interface ChangeAnswer { atMs: number; answeredMs: number; to: number; via: string; status: number | null; olderRelease: boolean; olderInstances: string[] }

type Answer = { status: number; type?: string; olderInstances?: string[]; change?: { changeId?: string; fromCount?: number } } | null;

async function post(api: string, count: number): Promise<Answer> {
  try {
    const r = await fetch(`${api}/ops/partitions`, {
      method: 'POST', body: JSON.stringify({ count }), headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(5_000),
    });
    const body = (await r.json().catch(() => ({}))) as { type?: string; olderInstances?: { holderId: string }[]; change?: { changeId?: string; fromCount?: number } };
    return { status: r.status, ...(body.type ? { type: body.type } : {}), ...(body.change ? { change: body.change } : {}),
      ...(body.olderInstances ? { olderInstances: body.olderInstances.map((i) => i.holderId) } : {}) };
  } catch {
    return null; // timeout or connection error: the answer is lost (the change may be recorded)
  }
}

export class PartitionChangeSchedule {
  private loop: Promise<void> | null = null;
  private stopped = false;
  /** The request (and wait) in progress, and whether new ones are held back (hold()). */
  private current: Promise<void> = Promise.resolve();
  private held = false;
  private wake: () => void = () => {};

  constructor(private readonly cluster: ChaosCluster, private readonly db: ChaosDb, private readonly rng: Rng,
    private readonly injector: FaultInjector, private readonly o: ChangeScheduleOptions) {}

  start(): void {
    this.loop = (async () => {
      while (!this.stopped) {
        await new Promise<void>((r) => {
          this.wake = r;
          setTimeout(r, this.rng.int(...this.o.gapMs));
        });
        if (this.stopped) break;
        if (this.held) continue;
        this.current = this.once().catch((e: unknown) => this.o.log(`    partition_change   harness error: ${(e as Error).message}`));
        await this.current;
      }
    })();
  }

  /** Request the next change now (unless one is in progress): the operator's pause asks for one while it lasts. */
  now(): void {
    this.wake();
  }

  /** No new request until release(); resolves once the one in progress completed (or was given up on). */
  async hold(): Promise<void> {
    this.held = true;
    await this.current;
  }

  release(): void {
    this.held = false;
  }

  /** No new change; with `wait`, the one in progress is awaited (completed, or given up on after completeWaitMs). */
  async stop(wait = true): Promise<void> {
    this.stopped = true;
    this.wake();
    if (wait) await this.loop;
  }

  private async once(): Promise<void> {
    const from = await recordedCount(this.db);
    const choices = Array.from({ length: this.o.maxCount }, (_, k) => k + 1).filter((n) => n !== from);
    const to = this.rng.pick(choices);
    // Through an instance that can run the new count (one with a smaller EXECUTOR_PARTITIONS refuses it with 409).
    const able = () => this.cluster.live().filter((s) => s.partitions >= to && (this.o.via?.(s) ?? true));
    const live = able();
    if (live.length === 0) return;
    let slot = this.rng.pick(live);
    const f: FaultRecord = {
      kind: 'partition_change', slot: slot.index, victim: null, victimWasLeader: false, epochAtFault: null, startedAt: Date.now(), endedAt: 0,
      measureFrom: 0, exclude: null, detail: `${from} → ${to} via ${slot.holderId}`, resumedAt: null, alongside: true, partitions: [...Array(to).keys()],
    };
    this.injector.faults.push(f);
    let answer: Answer = null;
    for (let i = 0; i < 5 && !(answer && answer.status < 500); i++) {
      if (i > 0) slot = this.rng.pick(able().length ? able() : live);
      answer = await post(slot.host?.api ?? '', to);
    }
    const olderRelease = answer?.status === 409 && !!answer.type?.endsWith('older-release-live');
    this.o.answers?.push({ atMs: f.startedAt, answeredMs: Date.now(), to, via: slot.holderId, status: answer?.status ?? null, olderRelease,
      olderInstances: answer?.olderInstances ?? [] });
    if (olderRelease && this.o.answers) {
      this.injector.faults.splice(this.injector.faults.indexOf(f), 1); // nothing changed: no fault, no resume to judge
      this.o.log(`    partition_change   ${from} → ${to} via ${slot.holderId}: 409 older-release-live (${(answer?.olderInstances ?? []).join(', ')})`);
      return;
    }
    const changeId = answer?.change?.changeId;
    if (!answer || answer.status !== 202 || !changeId) {
      f.endedAt = f.measureFrom = Date.now();
      f.detail += `: answered ${answer?.status ?? 'nothing'}`;
      throw new Error(`POST /ops/partitions {count: ${to}} answered ${answer?.status ?? 'nothing'} (recorded count ${from})`);
    }
    const end = Date.now() + this.o.completeWaitMs;
    let done: PartitionChangeRow | undefined;
    while (!done && Date.now() < end) {
      done = (await readChanges(this.db).catch(() => [])).find((c) => c.changeId === changeId && c.completedAtMs !== null);
      if (!done) await sleep(100);
    }
    f.endedAt = Date.now();
    if (!done) {
      f.measureFrom = f.endedAt;
      f.detail += `: change ${changeId} not completed within ${this.o.completeWaitMs} ms`;
      this.o.log(`    partition_change   ${f.detail}`);
      return;
    }
    f.measureFrom = done.completedAtMs!;
    f.detail = `${done.fromCount} → ${done.toCount} via ${slot.holderId}: completed ${Math.round(done.completedAtMs! - done.requestedAtMs)} ms after the request ` +
      `(switch → completion ${Math.round(done.completedAtMs! - (done.switchedAtMs ?? done.requestedAtMs))} ms, ${done.rowsMoved} rows moved)`;
    f.resumedAt = await this.injector.waitResumed(f);
    this.o.log(`    + partition_change ${f.detail}; resumed ${f.resumedAt === null ? 'not yet' : `after ${Math.round(f.resumedAt - f.measureFrom)} ms`}`);
  }
}
