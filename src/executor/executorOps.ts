// Operations the executor consults on the leader path: the pause flags (the cluster's and its partition's) and the
// pending handover request (read from SQL in one round trip once per leader tick and beside every schedule refresh —
// never per attempt), the fenced completion of a handover, leader-only maintenance (retention; maintenance.ts: after the
// batch, bounded, backed off, never while paused), and observers (metrics). NO_OPS keeps the executor usable
// without any of it (unit and system tests that do not need them).
import type { AppMetrics } from '../observability/metrics.js';
import type { Logger } from '../observability/logger.js';
import type { ExecutionControl, OpsStore } from '../store/opsPorts.js';
import type { StartHold } from '../store/intentPorts.js';
import type { LeaseToken } from '../store/ports.js';
import type { TickSummary } from './tickSummary.js';
import type { Maintenance } from './maintenance.js';
import type { Clock } from '../lease/clock.js';
import { RepeatLog } from '../lease/repeatLog.js';

export interface ExecutorOps {
  /** Once per leader tick, after acquire/rebuild and before the loop: read the flags (the pause flag stays on
   *  the hot path: nothing starts before it is read). */
  leaderTick(sum: TickSummary): Promise<void>;
  /** Leader-only housekeeping, run at the tick's end (null: none). */
  readonly maintenance: Maintenance | null;
  /** Beside each schedule refresh: re-read the flags (one primary-key read). */
  refreshControl(): Promise<void>;
  /** Re-read the flags unless the last read began within one refresh interval (a stall or a slow start left them
   *  older). true: the flags in force come from a read begun within one interval of now, so a start or a send that
   *  follows at once rests on it — a pause holds every send, and a drain every start, from one interval after its
   *  answer. A read answered an interval or more after it began (a stall or a slow reply meanwhile: its snapshot may
   *  predate the request) is not fresh: read once more; false when that one is late too (start and send nothing on
   *  these flags). Resolves true at once when they are fresh (no SQL). */
  freshControl(): Promise<boolean>;
  /** A START (`start`) or a provider call (`send`) held back for want of fresh flags: freshControl() false, or (at
   *  the send) its read failed. Counted: the metric and the next tick summary's staleControlHolds. */
  staleControlHeld(step: 'start' | 'send'): void;
  /** The database held a START (`by`: a pause or a pending drain it read as the START ran, which the flags in force
   *  did not show: it committed after the last read began): log it and read the flags now. */
  startHeld(by: StartHold, intents: number): Promise<void>;
  /** false while the cluster or this partition is paused (as last read): start nothing, send nothing not yet sent. */
  mayStart(): boolean;
  /** A pending drain/handover request observed at the last refreshControl (null: none). While non-null the
   *  executor starts nothing, lets in-flight calls finish, writes their completions under the fence, calls
   *  handoverCompleted, releases the lease row and ends the tick with stopReason 'handover'. It does not stand
   *  down afterwards: any instance (this one included) may acquire at its next tick. */
  handoverRequest(): { requestId: string } | null;
  /** Called once the handover's in-flight work is written, just before the lease row is released. */
  handoverCompleted(token: LeaseToken, requestId: string): Promise<void>;
  /** The gate refused a provider call (leadership lost, or too little lease left to send it). */
  blockedNotLeader(): void;
  /** A completion the database refuses every time was dropped (CompletionBuffer). */
  completionUnwritable?(): void;
  tickFinished(sum: TickSummary): void;
}

export const NO_OPS: ExecutorOps = {
  leaderTick: async () => {},
  maintenance: null,
  refreshControl: async () => {},
  freshControl: async () => true,
  staleControlHeld: () => {},
  startHeld: async () => {},
  mayStart: () => true,
  handoverRequest: () => null,
  handoverCompleted: async () => {},
  blockedNotLeader: () => {},
  tickFinished: () => {},
};

/** Id prefix of a hand-back this instance asked of itself (the fair share): never in SQL. */
const LOCAL_HAND_BACK = 'local-hand-back:';

/** Which pause holds a partition: the cluster's (every partition), its own, or none. */
export type PauseScope = 'cluster' | 'partition' | null;

/** The control reads' order and age. Reads may overlap (a gate's beside the cadence's): only the newest begun so far
 *  is applied, and the flags in force are as old as the read applied began (a failed read changes nothing). */
class ControlReads {
  private begun = 0;
  private applied = 0;
  /** When the read whose flags are in force began (monotonic; null: none applied yet). */
  private appliedBeganMs: number | null = null;
  /** The newest read begun, while it is in flight (fresh() shares it). */
  private inFlight: { beganMs: number; done: Promise<void> } | null = null;

