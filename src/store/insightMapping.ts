// Row mapping of the dashboard's reads, shared by both dialects (same column aliases).
import type { AttemptMinute, IntentRedrive } from './insightPorts.js';
import type { LeaseEvent } from './ports.js';
import { num } from './rowMapping.js';

type Row = Record<string, unknown>;

export const insightRows = {
  event: (r: Row): LeaseEvent => ({
    seq: num(r.seq), leaseName: String(r.lease_name), leaseEpoch: num(r.lease_epoch), holderId: String(r.holder_id),
    event: r.event as LeaseEvent['event'], at: r.at as Date,
  }),
  /** One row per minute plus db_now (a LEFT JOIN row with a null minute when there were no attempts). */
  minutes: (rows: Row[]): { dbNow: Date; minutes: AttemptMinute[] } => ({
    dbNow: rows[0]!.db_now as Date,
    minutes: rows.filter((r) => r.minute !== null && r.minute !== undefined).map((r) => ({
      minute: r.minute as Date, started: num(r.started), errors: num(r.errors), succeeded: num(r.succeeded),
    })),
  }),
  redrive: (r: Row): IntentRedrive => ({
    redriveId: String(r.redrive_id), requestedAt: r.requested_at as Date, requestedBy: String(r.requested_by),
    reason: (r.reason as string | null) ?? null, attemptsBefore: num(r.attempts_before),
  }),
};
