// The one place where the executor's leader work turns a fault into a step-down: an SQL error on the leader path
// (a connectivity failure, spec) and a refused fence (that epoch is over). Both drop leadership at once, so the
// gate is closed before anything is awaited. The lease's own faults (renew, local deadline) are the lease's.
import type { LeaseManager } from '../lease/leaseManager.js';
import type { Logger } from '../observability/logger.js';
import { sqlErrorField } from '../observability/logger.js';
import type { LeaseToken } from '../store/ports.js';
import type { TickSummary } from './tickSummary.js';

export class LeaderFaults {
  constructor(private readonly lease: LeaseManager, private readonly log: Logger) {}

  /** An SQL error on the leader path under `token`: logged, leadership dropped. */
  sqlError(token: LeaseToken, e: unknown): void {
    this.log.error({ event: 'executor_sql_error', holder_id: token.holderId, lease_epoch: token.leaseEpoch, sql_error: sqlErrorField(e) },
      'executor stopped on SQL error');
    this.lease.drop('sql_error', e);
  }

  /** The fence refused `token`: the lease is lost. `sum`: a tick's or bridge's, whose work leads `token` or nothing
   *  (no newer epoch begins before it ends): it says so, and this process steps down. null: the settler, which
   *  writes under its newest token while the next tick may already lead a newer epoch: a step-down only while
   *  `token` still leads. */
  fenceRefused(token: LeaseToken, sum: TickSummary | null): 'lease_lost' {
    if (sum) sum.leaseLost = true;
    if (sum || this.lease.ensureEpoch(token.leaseEpoch)) this.lease.drop('fence_failed');
    return 'lease_lost';
  }
}