  constructor(
    private readonly clock: Clock,
    /** The oldest read the flags in force may rest on. */
    private readonly maxAgeMs: number,
    private readonly read: () => Promise<ExecutionControl>,
    /** Takes a read's flags into force (run only for the newest read begun so far). */
    private readonly apply: (c: ExecutionControl) => void,
    /** A read answered maxAgeMs or more after it began (`readMs`: how long it took), applied or not. */
    private readonly late: (readMs: number) => void,
  ) {}

  /** Begin a read now (the cadence's: never shares one in flight). */
  begin(): Promise<void> {
    const seq = ++this.begun;
    const beganMs = this.clock.nowMs();
    const done: Promise<void> = this.readAndApply(seq, beganMs).finally(() => {
      if (this.inFlight?.done === done) this.inFlight = null;
    });
    this.inFlight = { beganMs, done };
    return done;
  }

  /** ExecutorOps.freshControl (its contract is there): whether the flags in force rest on a read begun within
   *  maxAgeMs of now, sharing a read in flight begun within it or reading, at most two reads. */
  async fresh(): Promise<boolean> {
    const fresh = (beganMs: number | null) => beganMs !== null && this.clock.nowMs() - beganMs < this.maxAgeMs;
    // Judged again once the read is applied: a start or a send follows its answer, not its beginning.
    for (let round = 0; round < 2; round++) {
      if (fresh(this.appliedBeganMs)) return true;
      const pending = this.inFlight;
      if (pending !== null && fresh(pending.beganMs)) await pending.done; // applies it (or a newer one), or throws
      else await this.begin();
    }
    return fresh(this.appliedBeganMs);
  }

  private async readAndApply(seq: number, beganMs: number): Promise<void> {
    const c = await this.read();
    const readMs = this.clock.nowMs() - beganMs;
    if (readMs >= this.maxAgeMs) this.late(readMs);
    if (seq < this.applied) return; // a newer read has already been applied
    this.applied = seq;
    this.appliedBeganMs = beganMs;
    this.apply(c);
  }
}

export class ExecutionOps implements ExecutorOps {
  private pausedFlag: boolean | null = null;
  private pauseScope: PauseScope = null;
  private pendingHandover: string | null = null;
  /** A hand-back this instance asked of its own leader (fair share): drained like a handover, recorded nowhere. */
  private localHandBack: string | null = null;
  private localHandBacks = 0;
  private readonly reads: ControlReads;
  /** control_read_late: warn when news, then once a minute (with the repeats), debug in between. */
  private readonly lateReads = new RepeatLog(60_000);
  /** Starts and sends held for want of fresh flags since the last tick summary (staleControlHeld). */
  private staleHolds = 0;

  constructor(
    private readonly store: OpsStore,
    private readonly leaseName: string,
    /** The cluster-scope control's name (limits.ts clusterControlName), read beside this partition's row. */
    private readonly clusterName: string,
    readonly maintenance: Maintenance | null,
    private readonly log: Logger,
    private readonly clock: Clock,
    /** SCHEDULE_REFRESH_INTERVAL_MS: the oldest control read a start or a send may rest on. */
    private readonly maxReadAgeMs: number,
    private readonly metrics?: AppMetrics,
  ) {
    this.reads = new ControlReads(clock, maxReadAgeMs, () => this.store.getExecutionControl(this.leaseName, this.clusterName),
      (c) => this.applyControl(c), (readMs) => this.controlReadLate(readMs));
  }

  /** Whether a pause held this partition at the last read (null before the first read: only leaders read it). */
  get paused(): boolean | null {
    return this.pausedFlag;
  }

  /** Which pause held it at the last read (the cluster's wins when both are set). */
  get pausedBy(): PauseScope {
    return this.pauseScope;
  }

  async leaderTick(sum: TickSummary): Promise<void> {
    await this.refreshControl();
    sum.paused = this.pausedFlag === true;
  }

  refreshControl(): Promise<void> {
    return this.reads.begin();
  }

  freshControl(): Promise<boolean> {
    return this.reads.fresh();
  }

  staleControlHeld(step: 'start' | 'send'): void {
    this.staleHolds++;
    this.metrics?.blockedStaleControl(step);
  }

  startHeld(by: StartHold, intents: number): Promise<void> {
    this.log.info({ event: 'start_held', lease_name: this.leaseName, by, intents },
      by === 'paused' ? 'the database held a start: paused (not yet seen by this leader); reading the flags'
        : 'the database held a start: a drain is pending (not yet seen by this leader); reading the flags');
    return this.refreshControl();
  }

