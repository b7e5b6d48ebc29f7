// zod schemas of the API's responses and of the admin request bodies. The request schemas of the intents
// API live in src/intents/contract.ts (they validate requests); these describe what the handlers send and
// are checked against the TypeScript view types at compile time, so the OpenAPI document cannot drift from
// the code that builds the responses.
import { z } from 'zod';
import { INTENT_STATUSES, MAX_ATTEMPTS_LIMIT, isoDateTime, type AttemptView, type IntentView } from '../../intents/contract.js';
import { isUuid } from '../../intents/ids.js';
import type { AttemptOutcome } from '../../store/intentPorts.js';

const instant = z.iso.datetime({ offset: true }).describe('ISO-8601 instant (UTC, milliseconds), database time');
const ATTEMPT_OUTCOMES = ['started', 'succeeded', 'retryable_error', 'permanent_error', 'abandoned', 'aborted'] as const satisfies readonly AttemptOutcome[];

const intentFields = {
  intentId: z.uuid().describe('Intent id (UUIDv7: ordered by creation)'),
  status: z.enum(INTENT_STATUSES),
  attemptCount: z.int().min(0).describe('Attempts started so far (authoritative)'),
  maxAttempts: z.int().min(1).describe(`Attempt budget: the submitted maxAttempts (1 to ${MAX_ATTEMPTS_LIMIT}); each redrive raises it to the attempts sent so far + that budget`),
  nextAttemptAt: instant,
  createdAt: instant,
  lastModifiedAt: instant,
  lastError: z.string().nullable(),
  partition: z.int().min(0).describe('Executor partition, assigned at submit and kept: a hash of partitionKey, else of intentId, modulo EXECUTOR_PARTITIONS (0 with one partition)'),
  partitionKey: z.string().nullable().describe('The submitted partitionKey (null: none; the partition then follows from intentId)'),
};

export const intentViewSchema = z.strictObject({
  ...intentFields,
  payload: z.record(z.string(), z.unknown()).optional().describe('The submitted payload (single-intent representations only)'),
}).describe('An intent');

export const intentSummarySchema = z.strictObject(intentFields).describe('An intent in a list page (no payload)');

export const intentListSchema = z.strictObject({
  items: z.array(intentSummarySchema),
  nextAfter: z.uuid().nullable().describe('Pass as `after` for the next page; null on the last page'),
});

export const attemptViewSchema = z.strictObject({
  attemptNo: z.int().min(1),
  leaseEpoch: z.int().min(1).describe('Epoch of the leader that started the attempt'),
  holderId: z.string(),
  startedAt: instant,
  finishedAt: instant.nullable(),
  outcome: z.enum(ATTEMPT_OUTCOMES),
  httpStatus: z.int().nullable(),
  error: z.string().nullable(),
  durationMs: z.int().nullable(),
});

export const attemptListSchema = z.strictObject({ intentId: z.uuid(), attempts: z.array(attemptViewSchema) });

export const leaseViewSchema = z.strictObject({
  leaseName: z.string(),
  holderId: z.string(),
  leaseEpoch: z.int().min(1),
  acquiredAt: instant,
  renewedAt: instant,
  expiresAt: instant,
  dbNow: instant.describe('Database time when the row was read'),
  expired: z.boolean().describe('expiresAt <= dbNow (judged by database time)'),
}).describe('The lease row as the database holds it');

export const partitionLeaseSchema = z.strictObject({
  partition: z.int().min(0).describe('Executor partition (0..EXECUTOR_PARTITIONS−1)'),
  leaseName: z.string().describe('Its lease row: LEASE_NAME for partition 0, LEASE_NAME#k for partition k'),
  held: z.boolean().describe('The row is held now: acquired and expiresAt > dbNow (judged by database time)'),
  holderId: z.string().nullable().describe('The holder while held (null: nobody leads this partition now)'),
  lastHolderId: z.string().nullable().describe('The row\'s holder, held or not (null: never acquired)'),
  leaseEpoch: z.int().min(0).describe('The newest epoch granted for this partition (0: never acquired); a provider fencing per partition keeps the highest it saw'),
  acquiredAt: instant.nullable(),
  renewedAt: instant.nullable(),
  expiresAt: instant.nullable(),
  backlog: z.strictObject({
    scheduled: z.int().min(0).describe('Scheduled intents of this partition'),
    due: z.int().min(0).describe('Of those, due now (next attempt at or before dbNow)'),
  }),
  lastAttemptAt: instant.nullable().describe('The latest attempt start in this partition among the newest 10 000 attempts of all partitions (null: none there)'),
}).describe('One executor partition: its lease row, backlog and last attempt');

