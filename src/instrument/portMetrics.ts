// Metric decorators around the ports, so the lease algorithm and the executor stay free of metric calls:
// lease statements (acquire/renew latency and results), schedule reads (refresh latency), fenced attempt
// writes (started, closed by outcome, durations, abandoned by orphan recovery), and leadership transitions.
// They only observe: every call and result passes through unchanged, and a metric never throws.
import type { Clock } from '../lease/clock.js';
import type { LeaseManager } from '../lease/leaseManager.js';
import type { ExecutionStore } from '../store/intentPorts.js';
import type { LeaseStore } from '../store/ports.js';
import type { AppMetrics } from '../observability/metrics.js';

function safe(fn: () => void): void {
  try {
    fn();
  } catch {
    // metrics never change an outcome
  }
}

export function instrumentLeaseStore(store: LeaseStore, m: AppMetrics, clock: Clock): LeaseStore {
  return {
    get: (name) => store.get(name),
    release: (token) => store.release(token),
    listEvents: (name) => store.listEvents(name),
    async tryAcquire(name, holderId, durationMs) {
      const t = clock.nowMs();
      try {
        const out = await store.tryAcquire(name, holderId, durationMs);
        safe(() => m.acquireAttempt(out.acquired ? 'acquired' : 'held', clock.nowMs() - t));
        return out;
      } catch (e) {
        safe(() => m.acquireAttempt('error', clock.nowMs() - t));
        throw e;
      }
    },
    async renew(token, durationMs) {
      const t = clock.nowMs();
      try {
        const row = await store.renew(token, durationMs);
        safe(() => m.renewed(row ? 'renewed' : 'refused', clock.nowMs() - t));
        return row;
      } catch (e) {
        safe(() => m.renewed('error', clock.nowMs() - t));
        throw e;
      }
    },
  };
}

export function instrumentExecutionStore(store: ExecutionStore, m: AppMetrics, clock: Clock): ExecutionStore {
  const timed = async <T>(kind: 'refresh' | 'rebuild', fn: () => Promise<T>): Promise<T> => {
    const t = clock.nowMs();
    try {
      return await fn();
    } finally {
      safe(() => m.scheduleRead(kind, clock.nowMs() - t));
    }
  };
  return {
    rebuildStart: (graceMs) => store.rebuildStart(graceMs),
    loadScheduled: (afterId, limit) => timed('rebuild', () => store.loadScheduled(afterId, limit)),
    refreshPage: (cursor, limit, graceMs) => timed('refresh', () => store.refreshPage(cursor, limit, graceMs)),
    async fencedRecoverOrphans(token) {
      const out = await store.fencedRecoverOrphans(token);
      if (out.kind === 'ok') safe(() => m.attemptsAbandoned(out.value.recovered));
      return out;
    },
    async fencedStartAttempts(token, requests) {
      const out = await store.fencedStartAttempts(token, requests);
      if (out.kind === 'ok') safe(() => m.attemptsStarted(out.value.length));
      return out;
    },
    async fencedCompleteAttempts(token, completions) {
      const out = await store.fencedCompleteAttempts(token, completions);
      // Committed: every attempt row of the batch is closed with its outcome (the intent may have moved on).
      if (out.kind === 'ok') safe(() => completions.forEach((c) => m.attemptClosed(c.outcome, c.durationMs)));
      return out;
    },
  };
}

/** leader_acquired_total and leadership_lost_total{reason} from the lease manager's transitions. */
export function bindLeaseMetrics(lease: LeaseManager, m: AppMetrics): () => void {
  return lease.onChange((c) => {
    if (c.kind === 'acquired') m.leaderAcquired();
    else m.leadershipLost(c.reason);
  });
}
