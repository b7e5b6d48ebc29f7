// The OpenAPI 3.1 document, generated from the zod schemas that validate requests (src/intents/contract.ts,
// src/http/openapi/schemas.ts) and describe responses. operationId = the registered function's name, and
// `x-auth-level` its auth level (test/functions/openapi.test.ts checks both against the registrations).
// Served at GET /api/openapi.json; `npm run openapi` writes docs/openapi.json (a test fails when it is stale).
import { z } from 'zod';
import { IDEMPOTENCY_HEADER, idempotencyKeySchema, listQuerySchema, rescheduleBodySchema, submitBodySchema } from '../../intents/contract.js';
import { appVersion } from '../../config.js';
import type { ApiResponse } from '../problem.js';
import * as P from './partitionSchemas.js';
import * as S from './schemas.js';

/** The document's info.version: the release (package.json), so the contract a client reads names the code serving it. */
export const API_VERSION = appVersion();

type Json = Record<string, unknown>;

const jsonSchemaOptions = {
  target: 'draft-2020-12' as const,
  unrepresentable: 'any' as const,
  // The payload is a zod custom type (any JSON object): say so instead of "anything".
  override: (ctx: { zodSchema: unknown; jsonSchema: Json }) => {
    const def = (ctx.zodSchema as { _zod?: { def?: { type?: string } } })._zod?.def;
    if (def?.type === 'custom') Object.assign(ctx.jsonSchema, { type: 'object', description: 'Any JSON object (at most 64 levels deep)' });
  },
};

function components(): Record<string, Json> {
  const reg = z.registry<{ id: string }>();
  const add = (id: string, s: z.ZodType) => reg.add(s, { id });
  add('SubmitIntentRequest', submitBodySchema);
  add('RescheduleRequest', rescheduleBodySchema);
  add('ExecutionChangeRequest', S.executionChangeBodySchema);
  add('Intent', S.intentViewSchema);
  add('IntentSummary', S.intentSummarySchema);
  add('IntentList', S.intentListSchema);
  add('Attempt', S.attemptViewSchema);
  add('AttemptList', S.attemptListSchema);
  add('Lease', S.leaseViewSchema);
  add('PartitionLease', S.partitionLeaseViewSchema);
  add('PartitionLeaseList', S.partitionLeaseListSchema);
  add('Health', S.healthViewSchema);
  add('Ready', S.readyViewSchema);
  add('FieldError', S.fieldErrorSchema);
  add('Problem', S.problemSchema);
  add('ExecutionControl', S.executionControlSchema);
  add('RedriveRequest', S.redriveBodySchema);
  add('RedriveResult', S.redriveResultSchema);
  add('HandoverRequest', S.handoverRequestSchema);
  add('HandoverList', S.handoverListSchema);
  add('InstanceList', S.instanceListSchema);
  add('PartitionCountRequest', P.partitionCountBodySchema);
  add('PartitionChange', P.partitionChangeSchema);
  add('PartitionChangeCancelled', P.partitionChangeCancelledSchema);
  add('PartitionChangeRequested', P.partitionChangeRequestedSchema);
  add('PartitionCountUnchanged', P.partitionCountUnchangedSchema);
  add('PartitionLayout', P.partitionLayoutSchema);
  const out = z.toJSONSchema(reg, { ...jsonSchemaOptions, io: 'output', uri: (id) => `#/components/schemas/${id}` });
  const schemas: Record<string, Json> = {};
  for (const [id, s] of Object.entries(out.schemas)) {
    const { $schema: _s, $id: _i, ...rest } = s as Json;
    schemas[id] = rest;
  }
  return schemas;
}

const ref = (id: string) => ({ $ref: `#/components/schemas/${id}` });
const jsonContent = (id: string) => ({ 'application/json': { schema: ref(id) } });
const text = (description: string) => ({ description, content: { 'text/plain': { schema: { type: 'string' } } } });

const PROBLEMS: Record<number, string> = {
  400: 'Invalid input (`errors` names each field); nothing was stored',
  404: 'Not found',
  409: 'Conflict with the current state (see `type`)',
  413: 'Body larger than 256 KiB',
  415: 'Content type is not application/json',
  500: 'Unexpected error (logged)',
  503: 'Database unavailable or the app is starting; retry later (Retry-After)',
};
const problems = (...statuses: number[]) => Object.fromEntries([...statuses, 500, 503].map((s) => [String(s),
  { description: PROBLEMS[s], content: { 'application/problem+json': { schema: ref('Problem') } } }]));