export const partitionLeaseViewSchema = partitionLeaseSchema.extend({
  dbNow: instant.describe('Database time of the read'),
}).describe('One executor partition (downstream fencing checks per partition)');

export const partitionLeaseListSchema = z.strictObject({
  partitions: z.int().min(1).describe('EXECUTOR_PARTITIONS'),
  dbNow: instant.describe('Database time of the read (one statement)'),
  leases: z.array(partitionLeaseSchema).describe('Every partition, 0 first'),
});
export type PartitionLeaseView = z.infer<typeof partitionLeaseSchema>;

export const healthViewSchema = z.strictObject({
  status: z.literal('ok'),
  version: z.string().describe('The release this instance runs (package.json)'),
});

export const readyViewSchema = z.strictObject({
  mode: z.enum(['leader', 'follower']),
  holderId: z.string(),
  leaseEpoch: z.int().min(1).nullable(),
  leaseExpiresAt: instant.nullable(),
  scheduleSize: z.int().min(0),
  cluster: z.strictObject({
    leader: z.strictObject({
      holderId: z.string(), leaseEpoch: z.int().min(1), expiresAt: instant, renewedAt: instant, acquiredAt: instant,
    }).nullable().describe('The live lease holder as SQL holds it (null: nobody leads now)'),
    lastEpoch: z.int().min(1).nullable().describe('The newest epoch ever granted (null: never acquired)'),
    readAt: instant.nullable().describe('Database time of the read (cached at most 1 s)'),
    error: z.string().nullable().describe('Why the cluster view could not be read'),
  }).describe("The cluster's leader (of partition 0), read from SQL: the same answer on every instance"),
  partitions: z.array(z.strictObject({ partition: z.int().min(0), leaseEpoch: z.int().min(1).nullable(), leaseExpiresAt: instant.nullable() }))
    .optional().describe('With EXECUTOR_PARTITIONS > 1: the partitions this instance leads (mode is leader when it leads any)'),
}).describe("This instance's own role and the cluster's leader");

export const instanceViewSchema = z.strictObject({
  holderId: z.string(),
  version: z.string().describe('The app version it runs (package.json)'),
  roles: z.array(z.string()).describe('What it runs: http, timer'),
  startedAt: instant.describe('Its first heartbeat (database time)'),
  lastSeenAt: instant.describe('Its last heartbeat (database time)'),
  lastSeenAgeMs: z.number().int().min(0),
  live: z.boolean().describe('Last seen within INSTANCE_LIVE_WINDOW_MS'),
  partitions: z.array(z.number().int().min(0)).describe('The partitions it reported leading at its last heartbeat'),
}).describe('An instance as its heartbeat row reports it');

export const instanceListSchema = z.strictObject({
  dbNow: instant,
  liveWindowMs: z.number().int(),
  instances: z.array(instanceViewSchema).describe('By holder id: live ones and those seen within 20 liveness windows'),
});

export const fieldErrorSchema = z.strictObject({ path: z.string(), message: z.string() });

export const problemSchema = z.looseObject({
  type: z.string().describe('Stable URN per problem kind (branch on this)'),
  title: z.string(),
  status: z.int().min(400).max(599),
  detail: z.string(),
  instance: z.string().optional(),
  errors: z.array(fieldErrorSchema).optional().describe('Validation problems, one per field'),
}).describe('RFC 9457 problem details');

