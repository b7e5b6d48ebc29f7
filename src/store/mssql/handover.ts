// SQL Server handover requests: record (one pending per lease name: the check and the insert under
// UPDLOCK+SERIALIZABLE in one transaction), list, and the leader's fenced completion (one batch).
import type { Fenced, LeaseToken } from '../ports.js';
import type { HandoverRequest } from '../opsPorts.js';
import { HANDOVER_COLS, toHandover, type HandoverDbRow } from '../rowMapping.js';
import type { MssqlRunner } from './db.js';
import { buildFencedBatch, runFencedBatch } from './fence.js';
import { BATCH_START, p, type SqlQuery } from './params.js';

export const handoverQueries = {
  /** Last result set: the request (the new one, or the one already pending) with `created`. */
  requestHandover(leaseName: string, requestId: string, requestedBy: string, reason: string | null): SqlQuery {
    return {
      text: `
${BATCH_START}
DECLARE @id char(36) = NULL;
DECLARE @created bit = 0;
BEGIN TRANSACTION;
SELECT TOP (1) @id = request_id FROM submission_manager_handover_requests WITH (UPDLOCK, SERIALIZABLE)
 WHERE lease_name = @lease_name AND status = 'pending' ORDER BY requested_at;
IF @id IS NULL
BEGIN
  INSERT INTO submission_manager_handover_requests (request_id, lease_name, status, requested_at, requested_by, reason, requested_epoch)
  SELECT @request_id, @lease_name, 'pending', @now, @requested_by, @reason,
         (SELECT l.lease_epoch FROM submission_manager_leases AS l WHERE l.lease_name = @lease_name AND l.expires_at > @now);
  SET @id = @request_id;
  SET @created = 1;
END;
COMMIT TRANSACTION;
SELECT ${HANDOVER_COLS}, @created AS created FROM submission_manager_handover_requests WHERE request_id = @id;`,
      params: [
        p.uuid('request_id', requestId),
        p.varchar('lease_name', 64, leaseName),
        p.varchar('requested_by', 128, requestedBy.slice(0, 128)),
        p.nvarchar('reason', 500, reason === null ? null : reason.slice(0, 500)),
      ],
    };
  },

  listHandovers(leaseName: string, limit: number): SqlQuery {
    return {
      text: `SELECT TOP (@limit) ${HANDOVER_COLS} FROM submission_manager_handover_requests
 WHERE lease_name = @lease_name ORDER BY requested_at DESC, request_id DESC;`,
      params: [p.varchar('lease_name', 64, leaseName), p.int('limit', limit)],
    };
  },

  /** Fenced: the request completed by the fence's holder and epoch if it was pending; then the row as it is. */
  completeHandover(token: LeaseToken, requestId: string): SqlQuery {
    return buildFencedBatch(token, 'complete_handover', {
      declare: '',
      body: `UPDATE submission_manager_handover_requests
   SET status = 'completed', completed_at = SYSUTCDATETIME(), completed_epoch = @fence_lease_epoch, completed_by = @fence_holder_id
 WHERE request_id = @request_id AND lease_name = @fence_lease_name AND status = 'pending';
SET @rows_written = @@ROWCOUNT;`,
      results: `SELECT ${HANDOVER_COLS}, @rows_written AS applied FROM submission_manager_handover_requests WHERE request_id = @request_id;`,
      params: [p.uuid('request_id', requestId)],
    });
  },
};

export async function requestHandover(db: MssqlRunner, leaseName: string, requestId: string, requestedBy: string, reason: string | null):
Promise<{ request: HandoverRequest; created: boolean }> {
  const sets = await db.run<HandoverDbRow & { created: boolean | number }>(handoverQueries.requestHandover(leaseName, requestId, requestedBy, reason));
  const row = sets[sets.length - 1]![0]!;
  return { request: toHandover(row), created: row.created === true || row.created === 1 };
}

export async function listHandovers(db: MssqlRunner, leaseName: string, limit: number): Promise<HandoverRequest[]> {
  const [rows = []] = await db.run<HandoverDbRow>(handoverQueries.listHandovers(leaseName, limit));
  return rows.map(toHandover);
}

export async function fencedCompleteHandover(db: MssqlRunner, token: LeaseToken, requestId: string):
Promise<Fenced<{ request: HandoverRequest | null; applied: boolean }>> {
  const out = await runFencedBatch<HandoverDbRow & { applied: number }>(db, handoverQueries.completeHandover(token, requestId));
  if (out.kind === 'leaseLost') return out;
  const row = out.value[0]?.[0];
  return { kind: 'ok', value: { request: row ? toHandover(row) : null, applied: Number(row?.applied ?? 0) > 0 } };
}
