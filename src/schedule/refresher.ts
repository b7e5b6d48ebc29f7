// Keeps the leader's schedule in step with SQL. Full rebuild on a new epoch; incremental refresh by the composite
// cursor (last_modified_at, intent_id), paged. The persistent cursor only advances over rows older than
// db_now − COMMIT_GRACE_MS ("settled"): a writer that commits late with an older timestamp is still read. Newer
// rows are applied now and read again next time (harmless). The periodic reconcile (defence in depth against a
// commit later than the grace) runs a page at a time into the live schedule, between batches and under load:
// it re-reads every schedulable intent, drops what it did not see and the database no longer schedules, and
// rewinds the cursor to its start − grace, as a full rebuild would — without ever emptying the schedule.
import type { Clock } from '../lease/clock.js';
import type { ExecutionStore, RefreshCursor } from '../store/intentPorts.js';
import { Schedule } from './schedule.js';


/** The most rows a reconcile page reads (the schedule's refresh page size, if smaller). */
export const RECONCILE_PAGE_MAX = 200;
export interface RefreshSettings {
  pageSize: number;
  commitGraceMs: number;
  /** Bound on pages per refresh call, so a tick stays bounded; the rest is read next time. */
  maxPages?: number;
}

export interface RefreshStats {
  rows: number;
  pages: number;
  applied: number;
}

export class ScheduleRefresher {
  readonly schedule = new Schedule();
  private cursor: RefreshCursor | null = null;
  /** Database time at the last round trip and the monotonic time we learnt it (DB-clock estimate). */
  private dbAnchor: { dbMs: number; monoMs: number } | null = null;

  constructor(
    private readonly store: ExecutionStore,
    private readonly settings: RefreshSettings,
    private readonly clock: Clock,
  ) {}

  get ready(): boolean {
    return this.cursor !== null;
  }

  get currentCursor(): RefreshCursor | null {
    return this.cursor;
  }

  /** Database time at the first page of the last incremental refresh: every intent committed before it was read. */
  lastReadAt: Date | null = null;

  /** Estimated database time now (ms): last observed db time + monotonic time elapsed since. */
  dbNowMs(): number {
    if (!this.dbAnchor) return Number.NEGATIVE_INFINITY;
    return this.dbAnchor.dbMs + (this.clock.nowMs() - this.dbAnchor.monoMs);
  }

  /** Bumped by reset(): a refresh or rebuild still awaiting the database when leadership was dropped
   *  must not repopulate the schedule (or resurrect the cursor) afterwards. */
  private generation = 0;

  /** Drop everything (leadership lost or a new epoch). */
  reset(): void {
    this.generation++;
    this.schedule.clear();
    this.cursor = null;
    this.ahead = null;
    this.loading = null;
    this.reconcile = null;
  }

  /** A paged reconcile in progress: its start cursor (db_now − grace), the last intent_id read, the ids seen. */
  private reconcile: { gen: number; cursor: RefreshCursor; after: string | null; seen: Set<string> } | null = null;

  /** True while a paged reconcile has begun and not finished (execution goes on meanwhile). */
  get reconciling(): boolean {
    return this.reconcile !== null;
  }

  /** Start a reconcile of the live schedule (no-op without a complete schedule: a rebuild is the full load). */
  async beginReconcile(): Promise<void> {
    if (!this.cursor || this.loading) return;
    const gen = this.generation;
    const start = await this.store.rebuildStart(this.settings.commitGraceMs);
    if (gen !== this.generation) return; // reset meanwhile
    this.observe(start.dbNow);
    this.reconcile = { gen, cursor: start.cursor, after: null, seen: new Set() };
  }

  /** One page of the reconcile (ordered by intent_id). The last one sweeps what was not seen and rewinds the
   *  cursor; done = no reconcile is in progress any more. */
  async reconcilePage(): Promise<{ done: boolean; stats: RefreshStats }> {
    const stats: RefreshStats = { rows: 0, pages: 0, applied: 0 };
    const job = this.reconcile;
    if (!job) return { done: true, stats };
    // Execution and the interval refresh wait for at most one reconcile page: smaller than a refresh page, so that
    // a refresh due meanwhile stays within its interval (pickup p99 was 1.27 × refresh with 1 000-row pages).
    const pageSize = Math.min(this.settings.pageSize, RECONCILE_PAGE_MAX);
    const rows = await this.store.loadScheduled(job.after, pageSize);
    if (job.gen !== this.generation || this.reconcile !== job) return { done: false, stats }; // reset meanwhile
    stats.pages = 1;
    stats.rows = rows.length;
    for (const r of rows) {
      job.seen.add(r.intentId);
      if (this.schedule.apply(r) === 'scheduled') stats.applied++;
    }
    if (rows.length === pageSize) {
      job.after = rows[rows.length - 1]!.intentId;
      return { done: false, stats };
    }
    this.schedule.sweepUnseen(job.seen, job.cursor.modifiedAt);
    if (this.cursor && before(job.cursor, this.cursor)) this.cursor = job.cursor; // re-read what changed since its start
    this.reconcile = null;
    return { done: true, stats };
  }

  /** A full load in progress: the cursor it will hand to refresh, and the last intent_id loaded. */
  private loading: { gen: number; cursor: RefreshCursor; after: string | null } | null = null;

  /** True while a full load has begun and not finished: execute nothing until it has. */
  get rebuilding(): boolean {
    return this.loading !== null;
  }