  /** A control read took a refresh interval or more: its flags rest on nothing a start or a send may follow. One such
   *  read costs a second read; while every read is that slow the leader starts and sends nothing (counted at each
   *  hold), so this is what says why. Not reset by a read on time: a database hovering at the interval warns once a
   *  minute, not at every late read. */
  private controlReadLate(readMs: number): void {
    const { level, repeats } = this.lateReads.next('late', this.clock.nowMs());
    const fields = { event: 'control_read_late', lease_name: this.leaseName, read_ms: Math.round(readMs),
      refresh_interval_ms: this.maxReadAgeMs, ...(repeats ? { repeats } : {}) };
    if (level === 'info') {
      this.log.warn(fields, 'a control read was answered one SCHEDULE_REFRESH_INTERVAL_MS or more after it began: no start or send rests '
        + 'on it; while reads stay this slow nothing starts or is sent (keep the interval well above the database round trip)');
    } else this.log.debug(fields, 'control read late again');
  }

  /** The flags of the newest control read begun so far (ControlReads decides which read that is). */
  private applyControl(c: ExecutionControl): void {
    const scope: PauseScope = c.cluster?.paused ? 'cluster' : c.paused ? 'partition' : null;
    if (scope !== this.pauseScope && (this.pausedFlag !== null || scope !== null)) {
      const flag = scope === 'cluster' ? c.cluster! : scope === 'partition' ? c : (this.pauseScope === 'cluster' ? c.cluster! : c);
      this.log.info({ event: scope ? 'execution_paused_observed' : 'execution_resumed_observed', lease_name: this.leaseName,
        scope: scope ?? this.pauseScope, changed_by: flag.changedBy, changed_at: flag.changedAt?.toISOString() ?? null, reason: flag.reason },
      scope === 'cluster' ? 'cluster is paused: starting nothing' : scope === 'partition' ? 'partition is paused: starting nothing'
        : 'resumed: neither the cluster nor this partition is paused');
    }
    this.pausedFlag = scope !== null;
    this.pauseScope = scope;
    if (c.pendingHandoverId !== this.pendingHandover && c.pendingHandoverId !== null) {
      this.log.warn({ event: 'handover_request_observed', lease_name: this.leaseName, request_id: c.pendingHandoverId },
        'handover requested: starting nothing more, finishing in-flight attempts, then releasing the lease');
    }
    this.pendingHandover = c.pendingHandoverId;
  }

  /** A pending handover request as of the last refreshControl (the leader drains, then releases), else a local hand-back. */
  handoverRequest(): { requestId: string } | null {
    const id = this.pendingHandover ?? this.localHandBack;
    return id === null ? null : { requestId: id };
  }

  /** Drain and release this partition as for a handover, at this instance's own request (the fair share): local,
   *  so it ends with the lease it was meant for (cancelHandBack) and never reaches the next leader. */
  requestHandBack(): void {
    this.localHandBack ??= `${LOCAL_HAND_BACK}${++this.localHandBacks}`;
  }

  cancelHandBack(): void {
    this.localHandBack = null;
  }

  /** In-flight work finished and its completions written: mark the request completed, fenced by `token`,
   *  just before the lease row is released. A lost lease leaves it pending for the next leader. */
  async handoverCompleted(token: LeaseToken, requestId: string): Promise<void> {
    if (requestId.startsWith(LOCAL_HAND_BACK)) {
      if (this.localHandBack === requestId) this.localHandBack = null;
      this.log.info({ event: 'partition_hand_back_completed', holder_id: token.holderId, lease_epoch: token.leaseEpoch, lease_name: this.leaseName },
        'partition handed back (fair share): in-flight attempts finished; releasing the lease');
      return;
    }
    const out = await this.store.fencedCompleteHandover(token, requestId);
    if (out.kind === 'leaseLost') {
      this.log.warn({ event: 'handover_completion_lease_lost', holder_id: token.holderId, lease_epoch: token.leaseEpoch, request_id: requestId },
        'lease lost before the handover was recorded; the request stays pending for the next leader');
      return;
    }
    if (this.pendingHandover === requestId) this.pendingHandover = null;
    this.metrics?.handoverCompleted();
    this.log.warn({ event: 'handover_completed', holder_id: token.holderId, lease_epoch: token.leaseEpoch, request_id: requestId,
      applied: out.value.applied, requested_at: out.value.request?.requestedAt.toISOString() ?? null },
    'handover completed: in-flight attempts finished; releasing the lease (any instance may acquire at its next tick)');
  }

  mayStart(): boolean {
    return this.pausedFlag !== true;
  }

  blockedNotLeader(): void {
    this.metrics?.blockedNotLeader();
  }

  completionUnwritable(): void {
    this.metrics?.completionUnwritable();
  }

  tickFinished(sum: TickSummary): void {
    sum.staleControlHolds += this.staleHolds; // since the last summary (a bridge's and the settler's calls too)
    this.staleHolds = 0;
    this.metrics?.tick(sum.role, sum.durationMs);
  }
}
