// This instance's heartbeat row (issue 25): every INSTANCE_HEARTBEAT_MS one upsert (holder, version, roles, the
// partitions it leads, database time) and one read of the live rows, kept for the fair share (fairShare.ts) of
// `every-instance` timers. Best effort by design: a failed beat or read is logged at warn and retried at the next
// interval, never thrown into the caller; a list older than the liveness window (by the monotonic clock) reads as
// unknown (null), and the fair share then puts no cap (the leases alone keep execution single). stop() removes the row,
// best effort: a row left behind drops out of the live list after the window and is pruned by the others. The roles
// are read at every beat: an every-instance process claims `fair-share` only once its timers run (partitionShare.ts),
// so a process started but not yet ticking is counted by no one and never holds a share it cannot take.
import type { Logger } from '../observability/logger.js';
import { sqlErrorField } from '../observability/logger.js';
import type { InstanceRow, InstanceStore } from '../store/instancePorts.js';
import type { Clock } from './clock.js';
import type { LiveInstance } from './fairShare.js';
import { RepeatLog } from './repeatLog.js';

/** Rows not seen for this long are deleted (by any instance, on its first beat and every PRUNE_EVERY_BEATS). */
export const INSTANCE_PRUNE_AFTER_MS = 3_600_000;
const PRUNE_EVERY_BEATS = 60;
/** The role of an instance whose timer may lead partitions (the fair share counts only those). */
export const TIMER_ROLE = 'timer';
/** The role of an instance that takes part in the fair share (every-instance mode, its timers running): only these
 *  divide the partitions, so an instance that runs its timers under listener locks, not at all, or not yet (started,
 *  no timer fired) never holds a share it will not take. */
export const FAIR_SHARE_ROLE = 'fair-share';

export interface InstanceHeartbeatSettings {
  holderId: string;
  version: string;
  /** e.g. ['http', 'timer'], read at every beat; only instances with `fair-share` count for the fair share. */
  roles: readonly string[] | (() => readonly string[]);
  heartbeatMs: number;
  liveWindowMs: number;
}

export class InstanceHeartbeat {
  /** The last read: its rows, when it began (local ms) and the database time it was answered at. */
  private list: { rows: InstanceRow[]; atMs: number; dbNowMs: number } | null = null;
  private timer: NodeJS.Timeout | null = null;
  private inFlight: Promise<void> | null = null;
  /** A beat to run once the one in flight ends (beat(true) while one runs; requests coalesce). */
  private followUp: Promise<void> | null = null;
  private beats = 0;
  private failing = false;
  /** A failure is logged at warn when it is news, then once a minute (with the repeats), at debug in between. */
  private readonly failures = new RepeatLog(60_000);
  private stopped = false;

  private constructor(
    private readonly store: InstanceStore,
    private readonly settings: InstanceHeartbeatSettings,
    private readonly clock: Clock,
    private readonly logger: Logger,
    private readonly partitions: () => readonly number[],
  ) {}

  /** The first beat (and read) before it resolves, so the first timer round has a list; then every heartbeatMs.
   *  `partitions`: the partitions this instance leads now (read at every beat). Never rejects. */
  static async start(store: InstanceStore, settings: InstanceHeartbeatSettings, clock: Clock, logger: Logger,
    partitions: () => readonly number[] = () => []): Promise<InstanceHeartbeat> {
    const hb = new InstanceHeartbeat(store, settings, clock, logger, partitions);
    await hb.beat();
    hb.schedule();
    return hb;
  }

  /** The live instances of the last read (this one included once its row is written), or null when there is none
   *  younger than the liveness window. */
  live(): InstanceRow[] | null {
    if (!this.list || this.clock.nowMs() - this.list.atMs > this.settings.liveWindowMs) return null;
    return this.list.rows;
  }

  /** live() narrowed to the instances that may lead (role `timer`), as the fair share takes them. */
  liveLeaders(): LiveInstance[] | null {
    const rows = this.live();
    return rows && rows.filter((r) => r.roles.includes(TIMER_ROLE)).map((r) => ({ holderId: r.holderId, partitions: r.partitions }));
  }

