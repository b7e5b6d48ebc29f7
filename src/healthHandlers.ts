// /healthz (HTTP up) and /readyz (role info; 200 for leader and follower, so followers stay in rotation).
import type { App } from './app.js';
import type { ApiRequest, ApiResponse } from './intents/http.js';

export async function healthz(): Promise<ApiResponse> {
  return { status: 200, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: 'ok' };
}

export function readyz(app: App) {
  return async (req: ApiRequest): Promise<ApiResponse> => {
    const s = app.lease.status();
    const view = {
      mode: s.mode,
      holderId: s.holderId,
      leaseEpoch: s.leaseEpoch,
      leaseExpiresAt: s.expiresAt?.toISOString() ?? null,
      scheduleSize: app.executor.refresher.schedule.size,
    };
    if ((req.headers.get('accept') ?? '').includes('application/json')) {
      return { status: 200, headers: { 'content-type': 'application/json' }, body: JSON.stringify(view) };
    }
    const text = `mode=${s.mode} holder_id=${s.holderId}` +
      (s.mode === 'leader' ? ` lease_epoch=${s.leaseEpoch} lease_expires_at=${view.leaseExpiresAt}` : '');
    return { status: 200, headers: { 'content-type': 'text/plain; charset=utf-8' }, body: text };
  };
}
