// Subscribes to due-intent notices while this process leads (one LISTEN connection on the leader only). A
// failed, broken or silently dropped subscription (checked at most every CHECK_EVERY_MS, from the leader's ticks)
// is retried at the next leader tick; meanwhile the refresh interval bounds pickup latency.
import type { Logger } from '../observability/logger.js';
import { sqlErrorField } from '../observability/logger.js';
import type { DueNotices, NoticeSubscription } from '../store/intentPorts.js';

export type { DueNotices };

const CHECK_EVERY_MS = 5_000;

export class DueNoticeListener {
  private subscription: Promise<NoticeSubscription | null> | null = null;
  private lastCheckMs = Number.NEGATIVE_INFINITY;

  constructor(private readonly notices: DueNotices, private readonly onNotice: () => void, private readonly log: Logger,
    private readonly nowMs: () => number = () => performance.now()) {}

  /** Subscribe unless subscribed (or subscribing); probe a live subscription now and then. Never throws, never
   *  waits for the database. */
  ensureListening(): void {
    const current = this.subscription;
    if (current) {
      if (this.nowMs() - this.lastCheckMs < CHECK_EVERY_MS) return;
      this.lastCheckMs = this.nowMs();
      void current.then((s) => s?.check()).catch((e: unknown) => this.broken(current, e));
      return;
    }
    this.lastCheckMs = this.nowMs();
    const attempt: Promise<NoticeSubscription | null> = this.notices
      .listen(this.onNotice, (e) => this.broken(attempt, e))
      .catch((e: unknown) => {
        this.broken(attempt, e);
        return null;
      });
    this.subscription = attempt;
  }

  /** True while subscribed or subscribing (tests, diagnostics). */
  get active(): boolean {
    return this.subscription !== null;
  }

  /** Stop listening (leadership lost, shutdown). */
  async stop(): Promise<void> {
    const s = this.subscription;
    this.subscription = null;
    const sub = await s;
    await sub?.stop().catch(() => {});
  }

  private broken(attempt: Promise<unknown>, e: unknown): void {
    if (this.subscription !== attempt) return;
    this.subscription = null; // the next leader tick subscribes again
    this.log.warn({ event: 'due_notices_lost', sql_error: sqlErrorField(e) },
      'due-intent notices unavailable; the refresh interval bounds pickup latency until they are back');
  }
}
