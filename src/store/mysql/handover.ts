// MySQL / MariaDB handover requests: record (one pending per lease name: the unique index on the generated
// pending_lease column), list, and the leader's fenced completion. Used by MysqlOpsStore.
import type { Fenced, LeaseToken } from '../ports.js';
import type { HandoverRequest } from '../opsPorts.js';
import { isStoreError } from '../ports.js';
import { HANDOVER_COLS, toHandover, type HandoverDbRow } from '../rowMapping.js';
import type { MyDatabase } from './db.js';
import { fencedTransaction } from './fence.js';
import { NOW, idParam } from './rows.js';

// The epoch leading now (a live lease row), recorded for the operator; null when nobody leads.
const INSERT = `
INSERT INTO submission_manager_handover_requests (request_id, lease_name, status, requested_at, requested_by, reason, requested_epoch)
SELECT ?, ?, 'pending', ${NOW}, ?, ?,
       (SELECT l.lease_epoch FROM submission_manager_leases AS l WHERE l.lease_name = ? AND l.expires_at > ${NOW})`;

const PENDING = `SELECT ${HANDOVER_COLS} FROM submission_manager_handover_requests WHERE lease_name = ? AND status = 'pending'`;

const BY_ID = `SELECT ${HANDOVER_COLS} FROM submission_manager_handover_requests WHERE request_id = ?`;

export async function requestHandover(db: MyDatabase, leaseName: string, requestId: string, requestedBy: string, reason: string | null):
Promise<{ request: HandoverRequest; created: boolean }> {
  const id = idParam(requestId);
  // A conflicting pending row may be completed between our insert and read: then insert again.
  for (let i = 0; ; i++) {
    try {
      await db.query(INSERT, [id, leaseName, requestedBy.slice(0, 128), reason === null ? null : reason.slice(0, 500), leaseName]);
      return { request: toHandover((await db.query<HandoverDbRow>(BY_ID, [id])).rows[0]!), created: true };
    } catch (e) {
      if (!(isStoreError(e) && e.kind === 'conflict')) throw e;
    }
    const pending = await db.query<HandoverDbRow>(PENDING, [leaseName]);
    if (pending.rows[0]) return { request: toHandover(pending.rows[0]), created: false };
    if (i >= 3) throw new Error('handover request: the pending request kept changing; retry');
  }
}

export async function listHandovers(db: MyDatabase, leaseName: string, limit: number): Promise<HandoverRequest[]> {
  return (await db.query<HandoverDbRow>(`SELECT ${HANDOVER_COLS} FROM submission_manager_handover_requests WHERE lease_name = ?
    ORDER BY requested_at DESC, request_id DESC LIMIT ?`, [leaseName, limit])).rows.map(toHandover);
}

export function fencedCompleteHandover(db: MyDatabase, token: LeaseToken, requestId: string):
Promise<Fenced<{ request: HandoverRequest | null; applied: boolean }>> {
  const id = idParam(requestId);
  return fencedTransaction(db, token, 'complete_handover', async (tx) => {
    const cur = (await tx.query<{ pending: number }>(
      `SELECT lease_name = ? AND status = 'pending' AS pending FROM submission_manager_handover_requests WHERE request_id = ? FOR UPDATE`,
      [token.leaseName, id])).rows[0];
    const applied = Number(cur?.pending) === 1;
    if (applied) {
      await tx.query(`UPDATE submission_manager_handover_requests
          SET status = 'completed', completed_at = ${NOW}, completed_epoch = ?, completed_by = ? WHERE request_id = ?`,
      [token.leaseEpoch, token.holderId, id]);
    }
    const row = (await tx.query<HandoverDbRow>(BY_ID, [id])).rows[0];
    return { value: { request: row ? toHandover(row) : null, applied }, rowsWritten: applied ? 1 : 0 };
  });
}
