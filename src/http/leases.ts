// GET /leases and GET /leases/{partition} (issue 25): each executor partition's lease row, holder, epoch, backlog
// and last attempt, read from SQL on any instance in one statement (InsightStore.partitionStates: never one query
// per partition). Whether a row is held is judged by database time (expiresAt > dbNow), never a local clock; a row
// that is not held shows no holder (its last one stays in lastHolderId, its epoch in leaseEpoch: the newest granted).
// GET /lease keeps answering for partition 0 (intents.ts). Errors are problem+json through `guarded`.
import { partitionLeaseName } from '../limits.js';
import type { PartitionState } from '../store/insightPorts.js';
import type { HttpContext } from './context.js';
import { guarded } from './guarded.js';
import type { PartitionLeaseView } from './openapi/schemas.js';
import { json, problem, validationProblem } from './problem.js';
import type { ApiHandler } from './request.js';

type LeasesContext = Pick<HttpContext, 'config' | 'logger'> & { stores: Pick<HttpContext['stores'], 'insights'> };

/** The API's view of one partition's lease row and work (also the dashboard's Partitions card). */
export function partitionLeaseView(p: PartitionState, dbNow: Date): PartitionLeaseView {
  const held = p.lease !== null && p.lease.expiresAt.getTime() > dbNow.getTime();
  return {
    partition: p.partition,
    leaseName: p.leaseName,
    held,
    holderId: held ? p.lease!.holderId : null,
    lastHolderId: p.lease?.holderId ?? null,
    leaseEpoch: p.lease?.leaseEpoch ?? 0,
    acquiredAt: p.lease?.acquiredAt.toISOString() ?? null,
    renewedAt: p.lease?.renewedAt.toISOString() ?? null,
    expiresAt: p.lease?.expiresAt.toISOString() ?? null,
    backlog: { scheduled: p.scheduled, due: p.due },
    lastAttemptAt: p.lastAttemptAt?.toISOString() ?? null,
  };
}

/** Partition `partition` and its lease row's name. */
export const partitionRef = (app: Pick<HttpContext, 'config'>, partition: number) => ({ partition, leaseName: partitionLeaseName(app.config.lease.name, partition) });

/** GET /leases: every partition 0..P−1, partition 0 first. */
export function leasesHandler(app: LeasesContext): ApiHandler {
  return guarded(app.logger, 'intents', 'getLeases', async () => {
    const count = app.config.partitions.count;
    const r = await app.stores.insights.partitionStates(Array.from({ length: count }, (_, p) => partitionRef(app, p)));
    return json(200, { partitions: count, dbNow: r.dbNow.toISOString(), leases: r.partitions.map((p) => partitionLeaseView(p, r.dbNow)) });
  });
}

/** GET /leases/{partition}: 400 for a partition that is not an integer, 404 naming the range for one outside it. */
export function partitionLeaseHandler(app: LeasesContext): ApiHandler {
  return guarded(app.logger, 'intents', 'getPartitionLease', async (req, instance) => {
    const raw = req.params.partition ?? '';
    if (!/^-?\d{1,12}$/.test(raw)) {
      return validationProblem([{ path: 'partition', message: `must be an integer (a partition number), got ${JSON.stringify(raw.slice(0, 40))}` }], instance);
    }
    const partition = Number(raw);
    const count = app.config.partitions.count;
    if (partition < 0 || partition >= count) {
      return problem(404, 'partition-not-found', 'Not found',
        `no partition ${partition}: EXECUTOR_PARTITIONS is ${count}, so partitions are 0..${count - 1}`,
        { instance, partition, validRange: { min: 0, max: count - 1 } });
    }
    const r = await app.stores.insights.partitionStates([partitionRef(app, partition)]);
    return json(200, { ...partitionLeaseView(r.partitions[0]!, r.dbNow), dbNow: r.dbNow.toISOString() });
  });
}
