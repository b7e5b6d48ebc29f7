// /healthz (HTTP up, and the release this instance runs) and /readyz (role info; 200 for leader and follower, so followers stay in rotation).
// /readyz gives this instance's own role and, read from SQL (cached ≤ 1 s), the cluster's leader: on Flex the
// HTTP instances never lead, so their own role says nothing about who executes.
import { appVersion } from '../config.js';
import type { ClusterView } from './clusterView.js';
import type { HttpContext } from './context.js';
import type { ApiResponse } from './problem.js';
import type { ApiHandler } from './request.js';

/** 200 without a database round trip, naming the release (package.json's version): `ok version=0.2.0` as text, or
 *  `{"status":"ok","version":"0.2.0"}` when the caller accepts JSON. A probe that only reads the status is unaffected. */
export async function healthz(accept = ''): Promise<ApiResponse> {
  const version = appVersion();
  if (accept.includes('application/json')) {
    return { status: 200, headers: { 'content-type': 'application/json', 'cache-control': 'no-store' }, body: JSON.stringify({ status: 'ok', version }) };
  }
  return { status: 200, headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' }, body: `ok version=${version}` };
}

const iso = (d: Date | null | undefined) => d?.toISOString() ?? null;

export function clusterJson(c: ClusterView) {
  const l = c.leader;
  return {
    leader: l && l.live ? { holderId: l.holderId, leaseEpoch: l.leaseEpoch, expiresAt: iso(l.expiresAt)!, renewedAt: iso(l.renewedAt)!, acquiredAt: iso(l.acquiredAt)! } : null,
    lastEpoch: l?.leaseEpoch ?? null,
    readAt: iso(c.readAt),
    error: c.error,
  };
}

export function readyz(app: HttpContext): ApiHandler {
  return async (req) => {
    const s = app.lease.status();
    const cluster = clusterJson(await app.cluster.get());
    const leases = app.partitionLeases().map((l) => l.status());
    // With partitions, an instance is a leader when it leads any partition; `partitions` says which (one partition:
    // today's view exactly, lease fields of partition 0).
    const led = leases.flatMap((l, k) => (l.mode === 'leader' ? [{ partition: k, leaseEpoch: l.leaseEpoch, leaseExpiresAt: l.expiresAt?.toISOString() ?? null }] : []));
    const view = {
      mode: leases.length > 1 ? (led.length > 0 ? 'leader' : 'follower') : s.mode,
      holderId: s.holderId,
      leaseEpoch: s.leaseEpoch,
      leaseExpiresAt: s.expiresAt?.toISOString() ?? null,
      scheduleSize: app.scheduleSize(),
      cluster,
      ...(leases.length > 1 ? { partitions: led } : {}),
    };
    if ((req.headers.get('accept') ?? '').includes('application/json')) {
      return { status: 200, headers: { 'content-type': 'application/json', 'cache-control': 'no-store' }, body: JSON.stringify(view) };
    }
    const leader = cluster.leader;
    const clusterText = cluster.error ? ' cluster_leader=unknown'
      : leader ? ` cluster_leader=${leader.holderId} cluster_epoch=${leader.leaseEpoch} cluster_expires_at=${leader.expiresAt} cluster_renewed_at=${leader.renewedAt}`
        : ` cluster_leader=none${cluster.lastEpoch !== null ? ` cluster_last_epoch=${cluster.lastEpoch}` : ''}`;
    const text = `mode=${view.mode} holder_id=${s.holderId}` +
      (s.mode === 'leader' ? ` lease_epoch=${s.leaseEpoch} lease_expires_at=${view.leaseExpiresAt}` : '') +
      (leases.length > 1 ? ` partitions_led=${led.map((l) => l.partition).join(',') || 'none'}` : '') + clusterText;
    return { status: 200, headers: { 'content-type': 'text/plain; charset=utf-8', 'cache-control': 'no-store' }, body: text };
  };
}
