// The dashboard's JSON views (GET /api/dashboard?data=overview|search|intent), built from SQL only, so any
// instance answers the same. Bounded: 20 lease events, 60 minutes of attempts, 20 failures, 10 redrives,
// search pages of at most 100. The payload is redacted to its size unless `payload=1` is asked.
import { z } from 'zod';
import { appVersion } from '../../config.js';
import { INTENT_STATUSES, isoDateTime, toAttemptView, toIntentView } from '../../intents/contract.js';
import { isUuid } from '../../intents/ids.js';
import type { HttpContext } from '../context.js';
import { partitionLeaseView, partitionRef } from '../leases.js';
import { partitionControlRows, recordedPartitions } from '../opsScope.js';
import { clusterControlName } from '../../limits.js';

const HOUR_MS = 3_600_000;
const iso = (d: Date | null) => d?.toISOString() ?? null;
/** Only the host of a provider URL recorded at submit (never its credentials, path or query); null = the default. */
const providerHost = (url: string | null) => {
  if (url === null) return null;
  try { return new URL(url).host; } catch { return '(invalid URL)'; }
};
const uuid = z.string().refine(isUuid, 'must be an intent id (UUID)').transform((s) => s.toLowerCase());

export const dashboardQuerySchema = z.discriminatedUnion('data', [
  z.object({ data: z.literal('overview') }),
  z.object({
    data: z.literal('search'),
    intentId: uuid.optional(),
    key: z.string().min(1).max(255).optional(),
    status: z.enum(INTENT_STATUSES).optional(),
    from: isoDateTime.optional(),
    to: isoDateTime.optional(),
    before: uuid.optional(),
    limit: z.string().regex(/^\d{1,3}$/, 'must be an integer from 1 to 100').transform(Number)
      .pipe(z.number().int().min(1, 'must be an integer from 1 to 100').max(100, 'must be an integer from 1 to 100')).default(25),
  }),
  z.object({ data: z.literal('intent'), id: uuid, payload: z.enum(['0', '1']).default('0') }),
], { error: () => 'must be one of overview, search, intent' });
export type DashboardQuery = z.infer<typeof dashboardQuerySchema>;

/**
 * With more than one partition recorded (the layout in SQL, or an active change's larger count) or run here, a row per
 * partition of either (this instance's timers beyond the recorded count show idle) from two statements whatever P is
 * (partitionStates: lease row, backlog, last attempt; partitionControlRows: pause row, pending drain, failing maintenance,
 * and the paused rows beyond the layout). Holding and the time left are judged by database time, like GET /api/leases.
 * With one partition: no rows (the page is today's); the pause rows are read all the same (the Execution card).
 */
async function partitionRows(app: HttpContext, clusterPaused: boolean) {
  const rec = await recordedPartitions(app);
  const span = Math.max(rec.span, app.config.partitions.count);
  const { rows: controls, beyond } = await partitionControlRows(app, rec, span);
  // Partitions of the recorded layout held by their own flag, and paused rows beyond it (a shrink left them).
  const pauses = { stillHeld: controls.slice(0, rec.span).filter((c) => c.paused).map((c) => c.partition), pausedBeyondLayout: beyond.map((c) => c.partition) };
  if (span <= 1) return { pauses, rows: undefined };
  const refs = Array.from({ length: span }, (_, k) => partitionRef(app, k));
  const states = await app.stores.insights.partitionStates(refs);
  return { pauses, rows: states.partitions.map((p, k) => {
    const c = controls[k]!;
    const v = partitionLeaseView(p, states.dbNow);
    return {
      ...v,
      expiresInMs: p.lease ? p.lease.expiresAt.getTime() - states.dbNow.getTime() : null,
      lastAttemptAgeMs: p.lastAttemptAt ? Math.max(0, states.dbNow.getTime() - p.lastAttemptAt.getTime()) : null,
      // Its own pause flag; heldBy: which pause keeps it from sending (the cluster's wins).
      paused: c.paused, pausedAt: iso(c.changedAt), pausedBy: c.changedBy, pauseReason: c.reason,
      heldBy: clusterPaused ? 'cluster' : c.paused ? 'partition' : null,
      pendingDrain: c.pendingHandover && { requestId: c.pendingHandover.requestId, requestedAt: c.pendingHandover.requestedAt.toISOString(),
        requestedBy: c.pendingHandover.requestedBy },
      // The partition leader's failing maintenance task (retention is per partition), null when none fails.
      failingMaintenance: c.failingMaintenance && { ...c.failingMaintenance, changedAt: c.failingMaintenance.changedAt.toISOString() },
    };
  }) };
}

