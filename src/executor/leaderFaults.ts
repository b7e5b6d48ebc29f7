// The one place where the executor's leader work turns a fault into a step-down: an SQL error on the leader path
// (a connectivity failure, spec) and a refused fence (that epoch is over), for a tick's or bridge's work and for the
// settler's. Each drops leadership at once, so the gate is closed before anything is awaited. Work that leads its
// token or nothing steps down unconditionally; the settler writes under its newest token while the next tick may
// already lead a newer epoch, so its faults step down only while that token's epoch still leads (a named operation
// each: which rule applies never depends on an argument). The lease's own faults (renew, local deadline) are the lease's.
import type { LeaseManager } from '../lease/leaseManager.js';
import type { Logger } from '../observability/logger.js';
import { sqlErrorField } from '../observability/logger.js';
import type { LeaseToken } from '../store/ports.js';
import type { TickSummary } from './tickSummary.js';

export class LeaderFaults {
  constructor(private readonly lease: LeaseManager, private readonly log: Logger) {}

  /** An SQL error on the leader path under `token` (a tick's or bridge's work): logged, leadership dropped. */
  sqlError(token: LeaseToken, e: unknown): void {
    this.log.error({ event: 'executor_sql_error', holder_id: token.holderId, lease_epoch: token.leaseEpoch, sql_error: sqlErrorField(e) },
      'executor stopped on SQL error');
    this.lease.drop('sql_error', e);
  }

  /** The fence refused `token` on a tick's or bridge's work, which leads `token` or nothing (no newer epoch begins
   *  before it ends): its summary `sum` says the lease is lost, and this process steps down. */
  fenceRefusedLeading(token: LeaseToken, sum: TickSummary): 'lease_lost' {
    sum.leaseLost = true;
    this.lease.drop('fence_failed');
    return 'lease_lost';
  }

  /** The fence refused the settler's write under `token`: a step-down only while `token`'s epoch still leads (a
   *  newer epoch this process leads meanwhile is left alone; its CARRY writes what was refused). */
  fenceRefusedSettling(token: LeaseToken): void {
    if (this.lease.ensureEpoch(token.leaseEpoch)) this.lease.drop('fence_failed');
  }

  /** An SQL error on the settler's write under `token` (`pending`: completions still unwritten): logged, and a
   *  step-down only while `token`'s epoch still leads; the settler retries under the same fence. */
  settlerSqlError(token: LeaseToken, e: unknown, pending: number): void {
    this.log.warn({ event: 'carried_flush_failed', holder_id: token.holderId, lease_epoch: token.leaseEpoch, sql_error: sqlErrorField(e),
      pending }, 'completions not written; retrying under the same fence (the lease row is kept meanwhile)');
    if (this.lease.ensureEpoch(token.leaseEpoch)) this.lease.drop('sql_error', e);
  }
}