const FUNCTION_KEY = [{ functionKey: [] }, { functionKeyQuery: [] }];
const idParam = { name: 'id', in: 'path', required: true, schema: { type: 'string' }, description: 'Intent id' };
const partitionParam = { name: 'partition', in: 'query', required: false, schema: { type: 'integer', minimum: 0 },
  description: 'One executor partition of the recorded layout (0 to the recorded count − 1, or an active change\'s larger count − 1; ' +
    'never judged by the answering instance\'s EXECUTOR_PARTITIONS); absent: the cluster (reads of handovers: partition 0)' };

/** ?partition= of the execution control: a pause names a partition of the recorded layout; a read or a resume any partition
 *  whose row can exist (a shrink leaves rows beyond the count), a resume also `all`. */
const controlPartitionParam = (k: 'get' | 'pause' | 'resume') => k === 'pause' ? partitionParam : {
  name: 'partition', in: 'query', required: false,
  schema: k === 'resume' ? { oneOf: [{ type: 'integer', minimum: 0, maximum: 63 }, { type: 'string', enum: ['all'] }] } : { type: 'integer', minimum: 0, maximum: 63 },
  description: 'One executor partition: of the recorded layout, or beyond it (the row a shrink left)' +
    (k === 'resume' ? '; all: the cluster and every partition' : '') + '; absent: the cluster',
};

function op(operationId: string, auth: 'anonymous' | 'function' | 'admin', summary: string, spec: Json): Json {
  return { operationId, summary, 'x-auth-level': auth, security: auth === 'anonymous' ? [] : FUNCTION_KEY, ...spec };
}

function listParameters(): Json[] {
  const s = z.toJSONSchema(listQuerySchema, { ...jsonSchemaOptions, io: 'input' }) as { properties: Record<string, Json> };
  return Object.entries(s.properties).map(([name, schema]) => ({ name, in: 'query', required: false, schema }));
}