  /** live() narrowed to the instances that take part in the fair share (role `fair-share`), each `silent` when its
   *  row was older than two heartbeats at the read (both database times). Nobody is silent on a list older than a
   *  heartbeat: this instance's own beats failing must not make the others look cut off. */
  liveSharers(): LiveInstance[] | null {
    const rows = this.live();
    if (!rows || !this.list) return null;
    const judged = this.clock.nowMs() - this.list.atMs <= this.settings.heartbeatMs;
    const dbNowMs = this.list.dbNowMs;
    return rows.filter((r) => r.roles.includes(FAIR_SHARE_ROLE)).map((r) => ({ holderId: r.holderId, partitions: r.partitions,
      silent: judged && dbNowMs - r.lastSeenAt.getTime() > 2 * this.settings.heartbeatMs }));
  }

  /** How old the last read of the live list is (ms; null: never read). */
  listAgeMs(): number | null {
    return this.list ? this.clock.nowMs() - this.list.atMs : null;
  }

  /** One beat now (also used after a partition was taken or handed back, so the others see it sooner). Never rejects;
   *  a beat already running is awaited instead of overlapping it — with `fresh`, one more beat follows it, so what
   *  changed since it began (roles, partitions) is written by the time this resolves. */
  beat(fresh = false): Promise<void> {
    if (this.stopped) return Promise.resolve();
    if (fresh && this.inFlight) return (this.followUp ??= this.inFlight.then(() => { this.followUp = null; return this.beat(); }));
    this.inFlight ??= this.beatOnce().finally(() => (this.inFlight = null));
    return this.inFlight;
  }

  /** Stops beating and removes the row (best effort: logged at warn on failure). Never rejects. */
  async stop(withinMs = Number.POSITIVE_INFINITY): Promise<void> {
    if (this.stopped) return;
    this.stopped = true;
    if (this.timer) clearTimeout(this.timer);
    this.timer = null;
    // Bounded for a shutdown (an unreachable database must not eat the drain's time): past `withinMs` the removal goes
    // on in the background and the row, if it stays, drops out of the live list after INSTANCE_LIVE_WINDOW_MS.
    const removal = (async () => {
      await this.inFlight;
      await this.store.remove(this.settings.holderId);
    })();
    let timer: NodeJS.Timeout | undefined;
    const late = Number.isFinite(withinMs)
      ? new Promise<'late'>((r) => { timer = setTimeout(() => r('late'), withinMs); timer.unref?.(); }) : null;
    try {
      await (late ? Promise.race([removal, late]) : removal);
    } catch (e) {
      this.logger.warn({ event: 'instance_remove_failed', holder_id: this.settings.holderId, sql_error: sqlErrorField(e) },
        'instance heartbeat row not removed (it drops out of the live list after INSTANCE_LIVE_WINDOW_MS)');
    } finally {
      clearTimeout(timer);
      removal.catch(() => {}); // (settled in the background when it outlived the bound; logged above otherwise)
    }
  }

  private schedule(): void {
    if (this.stopped) return;
    this.timer = setTimeout(() => void this.beat().finally(() => this.schedule()), this.settings.heartbeatMs);
    this.timer.unref?.();
  }

  private async beatOnce(): Promise<void> {
    const s = this.settings;
    try {
      const roles = typeof s.roles === 'function' ? s.roles() : s.roles;
      await this.store.heartbeat({ holderId: s.holderId, version: s.version, roles, partitions: this.partitions() });
      const startedMs = this.clock.nowMs();
      const { instances, dbNow } = await this.store.listLive(s.liveWindowMs);
      this.list = { rows: instances, atMs: startedMs, dbNowMs: dbNow.getTime() };
      if (this.beats++ % PRUNE_EVERY_BEATS === 0) await this.store.prune(INSTANCE_PRUNE_AFTER_MS);
      if (this.failing) this.logger.info({ event: 'instance_heartbeat_recovered', holder_id: s.holderId }, 'instance heartbeat written again');
      this.failing = false;
      this.failures.reset();
    } catch (e) {
      const sqlError = sqlErrorField(e);
      const { level, repeats } = this.failures.next(sqlError?.message ?? String(e), this.clock.nowMs());
      const fields = { event: 'instance_heartbeat_failed', holder_id: s.holderId, sql_error: sqlError, ...(repeats ? { repeats } : {}) };
      if (level === 'info') this.logger.warn(fields, 'instance heartbeat failed (retried every INSTANCE_HEARTBEAT_MS; no fair-share cap once the last list is older than INSTANCE_LIVE_WINDOW_MS)');
      else this.logger.debug(fields, 'instance heartbeat still failing');
      this.failing = true;
    }
  }
}
