// PostgreSQL handover requests: record (one pending per lease name, ON CONFLICT on the partial unique index),
// list, and the leader's fenced completion. Used by PgOpsStore.
import type { Fenced, LeaseToken } from '../ports.js';
import type { HandoverRequest } from '../opsPorts.js';
import { HANDOVER_COLS, toHandover, type HandoverDbRow } from '../rowMapping.js';
import type { PgDatabase } from './db.js';
import { fencedTransaction } from './fence.js';

// The epoch leading now (a live lease row), recorded for the operator; null when nobody leads.
const INSERT = `
WITH now AS MATERIALIZED (SELECT clock_timestamp() AS t)
INSERT INTO submission_manager_handover_requests (request_id, lease_name, status, requested_at, requested_by, reason, requested_epoch)
SELECT $1::uuid, $2::varchar, 'pending', now.t, $3::varchar, $4::varchar,
       (SELECT l.lease_epoch FROM submission_manager_leases l WHERE l.lease_name = $2::varchar AND l.expires_at > now.t)
  FROM now
ON CONFLICT (lease_name) WHERE status = 'pending' DO NOTHING
RETURNING ${HANDOVER_COLS}`;

const PENDING = `SELECT ${HANDOVER_COLS} FROM submission_manager_handover_requests WHERE lease_name = $1 AND status = 'pending'`;

const LIST = `SELECT ${HANDOVER_COLS} FROM submission_manager_handover_requests WHERE lease_name = $1
  ORDER BY requested_at DESC, request_id DESC LIMIT $2`;

const COMPLETE = `UPDATE submission_manager_handover_requests
   SET status = 'completed', completed_at = clock_timestamp(), completed_epoch = $3, completed_by = $4
 WHERE request_id = $1 AND lease_name = $2 AND status = 'pending'`;

const BY_ID = `SELECT ${HANDOVER_COLS} FROM submission_manager_handover_requests WHERE request_id = $1`;

export async function requestHandover(db: PgDatabase, leaseName: string, requestId: string, requestedBy: string, reason: string | null):
Promise<{ request: HandoverRequest; created: boolean }> {
  // A conflicting pending row may be completed between our insert and read: then insert again.
  for (let i = 0; ; i++) {
    const ins = await db.query<HandoverDbRow>(INSERT, [requestId, leaseName, requestedBy.slice(0, 128), reason === null ? null : reason.slice(0, 500)]);
    if (ins.rows[0]) return { request: toHandover(ins.rows[0]), created: true };
    const pending = await db.query<HandoverDbRow>(PENDING, [leaseName]);
    if (pending.rows[0]) return { request: toHandover(pending.rows[0]), created: false };
    if (i >= 3) throw new Error('handover request: the pending request kept changing; retry');
  }
}

export async function listHandovers(db: PgDatabase, leaseName: string, limit: number): Promise<HandoverRequest[]> {
  return (await db.query<HandoverDbRow>(LIST, [leaseName, limit])).rows.map(toHandover);
}

export function fencedCompleteHandover(db: PgDatabase, token: LeaseToken, requestId: string):
Promise<Fenced<{ request: HandoverRequest | null; applied: boolean }>> {
  return fencedTransaction(db, token, 'complete_handover', async (tx) => {
    const r = await tx.query(COMPLETE, [requestId, token.leaseName, token.leaseEpoch, token.holderId]);
    const applied = (r.rowCount ?? 0) > 0;
    const row = (await tx.query<HandoverDbRow>(BY_ID, [requestId])).rows[0];
    return { value: { request: row ? toHandover(row) : null, applied }, rowsWritten: applied ? 1 : 0 };
  });
}
