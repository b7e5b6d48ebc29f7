// PostgreSQL IntentStore: client-side writes on any instance. Every insert/update sets last_modified_at
// to clock_timestamp() in the same statement, so the leader's refresh cursor sees it.
import type { AttemptRow, IntentRow, IntentStatus, IntentStore, MutationOutcome, NewIntent } from '../intentPorts.js';
import type { PgQueryable } from './db.js';
import { INTENT_COLS, nextModified, toAttempt, toIntent, type AttemptDbRow, type IntentDbRow } from './rows.js';

// Returns only what the database decides (its clock, the partition); the rest of the new row is what we sent. A
// prepared (named) statement: parsed and planned once per connection (PGlite ignores the name).
// The partition (issue 26): the explicit one ($7), else the key's hash ($9) mod the count recorded now (1 if none),
// else 0 — read without a lock on the count row (the hot path): a change's switch locks the table (SHARE), so this
// statement either commits before the switch or reads the count the switch recorded.
const INSERT = {
  name: 'sm_intent_insert_v3',
  text: `
INSERT INTO submission_intents (intent_id, idempotency_key, request_hash, contract, status, attempt_count,
  max_attempts, next_attempt_at, created_at, last_modified_at, partition_no, partition_key)
SELECT $1, $2, $3, $4::jsonb, 'scheduled', 0, $5, COALESCE($6::timestamptz, n.t), n.t, n.t,
  COALESCE($7::int, $9::bigint % COALESCE((SELECT partition_count FROM submission_manager_partition_count WHERE id = 1), 1), 0), $8
  FROM (SELECT clock_timestamp() AS t) n
ON CONFLICT (idempotency_key) DO NOTHING
RETURNING next_attempt_at, created_at, partition_no`,
};

const NEXT_MODIFIED = nextModified('last_modified_at');

export class PgIntentStore implements IntentStore {
  /** `notifyDue`: tells the leader that an intent became due (coalesced NOTIFY after the write; best effort). */
  constructor(private readonly db: PgQueryable, private readonly notifyDue: () => void = () => {}) {}

  async insert(n: NewIntent): Promise<{ kind: 'created' | 'existing'; intent: IntentRow }> {
    const params = [n.intentId, n.idempotencyKey, n.requestHash, JSON.stringify(n.contract), n.maxAttempts,
      n.notBefore ? n.notBefore.toISOString() : null, n.partition ?? null, n.partitionKey ?? null, n.partitionHash ?? null];
    const r = await this.db.query<{ next_attempt_at: Date; created_at: Date; partition_no: number | string }>(INSERT.text, params, INSERT.name);
    const made = r.rows[0];
    if (made) {
      this.notifyDue();
      const createdAt = made.created_at;
      return {
        kind: 'created',
        intent: {
          intentId: n.intentId, idempotencyKey: n.idempotencyKey, requestHash: n.requestHash, contract: n.contract,
          status: 'scheduled', attemptCount: 0, maxAttempts: n.maxAttempts, nextAttemptAt: made.next_attempt_at,
          createdAt, lastModifiedAt: createdAt, lastError: null, lastEpoch: null,
          partition: Number(made.partition_no), partitionKey: n.partitionKey ?? null,
        },
      };
    }
    // The key is taken (ON CONFLICT waited for the other writer's commit): return the stored intent.
    const existing = await this.db.query<IntentDbRow>(
      `SELECT ${INTENT_COLS} FROM submission_intents WHERE idempotency_key = $1`, [n.idempotencyKey]);
    if (!existing.rows[0]) throw new Error('idempotency key conflict but no row found');
    return { kind: 'existing', intent: toIntent(existing.rows[0]) };
  }

  async get(intentId: string): Promise<IntentRow | null> {
    const r = await this.db.query<IntentDbRow>(`SELECT ${INTENT_COLS} FROM submission_intents WHERE intent_id = $1`, [intentId]);
    return r.rows[0] ? toIntent(r.rows[0]) : null;
  }

  /** A status given: its own statement, one range of ix_intents_status_id (status, intent_id) from the cursor, so the
   *  page reads its own rows whatever the table holds of other statuses. */
  async list(q: { status?: IntentStatus; limit: number; after?: string }): Promise<IntentRow[]> {
    const r = !q.status
      ? await this.db.query<IntentDbRow>(
        `SELECT ${INTENT_COLS} FROM submission_intents WHERE ($1::uuid IS NULL OR intent_id > $1::uuid)
          ORDER BY intent_id LIMIT $2`, [q.after ?? null, q.limit])
      : await this.db.query<IntentDbRow>(
        `SELECT ${INTENT_COLS} FROM submission_intents WHERE status = $1 AND ($2::uuid IS NULL OR intent_id > $2::uuid)
          ORDER BY intent_id LIMIT $3`, [q.status, q.after ?? null, q.limit]);
    return r.rows.map(toIntent);
  }

  async listAttempts(intentId: string): Promise<AttemptRow[]> {
    const r = await this.db.query<AttemptDbRow>(
      `SELECT intent_id, attempt_no, lease_epoch, holder_id, started_at, finished_at, outcome, http_status, error, duration_ms
         FROM submission_attempts WHERE intent_id = $1 ORDER BY attempt_no`, [intentId]);
    return r.rows.map(toAttempt);
  }

  cancel(intentId: string): Promise<MutationOutcome> {
    return this.mutate(intentId,
      `UPDATE submission_intents SET status = 'cancelled', last_modified_at = ${NEXT_MODIFIED}
        WHERE intent_id = $1 AND status IN ('scheduled', 'in_flight') RETURNING ${INTENT_COLS}`, []);
  }

  async reschedule(intentId: string, notBefore: Date): Promise<MutationOutcome> {
    const out = await this.mutate(intentId,
      `UPDATE submission_intents SET next_attempt_at = $2, last_modified_at = ${NEXT_MODIFIED}
        WHERE intent_id = $1 AND status = 'scheduled' RETURNING ${INTENT_COLS}`, [notBefore.toISOString()]);
    if (out.kind === 'ok') this.notifyDue();
    return out;
  }

  /** A conditional update; when it matches nothing, tell "unknown id" from "state forbids it". */
  private async mutate(intentId: string, sql: string, extra: unknown[]): Promise<MutationOutcome> {
    const r = await this.db.query<IntentDbRow>(sql, [intentId, ...extra]);
    if (r.rows[0]) return { kind: 'ok', intent: toIntent(r.rows[0]) };
    const current = await this.get(intentId);
    return current ? { kind: 'conflict', intent: current } : { kind: 'notFound' };
  }
}
