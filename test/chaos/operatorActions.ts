// The campaign's operator (`--operator-actions`): on a schedule of its own, alongside the faults and the changes of
// the count, it pauses and resumes the cluster (POST /api/ops/execution/pause|resume), drains it (POST
// /api/ops/lease/release), all without ?partition, each through an instance drawn at random — the one with a smaller
// EXECUTOR_PARTITIONS 40 % of the time — and slows the provider down for a few seconds (calls in flight when the
// hand-backs of a drain or a fair share happen). With --partition-changes a pause may ask for a change of the count
// while it lasts. Every action is recorded with its answer time (history.operatorActions; the rules: checkerOperator.ts).
import type { ChaosCluster, Slot } from './cluster.js';
import type { ProviderProcess } from './providerLauncher.js';
import type { OperatorAction } from './history.js';
import { sleep, type Rng } from './rng.js';

export interface OperatorOptions {
  /** Between one episode's end and the next (ms, drawn uniformly). */
  gapMs: [number, number];
  /** How long a pause lasts before its resume is asked for. */
  pauseMs: [number, number];
  /** How long the provider stays slow. */
  slowMs: [number, number];
  /** The provider's typical answer time in a slow phase, and outside one. */
  slowLatencyMs: number;
  latencyMs: number;
  /** Ask for a change of the count now (--partition-changes): a pause draws it half of the time. */
  changeNow?: () => void;
  /** Mixed-version campaign: while `when()` (an earlier release is live) pause each partition (`?partition=k`,
   *  k < the recorded count), as docs/operations.md asks during a rolling deployment (an earlier release's leaders read
   *  only their partition's flag), recorded as one action answered with the last answer; resume each k < max through
   *  an earlier release's instance, `?partition=all` through this release's (every flag, the cluster's too). */
  perPartition?: { count: () => Promise<number>; max: number; when: () => boolean };
  log: (line: string) => void;
}

/** The share of actions sent through the instance with the smaller EXECUTOR_PARTITIONS (when it is live). */
const SMALLER_SHARE = 0.4;
const ANSWER_TIMEOUT_MS = 5_000;

export class OperatorSchedule {
  readonly actions: OperatorAction[] = [];
  private loop: Promise<void> | null = null;
  private stopped = false;
  private wake: () => void = () => {};
  /** A cluster pause answered by this release is in force: only this release's resume clears its flag (an earlier
   *  release's resumes each partition's, and this release's leaders would stay paused by the cluster's). */
  private clusterPaused = false;
  /** The episode in progress (a pause lasts until its resume was answered), and whether new ones are held back. */
  private current: Promise<void> = Promise.resolve();
  private held = false;

  constructor(private readonly cluster: ChaosCluster, private readonly provider: ProviderProcess, private readonly rng: Rng,
    private readonly o: OperatorOptions) {}

  start(): void {
    this.loop = (async () => {
      while (!this.stopped) {
        await this.nap(this.rng.int(...this.o.gapMs));
        if (this.stopped) break;
        if (this.held) continue;
        const kind = this.rng.weighted({ pause: 0.45, drain: 0.25, slow: 0.3 });
        this.current = (kind === 'pause' ? this.pause() : kind === 'drain' ? this.drain() : this.slow())
          .catch((e: unknown) => this.o.log(`    operator ${kind} harness error: ${(e as Error).message}`));
        await this.current;
      }
    })();
  }

  /** No new episode until release(); resolves once the one in progress ended (a pause resumed). The mixed-version
   *  phases hold it while they start an earlier release's process: a cluster pause does not hold its leaders, so an
   *  operator lifts it (or pauses each partition) before a rollback, as docs/operations.md says. */
  async hold(): Promise<void> {
    this.held = true;
    await this.current;
  }

  release(): void {
    this.held = false;
  }

  /** No new episode; the one in progress ends (a pause is resumed, the provider's latency restored). */
  async stop(): Promise<void> {
    this.stopped = true;
    this.wake();
    await this.loop;
  }

  /** Sleep, cut short by stop(). */
  private nap(ms: number): Promise<void> {
    return this.stopped ? Promise.resolve() : new Promise<void>((r) => {
      this.wake = r;
      setTimeout(r, ms);
    });
  }

  /** A live instance of this release, else any (with none, the cluster's flag waits for this release's next resume). */
  private viaThisRelease(): Slot | null {
    const own = this.cluster.live().filter((s) => !s.release);
    return own.length ? this.rng.pick(own) : this.via();
  }