export async function overview(app: HttpContext) {
  const leaseName = app.config.lease.name;
  const s = app.stores;
  const control = await s.ops.getExecutionControl(leaseName, clusterControlName(leaseName));
  const cluster = control.cluster!;
  const [o, events, perMinute, failures, redrives, handovers, maintenance, { pauses, rows: partitions }] = await Promise.all([
    s.ops.getClusterOverview(leaseName), s.insights.recentLeaseEvents(leaseName, 20),
    s.insights.attemptsPerMinute(HOUR_MS), s.insights.recentFailures(20), s.redrive.listRedrives(10), s.ops.listHandovers(leaseName, 5),
    s.ops.listMaintenance(leaseName), partitionRows(app, cluster.paused),
  ]);
  const now = o.dbNow.getTime();
  return {
    // More than one partition recorded only: one row per partition (partition 0 first); `leader`, `execution` and `handovers`
    // below are partition 0's (LEASE_NAME's), as GET /api/lease.
    ...(partitions ? { partitions } : {}),
    dbNow: o.dbNow.toISOString(),
    leaseName,
    servedBy: app.lease.holderId,
    version: appVersion(), // the release the answering instance runs (package.json)
    leader: o.lease && {
      holderId: o.lease.holderId, leaseEpoch: o.lease.leaseEpoch, acquiredAt: iso(o.lease.acquiredAt), renewedAt: iso(o.lease.renewedAt),
      expiresAt: iso(o.lease.expiresAt), expiresInMs: o.lease.expiresAt.getTime() - now, live: o.lease.expiresAt.getTime() > now,
    },
    // The cluster's pause (what Pause acts on), partition 0's own flag, the partitions held by their own flag and the
    // paused rows beyond the recorded count (GET /api/ops/execution); Resume clears them all (?partition=all).
    execution: { paused: cluster.paused, changedAt: iso(cluster.changedAt), changedBy: cluster.changedBy, reason: cluster.reason,
      partitionPaused: control.paused, partitionPausedAt: iso(control.changedAt), partitionPausedBy: control.changedBy, partitionPauseReason: control.reason,
      ...pauses },
    // The provider circuit breaker as the leader last recorded it in SQL (null: never opened).
    providerBreaker: control.providerBreaker && { state: control.providerBreaker.state, changedAt: control.providerBreaker.changedAt.toISOString(),
      holderId: control.providerBreaker.holderId },
    // Leader maintenance (retention) as leaders recorded it in SQL: a failure (failures > 0, the SQL error) or the
    // success that ended one; no row = never failed.
    maintenance: maintenance.map((m) => ({ task: m.task, failures: m.failures, lastError: m.lastError, changedAt: m.changedAt.toISOString(),
      holderId: m.holderId })),
    // The newest handover (drain) requests recorded in SQL; `pending` ones wait for the leader's next tick.
    handovers: handovers.map((h) => ({
      requestId: h.requestId, status: h.status, requestedAt: h.requestedAt.toISOString(), requestedBy: h.requestedBy,
      reason: h.reason, completedAt: iso(h.completedAt), completedBy: h.completedBy,
    })),
    intentsByStatus: o.intentsByStatus,
    // The statuses whose number above is a lower bound (settled statuses are counted up to a cap).
    intentsCapped: o.intentsCapped,
    dueNow: o.dueNow,
    oldestDueAgeMs: o.oldestDueAgeMs,
    lastAttemptAt: iso(o.lastAttemptAt),
    timeline: events.map((e) => ({ seq: e.seq, event: e.event, holderId: e.holderId, leaseEpoch: e.leaseEpoch, at: e.at.toISOString() })),
    attemptsPerMinute: perMinute.minutes.map((m) => ({ minute: m.minute.toISOString(), started: m.started, errors: m.errors, succeeded: m.succeeded })),
    failures: failures.map((f) => ({ intentId: f.intentId, attemptCount: f.attemptCount, failedAt: f.lastModifiedAt.toISOString(), lastError: f.lastError })),
    redrives: redrives.map((r) => ({ redriveId: r.redriveId, requestedAt: r.requestedAt.toISOString(), requestedBy: r.requestedBy, reason: r.reason, redriven: r.redriven })),
  };
}

export async function search(app: HttpContext, q: Extract<DashboardQuery, { data: 'search' }>) {
  const rows = await app.stores.insights.searchIntents({
    intentId: q.intentId ?? null, idempotencyKey: q.key ?? null, status: q.status ?? null,
    createdFrom: q.from ? new Date(q.from) : null, createdTo: q.to ? new Date(q.to) : null, before: q.before ?? null, limit: q.limit,
  });
  return {
    items: rows.map((r) => ({ ...toIntentView(r), idempotencyKey: r.idempotencyKey })),
    nextBefore: rows.length === q.limit ? rows[rows.length - 1]!.intentId : null,
  };
}

/** null when the intent does not exist. */
export async function intentPage(app: HttpContext, q: Extract<DashboardQuery, { data: 'intent' }>) {
  const row = await app.stores.intents.get(q.id);
  if (!row) return null;
  const [attempts, redrives] = await Promise.all([app.stores.intents.listAttempts(q.id), app.stores.insights.redrivesOf(q.id)]);
  const payloadBytes = Buffer.byteLength(JSON.stringify(row.contract.payload), 'utf8');
  return {
    intent: { ...toIntentView(row), idempotencyKey: row.idempotencyKey },
    contract: {
      providerHost: providerHost(row.contract.provider.url), retry: row.contract.retry, payloadBytes,
      payload: q.payload === '1' ? row.contract.payload : null,
    },
    attempts: attempts.map(toAttemptView),
    redrives: redrives.map((r) => ({ ...r, requestedAt: r.requestedAt.toISOString() })),
  };
}
