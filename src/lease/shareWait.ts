// A graceful release while this process's provider calls exceed the share of the partitions it keeps: lead on
// (renewing when due) until they fit, for at most the configured wait; past it, step down without releasing, so the
// row expires and no next leader adds its share on top of the calls still out.
import type { Logger } from '../observability/logger.js';
import type { Clock } from './clock.js';
import { SHARE_POLL_MS } from './handBack.js';

/** The held lease, as the wait sees it. */
export interface ShareWaitLeader {
  /** Still leading under the lease the release began with. */
  leading(): boolean;
  /** Renews when due; false when the renew lost the lease. */
  renewIfDue(): Promise<boolean>;
  stepDown(reason: string): void;
  logFields(): Record<string, unknown>;
}

/** True once the calls fit (the caller checks the lease is still the same); false if leadership went meanwhile, or the bound passed (stepped down). */
export async function leadUntilFits(leader: ShareWaitLeader, fits: () => boolean, maxWaitMs: number, clock: Clock, log: Logger): Promise<boolean> {
  const until = clock.nowMs() + maxWaitMs;
  while (!fits()) {
    if (!leader.leading()) return false;
    if (clock.nowMs() >= until) {
      log.warn({ event: 'leader_release_share_wait', ...leader.logFields(), waited_ms: maxWaitMs },
        'calls in flight still above the share of the partitions kept: stepping down without releasing (the row expires)');
      leader.stepDown('release_share_wait');
      return false;
    }
    if (!(await leader.renewIfDue())) return false;
    await clock.sleep(SHARE_POLL_MS);
  }
  return true;
}
