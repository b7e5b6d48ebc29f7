// zod schemas of the partition-count routes (issue 26): the POST body (it validates the request) and the views of
// the recorded count, a change and the partition leases, checked against the port's types at compile time.
import { z } from 'zod';
import { MAX_EXECUTOR_PARTITIONS } from '../../limits.js';
import type { PartitionChangeState } from '../../store/partitionPorts.js';

const instant = z.iso.datetime({ offset: true }).describe('ISO-8601 instant (UTC, milliseconds), database time');
const count = z.int().min(1).max(MAX_EXECUTOR_PARTITIONS);
const CHANGE_STATES = ['preparing', 'pending', 'reassigning', 'completed', 'cancelled'] as const satisfies readonly PartitionChangeState[];

/** POST /ops/partitions: the count to change to. */
export const partitionCountBodySchema = z.strictObject({
  count: z.int(`must be an integer from 1 to ${MAX_EXECUTOR_PARTITIONS}`)
    .min(1, `must be an integer from 1 to ${MAX_EXECUTOR_PARTITIONS}`)
    .max(MAX_EXECUTOR_PARTITIONS, `must be an integer from 1 to ${MAX_EXECUTOR_PARTITIONS} (EXECUTOR_PARTITIONS at most)`)
    .describe('The partition count to change to; at most this instance\'s EXECUTOR_PARTITIONS'),
}, { error: (i) => (i.code === 'unrecognized_keys' ? undefined : 'the body must be a JSON object {"count": N}') });

export const partitionChangeSchema = z.strictObject({
  changeId: z.uuid().describe('Change id (UUIDv7)'),
  fromCount: count.describe('The recorded count when the change was requested'),
  toCount: count,
  state: z.enum(CHANGE_STATES).describe('preparing: execution goes on while finished intents move to their new partition; pending: leaders drain and release, the changer takes every lease 0..max(from, to)−1 in order; ' +
    'reassigning: the count is toCount, existing intents move in batches (scan, then catch-up); completed: every lease released; ' +
    'cancelled: an operator cancelled it before its switch (the count never changed)'),
  requestedAt: instant,
  requestedBy: z.string(),
  prepareCursor: z.string().nullable().describe('The last intent id the preparing pass passed (null: not started)'),
  preparedAt: instant.nullable().describe('The preparing pass ended; leaders drain from then on'),
  changer: z.string().nullable().describe('Holder id of the changer that last claimed it (null before the first claim)'),
  claimedAt: instant.nullable(),
  switchedAt: instant.nullable().describe('When the count became toCount (the step to reassigning)'),
  scanCursor: z.string().nullable().describe('The last intent id the scan passed (null: not started)'),
  scanDoneAt: instant.nullable().describe('The scan ended; the catch-up pass follows, then completion'),
  rowsMoved: z.int().min(0).describe('Intents moved to another partition so far'),
  completedAt: instant.nullable().describe('When it ended (completed or cancelled)'),
  failedSteps: z.int().min(0).describe('Changer steps in a row that failed (0 after a step that did not fail)'),
  stuck: z.boolean().describe('failedSteps ≥ PARTITION_CHANGE_STUCK_STEPS while active: see lastStepError and docs/operations.md ' +
    '("A count change that does not progress")'),
  lastStepError: z.string().nullable().describe('The last failed step\'s reason (SQL error code and class; never a payload)'),
  lastFailedAt: instant.nullable(),
  cancelledAt: instant.nullable().describe('When an operator cancelled it (state cancelled; or preparing while the finished intents its pass '
    + 'had moved go back, toCount then being fromCount)'),
  cancelledBy: z.string().nullable(),
}).describe('A change of the partition count (cancellable before its switch, then roll forward only; at most one active)');
export type PartitionChangeView = z.infer<typeof partitionChangeSchema>;

export const changeLeaseSchema = z.strictObject({
  partition: z.int().min(0),
  leaseName: z.string(),
  holderId: z.string().nullable().describe('The row\'s holder, held or not (null: never acquired)'),
  leaseEpoch: z.int().min(0).describe('The newest epoch granted (0: never acquired)'),
  expiresAt: instant.nullable(),
  held: z.boolean().describe('expiresAt > database time'),
  heldByChanger: z.boolean().describe('Held by the active change\'s changer (false with no active change)'),
});
export type ChangeLeaseView = z.infer<typeof changeLeaseSchema>;

export const partitionLayoutSchema = z.strictObject({
  count: count.describe('The recorded count: it governs execution and the partition of new intents'),
  recordedAt: instant.describe('When it was recorded'),
  recordedBy: z.string().describe('The first process, `migration`, or the changer that switched it (`none`: not recorded yet)'),
  generation: z.int().min(0).describe('The layout generation: raised by 1 by every change\'s switch; sent to the provider as '
    + 'X-Layout-Generation (a request under an older generation is stale: docs/provider-fencing.md)'),
  executorPartitions: count.describe('EXECUTOR_PARTITIONS of the instance that answered: the largest count it accepts'),
  dbNow: instant,
  active: partitionChangeSchema.nullable().describe('The change in progress (null: none)'),
  changes: z.array(partitionChangeSchema).describe('The newest 20 changes, newest requested first'),
  leases: z.array(changeLeaseSchema).describe('Lease rows of partitions 0..max(count, active.toCount)−1'),
}).describe('The recorded partition count, the change in progress and the partition leases');

export const partitionChangeRequestedSchema = z.strictObject({
  created: z.boolean().describe('false: a change to the same count was already active, and this is it (a retry is harmless)'),
  change: partitionChangeSchema,
}).describe('The change recorded (or already active)');

export const partitionCountUnchangedSchema = z.strictObject({
  unchanged: z.literal(true),
  count: count,
  recordedAt: instant,
  recordedBy: z.string(),
}).describe('The count is already the one asked for and no change is active: nothing recorded');

export const partitionChangeCancelledSchema = z.strictObject({
  cancelled: z.literal(true),
  alreadyCancelled: z.boolean().describe('true: it was cancelled before (a retry is harmless)'),
  movingBack: z.boolean().describe('true: its preparing pass had moved finished intents; they go back to their partition under the count '
    + 'in force (state preparing, toCount = fromCount, execution going on), then the change ends as cancelled'),
  leasesReleased: z.int().min(0).describe('Partition leases a changer held that this call released (each conditional on holder and epoch)'),
  change: partitionChangeSchema,
}).describe('The change is cancelled: the count in force is fromCount, leaders resume');