  /** Full load of scheduled intents in one go (tests, tools); the executor uses begin/continueRebuild. */
  async rebuild(): Promise<RefreshStats> {
    await this.beginRebuild();
    return (await this.continueRebuild(Number.POSITIVE_INFINITY)).stats;
  }

  /** Drop the schedule and start a full load; the cursor starts at (db_now − grace) so nothing committed
   *  late is missed, also when the load takes several ticks. */
  async beginRebuild(): Promise<void> {
    this.reset();
    const gen = this.generation;
    const start = await this.store.rebuildStart(this.settings.commitGraceMs);
    if (gen !== this.generation) return; // reset meanwhile
    this.observe(start.dbNow);
    this.loading = { gen, cursor: start.cursor, after: null };
  }

  /** Load pages (ordered by intent_id) until done or `untilMs` (monotonic) passes between two pages — at
   *  least one page per call, so a loaded machine still makes progress; a load spread over several ticks
   *  resumes where it stopped. done = the schedule is complete and refresh may run. */
  async continueRebuild(untilMs: number): Promise<{ done: boolean; stats: RefreshStats }> {
    const stats: RefreshStats = { rows: 0, pages: 0, applied: 0 };
    const job = this.loading;
    if (!job) return { done: this.cursor !== null, stats };
    const pageSize = Math.max(this.settings.pageSize, 1_000);
    while (stats.pages === 0 || this.clock.nowMs() < untilMs) {
      const rows = await this.store.loadScheduled(job.after, pageSize);
      if (job.gen !== this.generation || this.loading !== job) return { done: false, stats }; // reset meanwhile
      stats.pages++;
      for (const r of rows) if (this.schedule.apply(r) === 'scheduled') stats.applied++;
      stats.rows += rows.length;
      if (rows.length < pageSize) {
        this.cursor = job.cursor;
        this.loading = null;
        return { done: true, stats };
      }
      job.after = rows[rows.length - 1]!.intentId;
    }
    return { done: false, stats };
  }

  /** Incremental refresh: read pages after the cursor (up to maxPages, and no new page once `untilMs` has
   *  passed); advance the cursor over settled rows only. */
  async refresh(untilMs = Number.POSITIVE_INFINITY): Promise<RefreshStats> {
    if (!this.cursor) return this.rebuild();
    let settledUpTo = this.cursor; // what we persist
    let allSettledSoFar = true;
    const out = await this.readPages(this.cursor, untilMs, (r, at) => {
      // Rows come ordered by last_modified_at, so settled rows form a prefix.
      if (allSettledSoFar && r.settled) settledUpTo = at;
      else allSettledSoFar = false;
    });
    if (out.reset) return out.stats;
    this.lastReadAt = out.firstReadAt;
    this.cursor = settledUpTo;
    this.ahead = out.read;
    this.schedule.pruneVersionsBefore(settledUpTo.modifiedAt);
    return out.stats;
  }

  /** Where the last read ended (at or past the persisted cursor); tail reads start here. */
  private ahead: RefreshCursor | null = null;

  /** Tail read for a due-intent notice: only rows past the last read position, without moving the persisted
   *  cursor. A late commit behind that position is not seen here but by the next full refresh (the guarantee). */
  async refreshTail(untilMs = Number.POSITIVE_INFINITY): Promise<RefreshStats> {
    const from = this.ahead ?? this.cursor;
    if (!from) return { rows: 0, pages: 0, applied: 0 }; // no schedule yet: the rebuild reads everything
    const out = await this.readPages(from, untilMs);
    if (!out.reset) this.ahead = out.read;
    return out.stats;
  }

  /** Read pages after `from` into the schedule (up to maxPages; no new page once `untilMs` has passed); `onRow`
   *  sees each row with its position. reset: leadership was dropped meanwhile (nothing further may be kept). */
  private async readPages(from: RefreshCursor, untilMs: number,
    onRow?: (r: { settled: boolean }, at: RefreshCursor) => void,
  ): Promise<{ stats: RefreshStats; read: RefreshCursor; reset: boolean; firstReadAt: Date | null }> {
    const gen = this.generation;
    const stats: RefreshStats = { rows: 0, pages: 0, applied: 0 };
    let read = from; // runs ahead over unsettled rows
    let firstReadAt: Date | null = null;
    const maxPages = this.settings.maxPages ?? 50;
    while (stats.pages < maxPages && (stats.pages === 0 || this.clock.nowMs() < untilMs)) {
      const page = await this.store.refreshPage(read, this.settings.pageSize, this.settings.commitGraceMs);
      if (gen !== this.generation) return { stats, read, reset: true, firstReadAt };
      this.observe(page.dbNow);
      firstReadAt ??= page.dbNow;
      stats.pages++;
      for (const r of page.rows) {
        const res = this.schedule.apply(r);
        if (res === 'scheduled' || res === 'removed') stats.applied++;
        read = { modifiedAt: r.version, intentId: r.intentId };
        onRow?.(r, read);
      }
      stats.rows += page.rows.length;
      if (page.rows.length < this.settings.pageSize) break;
    }
    return { stats, read, reset: false, firstReadAt };
  }

  private observe(dbNow: Date): void {
    this.dbAnchor = { dbMs: dbNow.getTime(), monoMs: this.clock.nowMs() };
  }
}

/** Cursor order: (last_modified_at text, intent_id), as the refresh query compares them. */
function before(a: RefreshCursor, b: RefreshCursor): boolean {
  return a.modifiedAt < b.modifiedAt || (a.modifiedAt === b.modifiedAt && a.intentId < b.intentId);
}