/** POST /ops/execution/pause and /resume: optional body. */
export const executionChangeBodySchema = z.strictObject(
  { reason: z.string().min(1).max(500).optional().describe('Why (kept with the flag and logged)') },
  { error: (i) => (i.code === 'unrecognized_keys' ? undefined : 'the body must be a JSON object') },
);

const pauseFlag = {
  paused: z.boolean(),
  changedAt: instant.nullable(),
  changedBy: z.string().nullable(),
  reason: z.string().nullable(),
};
const heldBy = z.enum(['cluster', 'partition']).nullable()
  .describe('Which pause keeps the partition from sending: the cluster\'s (it wins when both are set), its own, or none');
const pendingHandoverId = z.string().nullable().describe('A handover request the leader has not completed yet');
const partitionControlRow = z.strictObject({
  scope: z.literal('partition'),
  partition: z.int().min(0),
  leaseName: z.string(),
  ...pauseFlag,
  pendingHandoverId,
  heldBy,
  inLayout: z.boolean().describe('false: a partition beyond the recorded count (a shrink left its paused row): it holds nothing until a count ' +
    'change brings the partition back; resume clears it'),
}).describe('One partition\'s own pause flag (independent of the cluster\'s) and what holds it');
export const executionControlSchema = z.strictObject({
  scope: z.enum(['cluster', 'partition']).describe('cluster: no ?partition= (the flag every partition\'s leader reads); partition: ?partition=k'),
  leaseName: z.string().describe('The control row\'s key: LEASE_NAME#* for the cluster, the partition\'s lease name otherwise'),
  ...pauseFlag,
  dbNow: instant,
  pendingHandoverId: pendingHandoverId.describe('The partition\'s pending drain (cluster scope: partition 0\'s; every partition\'s is in partitions)'),
  partition: z.int().min(0).optional().describe('Scope partition: the partition'),
  heldBy: heldBy.optional().describe('Scope partition: which pause keeps it from sending'),
  inLayout: z.boolean().optional().describe('Scope partition: false for a partition beyond the recorded count (its flag holds nothing now)'),
  running: z.boolean().optional().describe('Scope cluster: no pause holds any partition of the recorded layout (neither the cluster\'s nor a partition\'s own)'),
  stillHeld: z.array(z.int().min(0)).optional()
    .describe('Scope cluster: the partitions of the recorded layout paused by their own flag, which a cluster resume leaves held'),
  resumed: z.strictObject({ cluster: z.boolean(), partitions: z.array(z.int().min(0)) }).optional()
    .describe('POST resume?partition=all: whether the cluster\'s flag was set, and the partitions whose own flag it cleared'),
  clusterPaused: z.boolean().optional().describe('Scope partition: the cluster\'s flag, read in the same statement'),
  partitionCount: z.int().min(1).optional().describe('Scope cluster: the recorded partition count (SQL), not this instance\'s EXECUTOR_PARTITIONS'),
  partitionChange: z.strictObject({ changeId: z.string(), fromCount: z.int().min(1), toCount: z.int().min(1), state: z.string() }).nullable().optional()
    .describe('Scope cluster: the count change in progress (its partitions are listed too)'),
  partitions: z.array(partitionControlRow).optional()
    .describe('Scope cluster: every partition of the recorded layout (0..max(count, an active change\'s counts) − 1), then every paused ' +
      'row beyond it (inLayout false)'),
  note: z.string().describe('What this pause holds'),
}).describe('Execution control: the cluster\'s pause (every partition, any layout) or one partition\'s (the intents in it under the current layout). No row = running');

