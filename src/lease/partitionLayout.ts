// The partition layout this process acts on (issue 26): the count recorded in SQL and the change in progress, read
// every pollMs (SCHEDULE_REFRESH_INTERVAL_MS) by a process whose timers run. Its one owner (this class) answers:
// - mayAcquire(k): false while a change is active (only the changer takes leases then) and for k ≥ the count;
// - when a change appears, `changeStarted` runs (the app asks every partition it leads to hand back: drain through
//   the handover path, then release); when it is gone, `changeEnded` (hand-backs cancelled, the new count in force).
// Liveness only: safety never rests on this read (the changer holds every lease while rows move, and every write is
// fenced), so a stale or failed read costs time, never a duplicate.
import type { Logger } from '../observability/logger.js';
import { sqlErrorField } from '../observability/logger.js';
import type { PartitionChange, PartitionLayout, PartitionStore } from '../store/partitionPorts.js';

export interface LayoutHooks {
  changeStarted(change: PartitionChange): void;
  changeEnded(count: number): void;
}

export class PartitionLayoutWatch {
  private timer: NodeJS.Timeout | null = null;
  private reading: Promise<PartitionLayout> | null = null;

  constructor(
    private readonly store: Pick<PartitionStore, 'readLayout'>,
    private layout: PartitionLayout,
    private readonly pollMs: number,
    private readonly log: Logger,
    private readonly hooks: LayoutHooks,
  ) {}

  /** Start reading every pollMs (timers of this process may lead). The first layout's change, if any, applies now. */
  start(): void {
    if (draining(this.layout)) this.hooks.changeStarted(this.layout.active!);
    this.timer ??= setInterval(() => void this.refresh(), this.pollMs);
    this.timer.unref();
  }

  stop(): void {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
  }

  /** The recorded count as last read. */
  count(): number {
    return this.layout.count;
  }

  /** The change in progress as last read (null: none). */
  active(): PartitionChange | null {
    return this.layout.active;
  }

  /** May partition k's lease manager acquire now? Not while a change drains (past its preparing step: only the
   *  changer takes leases then), nor beyond the count. */
  mayAcquire(k: number): boolean {
    return !draining(this.layout) && k < this.layout.count;
  }

  /** Read the layout now (concurrent callers share one read) and apply what changed. On a failed read the last
   *  layout stays (logged at debug: the next poll tries again). */
  refresh(): Promise<PartitionLayout> {
    this.reading ??= this.store.readLayout().then((next) => {
      this.apply(next);
      return next;
    }, (e: unknown) => {
      this.log.debug({ event: 'partition_layout_read_failed', sql_error: sqlErrorField(e) }, 'partition layout not read; keeping the last');
      return this.layout;
    }).finally(() => {
      this.reading = null;
    });
    return this.reading;
  }

  /** A read begun after this call (one already in flight may have begun before a write the caller waits on). */
  async readNow(): Promise<PartitionLayout> {
    await this.reading;
    return this.refresh();
  }

  private apply(next: PartitionLayout): void {
    const before = this.layout;
    this.layout = next;
    const was = before.active?.changeId ?? null;
    const now = next.active?.changeId ?? null;
    if (draining(next) && !(draining(before) && was === now)) {
      this.log.warn({ event: 'partition_change_observed', change_id: now, from: next.active!.fromCount, to: next.active!.toCount },
        `partition change ${next.active!.fromCount} → ${next.active!.toCount}: leaders drain and hand their partitions to the changer`);
      this.hooks.changeStarted(next.active!);
    } else if (draining(before) && !draining(next)) {
      this.hooks.changeEnded(next.count); // (the next change, if one was requested meanwhile, is only preparing)
    }
    if (next.count !== before.count) {
      this.log.warn({ event: 'partition_count_changed', partitions: next.count, was: before.count },
        `partition count is ${next.count}: partitions 0..${next.count - 1} execute`);
    }
  }
}

/** The partition count is the database's (issues 25, 26): the first process on a fresh database records its
 *  EXECUTOR_PARTITIONS (of concurrent first starts exactly one does). A process registers EXECUTOR_PARTITIONS timers
 *  whatever is recorded: timers beyond the recorded count wait for it (how a deployment grows without a gap), and a
 *  recorded count above it is served by the processes that have the timers (said once, here, with what this process
 *  runs and does not run, and that its provider limits are the share of the recorded count's partitions it leads). */
export async function recordedPartitionLayout(store: Pick<PartitionStore, 'recordPartitionCount' | 'readLayout'>, want: number, holderId: string,
  logger: Logger): Promise<PartitionLayout> {
  const recorded = await store.recordPartitionCount(want, holderId);
  if (recorded.recordedBy === holderId && recorded.count === want) {
    logger.info({ event: 'partition_count_recorded', partitions: want }, `recorded EXECUTOR_PARTITIONS=${want} in the database`);
  }
  const layout = await store.readLayout();
  if (layout.count > want) {
    const runs = want === 1 ? 'partition 0' : `partitions 0..${want - 1}`;
    logger.warn({ event: 'partition_timers_missing', partitions: layout.count, executor_partitions: want, runs: range(0, want),
      does_not_run: range(want, layout.count) },
    `the database records ${layout.count} partitions but EXECUTOR_PARTITIONS is ${want}: this instance runs ${runs} only, ` +
      `not partitions ${want}..${layout.count - 1} (those run only on instances started with EXECUTOR_PARTITIONS >= ${layout.count}); ` +
      `it follows the recorded count in every cluster decision: its provider limits are the share of the partitions it leads ` +
      `(each 1/${layout.count} of PROVIDER_RATE_LIMIT_PER_SEC and its part of PROVIDER_MAX_IN_FLIGHT), and it reads and records ` +
      'breaker and Retry-After holds');
  } else if (layout.count < want) {
    logger.info({ event: 'partition_timers_waiting', partitions: layout.count, executor_partitions: want },
      `the database records ${layout.count} partitions: the timers of partitions ${layout.count}..${want - 1} wait until the count reaches them (POST /api/ops/partitions)`);
  }
  return layout;
}

const range = (from: number, to: number) => Array.from({ length: Math.max(0, to - from) }, (_, i) => from + i);

/** Past its preparing step, a change drains every partition: leaders hand back, only the changer acquires. */
function draining(layout: PartitionLayout): boolean {
  return layout.active !== null && layout.active.state !== 'preparing';
}