export function buildOpenApiDocument(): Json {
  const idempotencyHeader = {
    name: IDEMPOTENCY_HEADER, in: 'header', required: false,
    description: 'Same key + same body → 200 with the same intent; same key + different body → 409',
    schema: z.toJSONSchema(idempotencyKeySchema, { ...jsonSchemaOptions, io: 'input' }),
  };
  delete (idempotencyHeader.schema as Json).$schema;
  const intent = (description: string) => ({ description, content: jsonContent('Intent') });
  const located = (description: string) => ({ ...intent(description), headers: { Location: { schema: { type: 'string' }, description: 'The intent URL' } } });
  return {
    openapi: '3.1.0',
    info: {
      title: 'SubmissionManager',
      version: API_VERSION,
      description: 'Accepts submission intents on every instance; exactly one instance (the SQL lease holder) executes attempts. ' +
        'Errors are RFC 9457 problem details (application/problem+json). Admin routes need the host (master) key in Azure.',
    },
    servers: [{ url: '/api' }],
    paths: {
      '/intents': {
        post: op('postIntent', 'function', 'Submit an intent', {
          parameters: [idempotencyHeader],
          requestBody: { required: true, content: jsonContent('SubmitIntentRequest') },
          responses: { 201: located('Created'), 200: located('Idempotent replay: the intent this key created'), ...problems(400, 409, 413, 415) },
        }),
        get: op('listIntents', 'function', 'List intents by id (creation order)', {
          parameters: listParameters(),
          responses: { 200: { description: 'A page', content: jsonContent('IntentList') }, ...problems(400) },
        }),
      },
      '/intents/{id}': {
        get: op('getIntent', 'function', 'Get an intent', { parameters: [idParam], responses: { 200: intent('The intent'), ...problems(404) } }),
      },
      '/intents/{id}/attempts': {
        get: op('getIntentAttempts', 'function', 'The attempt log of an intent', {
          parameters: [idParam], responses: { 200: { description: 'Attempts, oldest first', content: jsonContent('AttemptList') }, ...problems(404) },
        }),
      },
      '/intents/{id}/cancel': {
        post: op('cancelIntent', 'function', 'Cancel a scheduled or in-flight intent', {
          parameters: [idParam], responses: { 200: intent('Cancelled'), ...problems(404, 409) },
        }),
      },
      '/intents/{id}/reschedule': {
        post: op('rescheduleIntent', 'function', 'Move the next attempt of a scheduled intent', {
          parameters: [idParam], requestBody: { required: true, content: jsonContent('RescheduleRequest') },
          responses: { 200: intent('Rescheduled'), ...problems(400, 404, 409, 413, 415) },
        }),
      },
      '/lease': {
        get: op('getLease', 'function', 'The lease as the database holds it (downstream fencing checks)', {
          responses: { 200: { description: 'The lease row', content: jsonContent('Lease') }, ...problems(404) },
        }),
      },
      '/leases': {
        get: op('getLeases', 'function', 'Every executor partition: lease row, holder, epoch, backlog, last attempt', {
          description: 'One statement, read on any instance: each partition 0..EXECUTOR_PARTITIONS−1 with its lease row (held or not by database time), ' +
            'its scheduled and due intents and its latest attempt start. With one partition the only entry is the row GET /lease shows.',
          responses: { 200: { description: 'Every partition', content: jsonContent('PartitionLeaseList') }, ...problems() },
        }),
      },
      '/leases/{partition}': {
        get: op('getPartitionLease', 'function', 'One executor partition (downstream fencing checks per partition)', {
          parameters: [{ name: 'partition', in: 'path', required: true, schema: { type: 'integer', minimum: 0 }, description: 'Partition number (0..EXECUTOR_PARTITIONS−1)' }],
          responses: { 200: { description: 'The partition', content: jsonContent('PartitionLease') }, ...problems(400, 404) },
        }),
      },
      '/instances': {
        get: op('getInstances', 'function', 'The instances as their heartbeat rows report them (holder, version, roles, last seen, partitions led)', {
          description: 'From SQL, so any instance answers the same. Every instance upserts its row every INSTANCE_HEARTBEAT_MS and deletes it ' +
            'when it stops; `live` = seen within INSTANCE_LIVE_WINDOW_MS (database time). In `every-instance` timer mode the live ones with ' +
            'the timer role divide the partitions: each takes at most ceil(P ÷ live).',
          responses: { 200: { description: 'The instances, by holder id', content: jsonContent('InstanceList') }, ...problems() },
        }),
      },
      '/healthz': {
        get: op('healthz', 'anonymous', 'HTTP up, and the release this instance runs (no database round trip)', {
          responses: { 200: { description: '`ok version=…` (JSON with Accept: application/json)',
            content: { 'text/plain': { schema: { type: 'string' } }, ...jsonContent('Health') } } },
        }),
      },
      '/readyz': {
        get: op('readyz', 'anonymous', "This instance's role; 200 for leader and follower", {
          responses: {
            200: { description: '`mode=leader holder_id=… lease_epoch=… lease_expires_at=…` (JSON with Accept: application/json)',
              content: { 'text/plain': { schema: { type: 'string' } }, ...jsonContent('Ready') } },
            ...problems(),
          },
        }),
      },
      '/metrics': {
        get: op('metrics', 'function', 'Prometheus text exposition of this instance (every series labelled holder_id)', {
          responses: { 200: text('Prometheus text format 0.0.4'), ...problems() },
        }),
      },
      '/openapi.json': {
        get: op('openapi', 'anonymous', 'This document', { responses: { 200: { description: 'OpenAPI 3.1', content: { 'application/json': { schema: { type: 'object' } } } } } }),
      },
      '/ops/lease/release': {
        post: op('releaseLease', 'admin', 'Request a leader drain (handover), from any instance', {
          description: 'Recorded in SQL and answered at once (202), on any instance: HTTP instances need not be the leader (on Flex they never are). ' +
            'The leader sees the request within one schedule refresh: it starts nothing more, finishes and fences what is in flight, marks the ' +
            'request completed and releases the lease; any instance may acquire at its next tick, the same one included. ' +
            'While a request is pending, another POST returns it instead of adding one. Without ?partition=: one request per partition of the ' +
            'recorded layout (SQL), whatever this instance runs. A request for a partition that a shrink removed stays pending (listed) until ' +
            'that partition exists again; its first leader then completes it at once, having started nothing.',
          parameters: [partitionParam],
          requestBody: { required: false, content: jsonContent('ExecutionChangeRequest') },
          responses: { 202: { description: 'The recorded (or already pending) request', content: jsonContent('HandoverRequest') }, ...problems(400, 413, 415) },
        }),
        get: op('getHandovers', 'admin', 'Handover requests: the pending one and the newest completed', {
          parameters: [{ name: 'limit', in: 'query', required: false, schema: { type: 'integer', minimum: 1, maximum: 100, default: 20 } }, partitionParam],
          responses: { 200: { description: 'Requests, newest first', content: jsonContent('HandoverList') }, ...problems(400) },
        }),
      },
      '/ops/execution': {
        get: op('getExecution', 'admin', 'The cluster\'s pause and every partition\'s (?partition=k: that partition\'s)', {
          parameters: [controlPartitionParam('get')],
          responses: { 200: { description: 'Control row', content: jsonContent('ExecutionControl') }, ...problems() },
        }),
      },
      ...Object.fromEntries((['pause', 'resume'] as const).map((k) => [`/ops/execution/${k}`, {
        post: op(`${k}Execution`, 'admin', k === 'pause' ? 'Pause execution: the cluster, or ?partition=k' : 'Resume execution: the cluster, or ?partition=k', {
          description: 'Recorded in SQL, on any instance. Without ?partition=: the cluster\'s flag, which every partition\'s leader reads with its ' +
            'own at each schedule refresh: a paused cluster sends nothing from one refresh interval after the answer until it is resumed ' +
            '(calls already sent may finish), whatever the layout does meanwhile. With ?partition=k: partition k\'s own flag, which holds the ' +
            'intents in partition k under the current layout (a count change moves intents, the pause does not follow them). The two flags ' +
            'are independent: resuming the cluster leaves a partition\'s pause set.' + (k === 'resume'
            ? ' A cluster resume that leaves a partition of the recorded layout held by its own flag (a pause recorded by an earlier release ' +
              'is partition 0\'s own flag, or every partition\'s) answers 409 execution-still-held, listing them in stillHeld: the cluster\'s ' +
              'flag is cleared all the same (a retry answers the same). ?partition=all resumes everything: every partition\'s own flag, beyond ' +
              'the recorded count too, then the cluster\'s. ?partition=k also clears the row of a partition a shrink removed.'
            : ' A pause names a partition of the recorded layout (400 otherwise); pausing everything is the cluster\'s pause.'),
          parameters: [controlPartitionParam(k)],
          requestBody: { required: false, content: jsonContent('ExecutionChangeRequest') },
          responses: { 200: { description: 'The control row after the change', content: jsonContent('ExecutionControl') },
            ...(k === 'resume' ? { 409: { description: 'execution-still-held: the cluster\'s flag is cleared, but partitions of the recorded layout are ' +
              'still paused by their own flag (stillHeld; execution: the cluster\'s control as after the change)', content: { 'application/problem+json': { schema: ref('Problem') } } } } : {}),
            ...problems(400, 413, 415) },
        }),
      }])),
      '/ops/partitions': {
        post: op('postPartitions', 'admin', 'Change the partition count (a drained, fenced step), from any instance', {
          description: 'Recorded in SQL and answered at once, on any instance; partition 0\'s changer executes it: every partition\'s leader ' +
            'drains and releases, the changer takes every lease 0..max(from, to)−1, recovers what was in flight, switches the count (new ' +
            'intents get the new partitions), moves the existing intents in batches and releases every lease. Execution pauses for the drain ' +
            'and the reassignment. Grow: deploy with EXECUTOR_PARTITIONS ≥ count first; shrink: request first, then deploy. 409 when count is ' +
            'above this instance\'s EXECUTOR_PARTITIONS, when LEASE_NAME has no room for its partitions\' names, when another change is active, ' +
            'or when a live instance runs a release older than the one count changes need (`olderInstances` names them, `minimumVersion` says which).',
          requestBody: { required: true, content: jsonContent('PartitionCountRequest') },
          responses: {
            202: { description: 'The change recorded, or the active change to the same count (a retry is harmless)', content: jsonContent('PartitionChangeRequested') },
            200: { description: 'The count already is the one asked for and no change is active: nothing recorded', content: jsonContent('PartitionCountUnchanged') },
            ...problems(400, 409, 413, 415),
          },
        }),
        get: op('getPartitions', 'admin', 'The recorded partition count, the change in progress, recent changes and the partition leases', {
          responses: { 200: { description: 'The layout', content: jsonContent('PartitionLayout') }, ...problems() },
        }),
      },
      '/ops/partitions/{changeId}': {
        get: op('getPartitionChange', 'admin', 'One partition count change and its progress', {
          parameters: [{ name: 'changeId', in: 'path', required: true, schema: { type: 'string' }, description: 'Change id' }],
          responses: { 200: { description: 'The change', content: jsonContent('PartitionChange') }, ...problems(404) },
        }),
      },
      '/ops/partitions/{changeId}/cancel': {
        post: op('cancelPartitionChange', 'admin', 'Cancel a partition count change before its switch, from any instance', {
          description: 'The way out of a change that does not progress (see `stuck` and `lastStepError`): before its switch (state preparing ' +
            'or pending) the change ends as cancelled, the count stays fromCount, the partition leases a changer holds are released and the ' +
            'leaders resume. A changer mid-step finds it ended and writes nothing. Idempotent (a retry answers alreadyCancelled). After the ' +
            'switch the intents live under the new count: 409 partition-change-switched, the change rolls forward. Optional body {"reason"}.',
          parameters: [{ name: 'changeId', in: 'path', required: true, schema: { type: 'string' }, description: 'Change id' }],
          requestBody: { required: false, content: jsonContent('ExecutionChangeRequest') },
          responses: { 200: { description: 'Cancelled (or cancelled before)', content: jsonContent('PartitionChangeCancelled') },
            ...problems(400, 404, 409, 413, 415) },
        }),
      },
      '/dashboard': {
        get: op('dashboard', 'admin', 'The operator dashboard (HTML); its JSON views with ?data=overview|search|intent', {
          description: 'Open it in a browser as /api/dashboard?code=<key> (or behind App Service Authentication). Reads SQL only: any instance serves it. ' +
            'JSON views (used by the page): `data=overview`; `data=search` with intentId, key, status, from, to (ISO instants, created_at), before, limit (≤ 100); ' +
            '`data=intent&id=…` (payload redacted to its size unless `payload=1`).',
          parameters: [
            { name: 'data', in: 'query', required: false, schema: { enum: ['overview', 'search', 'intent'] }, description: 'Absent: the HTML page' },
            { name: 'code', in: 'query', required: false, schema: { type: 'string' }, description: 'The key (passed on by the page to its API calls)' },
          ],
          responses: {
            200: { description: 'The page, or a JSON view', content: { 'text/html': { schema: { type: 'string' } }, 'application/json': { schema: { type: 'object' } } } },
            ...problems(400, 404),
          },
        }),
      },
      '/ops/intents/redrive': {
        post: op('redriveIntents', 'admin', 'Redrive failed intents: back to scheduled with a fresh attempt budget', {
          description: 'Explicit `ids` or a `filter` (failed between failedFrom and failedTo, last error containing a text), at most `limit` ' +
            'per call, oldest failure first. Idempotent: intents that are not failed are left alone. Attempt numbers continue; ' +
            'the attempt log is never rewritten. Every call is recorded (who, when, selector, how many).',
          requestBody: { required: true, content: jsonContent('RedriveRequest') },
          responses: { 200: { description: 'What was redriven', content: jsonContent('RedriveResult') }, ...problems(400, 413, 415) },
        }),
      },
    },
    components: {
      schemas: components(),
      securitySchemes: {
        functionKey: { type: 'apiKey', in: 'header', name: 'x-functions-key', description: 'Function key (admin routes: the host master key)' },
        functionKeyQuery: { type: 'apiKey', in: 'query', name: 'code' },
      },
    },
  };
}

/** docs/openapi.json as `npm run openapi` writes it (stable: two-space JSON and a final newline). */
export function renderOpenApiFile(): string {
  return `${JSON.stringify(buildOpenApiDocument(), null, 2)}\n`;
}

let openApiJson: string | null = null;

/** GET /api/openapi.json. No database: served even while the app cannot start. */
export async function openApiHandler(): Promise<ApiResponse> {
  openApiJson ??= JSON.stringify(buildOpenApiDocument());
  return { status: 200, headers: { 'content-type': 'application/json', 'cache-control': 'public, max-age=300' }, body: openApiJson };
}