  private via(): Slot | null {
    const live = this.cluster.live();
    if (!live.length) return null;
    const widest = Math.max(...live.map((s) => s.partitions));
    const smaller = live.filter((s) => s.partitions < widest);
    return smaller.length && this.rng.chance(SMALLER_SHARE) ? this.rng.pick(smaller) : this.rng.pick(live.filter((s) => s.partitions === widest));
  }

  /** POST an admin route through `slot` (or a drawn one) and record it. */
  private async send(action: 'pause' | 'resume' | 'drain', slot = this.via()): Promise<OperatorAction> {
    const path = action === 'drain' ? 'ops/lease/release' : `ops/execution/${action}`;
    const rec: OperatorAction = { action, via: slot?.holderId ?? null, viaPartitions: slot?.partitions ?? null, requestedAt: Date.now(), answeredAt: null, status: null, detail: '' };
    this.actions.push(rec);
    if (!slot?.host) {
      rec.detail = 'no live instance';
      return rec;
    }
    try {
      const post = (query = '') => fetch(`${slot.host!.api}/${path}${query}`, {
        method: 'POST', body: JSON.stringify({ reason: 'chaos campaign' }), headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(ANSWER_TIMEOUT_MS),
      });
      const pp = this.o.perPartition;
      if (pp && action === 'resume' && !slot.release) {
        const r = await post('?partition=all');
        await r.text();
        rec.answeredAt = Date.now();
        rec.status = r.status;
        rec.detail = 'every partition (?partition=all)';
        if (r.status < 300) this.clusterPaused = false;
      } else if (pp && (action === 'resume' || (action === 'pause' && pp.when()))) {
        const n = action === 'pause' ? await pp.count() : pp.max;
        const statuses: number[] = [];
        for (let k = 0; k < n; k++) {
          const r = await post(`?partition=${k}`);
          await r.text();
          statuses.push(r.status);
        }
        rec.answeredAt = Date.now();
        // A resume beyond the recorded count: an earlier release refuses that partition (400); nothing holds there.
        const counted = action === 'pause' ? statuses : statuses.filter((st) => st !== 400);
        rec.status = counted.length ? Math.max(...counted) : 400;
        rec.detail = `per partition (${statuses.join(', ')})`;
      } else {
        const r = await post();
        const body = (await r.json().catch(() => ({}))) as { partitions?: unknown[] };
        rec.answeredAt = Date.now();
        rec.status = r.status;
        if (action === 'pause' && r.status < 300 && !slot.release) this.clusterPaused = true;
        rec.detail = `${Array.isArray(body.partitions) ? body.partitions.length : 1} partition(s) in the answer`;
      }
    } catch (e) {
      rec.detail = `no answer: ${(e as Error).message}`;
    }
    this.o.log(`    + operator ${action.padEnd(7)} via ${rec.via} (EXECUTOR_PARTITIONS ${rec.viaPartitions}): ${rec.status ?? 'no answer'} ` +
      `after ${Math.round((rec.answeredAt ?? Date.now()) - rec.requestedAt)} ms${rec.detail ? `, ${rec.detail}` : ''}`);
    return rec;
  }

  private async pause(): Promise<void> {
    await this.send('pause');
    if (this.o.changeNow && this.rng.chance(0.5)) this.o.changeNow();
    await this.nap(this.rng.int(...this.o.pauseMs));
    // Resumed whatever happens (stop() included): answered 2xx by some instance, or given up after 10 tries.
    for (let i = 0; i < 10; i++) {
      const r = await this.send('resume', this.o.perPartition && this.clusterPaused ? this.viaThisRelease() : this.via());
      if (r.status !== null && r.status < 300) return;
      await sleep(1_000);
    }
    this.o.log('    operator resume: not answered 2xx in 10 tries');
  }

  private async drain(): Promise<void> {
    await this.send('drain');
  }

  private async setLatency(action: 'slow' | 'fast', ms: number): Promise<void> {
    const rec: OperatorAction = { action, via: null, viaPartitions: null, requestedAt: Date.now(), answeredAt: null, status: null, detail: `provider latency ${ms} ms` };
    this.actions.push(rec);
    rec.status = await this.provider.setLatency(ms);
    rec.answeredAt = Date.now();
    this.o.log(`    + operator ${action.padEnd(7)} provider latency ${ms} ms: ${rec.status ?? 'no answer'}`);
  }

  /** A slow phase with a drain inside it: the hand-backs happen with calls in flight. */
  private async slow(): Promise<void> {
    const length = this.rng.int(...this.o.slowMs);
    await this.setLatency('slow', this.o.slowLatencyMs);
    try {
      await this.nap(Math.round(length * 0.4));
      if (!this.stopped) await this.send('drain');
      await this.nap(Math.round(length * 0.6));
    } finally {
      await this.setLatency('fast', this.o.latencyMs);
    }
  }
}
