// GET /api/metrics: this instance's series (labelled holder_id), then the cluster gauges, read from SQL
// (OpsStore.getClusterOverview: one indexed statement) at each scrape, so every instance — on Flex an HTTP instance
// that never leads — reports the same cluster state. The cluster gauges carry no holder_id of the serving instance
// and are not exported to Application Insights (every instance would send the same numbers).
import { sqlErrorField } from '../observability/logger.js';
import { PROMETHEUS_CONTENT_TYPE } from '../observability/prometheus.js';
import { SETTLED_COUNT_CAP, type ClusterOverview } from '../store/opsPorts.js';
import type { HttpContext } from './context.js';
import { guarded } from './guarded.js';
import type { ApiHandler } from './request.js';

const esc = (v: string) => v.replace(/\\/g, '\\\\').replace(/\n/g, '\\n').replace(/"/g, '\\"');

function gauge(name: string, help: string, points: [Record<string, string>, number][]): string[] {
  const lines = [`# HELP ${name} ${help}`, `# TYPE ${name} gauge`];
  for (const [labels, v] of points) {
    const l = Object.entries(labels).map(([k, x]) => `${k}="${esc(x)}"`).join(',');
    lines.push(`${name}${l ? `{${l}}` : ''} ${Number.isFinite(v) ? v : 'NaN'}`);
  }
  return lines;
}

/** Prometheus text of the cluster gauges; `overview` null → only cluster_overview_up 0 (the read failed). */
export function renderClusterMetrics(leaseName: string, overview: ClusterOverview | null): string {
  const base = { lease_name: leaseName };
  const out = gauge('cluster_overview_up', '1 when this scrape read the cluster overview from SQL, 0 when the read failed', [[base, overview ? 1 : 0]]);
  if (overview) {
    const now = overview.dbNow.getTime();
    const lease = overview.lease;
    const live = lease !== null && lease.expiresAt.getTime() > now;
    out.push(
      ...gauge('cluster_intents', `Intents by status (SQL, the whole cluster; succeeded and cancelled counted up to ${SETTLED_COUNT_CAP})`,
        Object.entries(overview.intentsByStatus).sort(([a], [b]) => (a < b ? -1 : 1)).map(([status, n]) => [{ ...base, status }, n])),
      ...gauge('cluster_intents_capped', `1 when cluster_intents of that status reached its cap (${SETTLED_COUNT_CAP}): there are at least that many`,
        (['cancelled', 'succeeded'] as const).map((status) => [{ ...base, status }, overview.intentsCapped.includes(status) ? 1 : 0])),
      ...gauge('cluster_due_backlog', 'Scheduled intents due now (next_attempt_at ≤ database now), waiting for the leader', [[base, overview.dueNow]]),
      ...gauge('cluster_oldest_due_age_seconds', 'How long the oldest due intent has waited (0 = nothing due)', [[base, overview.oldestDueAgeMs / 1000]]),
      ...gauge('cluster_lease_epoch', 'Newest epoch ever granted (0 = never acquired)', [[base, lease?.leaseEpoch ?? 0]]),
      ...gauge('cluster_has_leader', '1 while the lease row is live (expires_at > database now)', [[base, live ? 1 : 0]]),
      ...gauge('cluster_leader_info', 'The live lease holder (value 1; absent while nobody leads)', live ? [[{ ...base, holder_id: lease.holderId, lease_epoch: String(lease.leaseEpoch) }, 1]] : []),
      ...gauge('cluster_lease_expires_in_seconds', 'Seconds until the lease row expires (negative: expired that long ago)', lease ? [[base, (lease.expiresAt.getTime() - now) / 1000]] : []),
      ...gauge('cluster_seconds_since_last_attempt', 'Seconds since the newest attempt started (absent: no attempt yet)',
        overview.lastAttemptAt ? [[base, (now - overview.lastAttemptAt.getTime()) / 1000]] : []),
    );
  }
  return `${out.join('\n')}\n`;
}

/** This instance's series (labelled holder_id; per instance) followed by the cluster gauges read from SQL. A failed
 *  SQL read still serves the instance's series, with cluster_overview_up 0. */
export function metricsHandler(app: HttpContext): ApiHandler {
  return guarded(app.logger, 'ops', 'metrics', async () => {
    const leaseName = app.config.lease.name;
    const overview = await app.stores.ops.getClusterOverview(leaseName).catch((e: unknown) => {
      app.logger.warn({ event: 'cluster_overview_failed', sql_error: sqlErrorField(e) }, 'cluster overview read failed; serving instance metrics only');
      return null;
    });
    return {
      status: 200,
      headers: { 'content-type': PROMETHEUS_CONTENT_TYPE, 'cache-control': 'no-store' },
      body: (await app.metricsRegistry.renderPrometheus()) + renderClusterMetrics(leaseName, overview),
    };
  });
}