const handoverRequestRow = z.strictObject({
  requestId: z.string(),
  leaseName: z.string(),
  status: z.enum(['pending', 'completed']),
  requestedAt: instant,
  requestedBy: z.string(),
  reason: z.string().nullable(),
  requestedEpoch: z.int().min(1).nullable().describe('The epoch leading when it was recorded (null: nobody led)'),
  completedAt: instant.nullable().describe('When the leader had finished its in-flight work, just before it released the lease'),
  completedEpoch: z.int().min(1).nullable().describe('The epoch that drained; the next leader gets a higher one'),
  completedBy: z.string().nullable(),
});
export const handoverRequestSchema = handoverRequestRow.extend({
  scope: z.enum(['cluster', 'partition']).optional().describe('cluster: no ?partition= (one request per partition of the recorded layout)'),
  partitions: z.array(handoverRequestRow).optional()
    .describe('Scope cluster with more than one partition recorded: every partition\'s request (the fields above are partition 0\'s)'),
}).describe('A request that the leader hand over (recorded in SQL by any instance)');

export const handoverListSchema = z.strictObject({
  leaseName: z.string(),
  pending: handoverRequestRow.nullable(),
  requests: z.array(handoverRequestRow).describe('Newest first (pending and completed)'),
});

/** POST /ops/intents/redrive: the body (it validates the request) and the result. */
export const REDRIVE_LIMIT_DEFAULT = 100;
export const REDRIVE_LIMIT_MAX = 1_000;

const intentId = z.string().refine(isUuid, 'must be an intent id (UUID)').transform((s) => s.toLowerCase());

export const redriveBodySchema = z.strictObject({
  ids: z.array(intentId).min(1).max(REDRIVE_LIMIT_MAX).optional()
    .describe(`Explicit intent ids (1 to ${REDRIVE_LIMIT_MAX}); ids that are not failed are reported in notRedriven`),
  filter: z.strictObject({
    status: z.literal('failed').default('failed').describe('Only failed intents are ever redriven'),
    failedFrom: isoDateTime.optional().describe('Failed (last modified) at or after this instant'),
    failedTo: isoDateTime.optional().describe('Failed (last modified) before this instant'),
    errorContains: z.string().min(1).max(200).optional().describe('Case-insensitive substring of the last error'),
  }).optional().describe('Select failed intents, oldest failure first'),
  limit: z.int().min(1).max(REDRIVE_LIMIT_MAX).default(REDRIVE_LIMIT_DEFAULT)
    .describe(`At most this many intents per call (default ${REDRIVE_LIMIT_DEFAULT})`),
  reason: z.string().min(1).max(500).optional().describe('Why (kept with the record and logged)'),
}, { error: (i) => (i.code === 'unrecognized_keys' ? undefined : 'the body must be a JSON object') })
  .refine((b) => (b.ids === undefined) !== (b.filter === undefined), { message: 'give exactly one of ids or filter', path: ['ids'] })
  .refine((b) => !b.filter?.failedFrom || !b.filter.failedTo || Date.parse(b.filter.failedFrom) < Date.parse(b.filter.failedTo),
    { message: 'failedFrom must be before failedTo', path: ['filter', 'failedFrom'] });

export const redriveResultSchema = z.strictObject({
  redriveId: z.uuid().describe('Id of the recorded redrive'),
  requestedAt: z.iso.datetime({ offset: true }).describe('Database time of the redrive; the intents are due from then'),
  requestedBy: z.string(),
  redriven: z.int().min(0),
  intents: z.array(z.strictObject({
    intentId: z.uuid(),
    attemptsBefore: z.int().min(0).describe('Attempts made before; the next one is attemptsBefore + 1'),
    maxAttempts: z.int().min(1).describe('The new budget: attempts sent so far + the submitted maxAttempts'),
  })),
  notRedriven: z.array(z.uuid()).describe('Explicit ids left alone: unknown, or not failed (already redriven, still active, succeeded, cancelled)'),
  more: z.boolean().describe('The limit was reached: more matching intents may remain (call again)'),
});
export type RedriveView = z.infer<typeof redriveResultSchema>;

// Compile-time: the schemas describe exactly the view types the handlers build.
type Same<A, B> = [A] extends [B] ? ([B] extends [A] ? true : false) : false;
const viewsMatch: [Same<z.infer<typeof intentViewSchema>, IntentView>, Same<z.infer<typeof attemptViewSchema>, AttemptView>] = [true, true];
void viewsMatch;
