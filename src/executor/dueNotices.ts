// Subscribes to due-intent notices while this process leads (one LISTEN connection on the leader only). A
// failed or broken subscription is retried at the next leader tick; meanwhile the refresh interval bounds latency.
import type { Logger } from '../observability/logger.js';
import { sqlErrorField } from '../observability/logger.js';
import type { DueNotices } from '../store/intentPorts.js';

export type { DueNotices };

export class DueNoticeListener {
  private subscription: Promise<(() => Promise<void>) | null> | null = null;

  constructor(private readonly notices: DueNotices, private readonly onNotice: () => void, private readonly log: Logger) {}

  /** Subscribe unless subscribed (or subscribing). Never throws, never waits for the subscription. */
  ensureListening(): void {
    if (this.subscription) return;
    const attempt: Promise<(() => Promise<void>) | null> = this.notices
      .listen(this.onNotice, (e) => this.broken(attempt, e))
      .catch((e: unknown) => {
        this.broken(attempt, e);
        return null;
      });
    this.subscription = attempt;
  }

  /** Stop listening (leadership lost, shutdown). */
  async stop(): Promise<void> {
    const s = this.subscription;
    this.subscription = null;
    const stop = await s;
    await stop?.().catch(() => {});
  }

  private broken(attempt: Promise<unknown>, e: unknown): void {
    if (this.subscription !== attempt) return;
    this.subscription = null; // the next leader tick subscribes again
    this.log.warn({ event: 'due_notices_lost', sql_error: sqlErrorField(e) },
      'due-intent notices unavailable; the refresh interval bounds pickup latency until they are back');
  }
}
