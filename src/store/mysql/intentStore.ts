// MySQL / MariaDB IntentStore: client-side writes on any instance. Every insert/update sets last_modified_at
// to database time (strictly after the previous value) in the same statement, so the leader's refresh sees it.
// A conditional change reads the row FOR UPDATE first and decides from it (never from affectedRows).
import type { AttemptRow, IntentRow, IntentStatus, IntentStore, MutationOutcome, NewIntent } from '../intentPorts.js';
import { isStoreError } from '../ports.js';
import { dbTime, type MyDatabase, type MyQueryable } from './db.js';
import { ATTEMPT_COLS, INTENT_COLS, NEXT_MODIFIED, NOW, idParam, toAttempt, toIntent, type AttemptDbRow, type IntentDbRow } from './rows.js';

// partition_no: the explicit partition, else partitionHash mod the count recorded when the statement runs (1 if none
// yet), else 0 (issue 26). The count row is read with a shared lock held to the commit: a change's switch (which
// updates the row) waits for inserts in flight, and an insert begun meanwhile waits for the switch and reads the new
// count, so no insert commits with the old count after the switch. Shared locks do not wait for each other.
const INSERT = `INSERT INTO submission_intents (intent_id, idempotency_key, request_hash, contract, status, attempt_count,
  max_attempts, next_attempt_at, created_at, last_modified_at, partition_no, partition_key)
SELECT ?, ?, ?, ?, 'scheduled', 0, ?, COALESCE(CAST(? AS DATETIME(6)), ${NOW}), ${NOW}, ${NOW},
  COALESCE(?, ? MOD COALESCE((SELECT partition_count FROM submission_manager_partition_count WHERE id = 1 LOCK IN SHARE MODE), 1), 0),
  ? FROM DUAL`;

const BY_ID = `SELECT ${INTENT_COLS} FROM submission_intents WHERE intent_id = ?`;

/** A new row's read-back: every column but the contract, which the caller holds (the stored text is its JSON). */
const CREATED = `SELECT ${INTENT_COLS.replace(/\bcontract,\s*/, '')} FROM submission_intents WHERE intent_id = ?`;

/** The row, locked, with whether `allowed` (an SQL predicate on it) holds. */
async function lockIntent(tx: MyQueryable, intentId: string, allowed: string): Promise<(IntentDbRow & { allowed: number }) | null> {
  const r = await tx.query<IntentDbRow & { allowed: number }>(`SELECT ${INTENT_COLS}, (${allowed}) AS allowed
    FROM submission_intents WHERE intent_id = ? FOR UPDATE`, [intentId]);
  return r.rows[0] ?? null;
}

export class MysqlIntentStore implements IntentStore {
  constructor(private readonly db: MyDatabase) {}

  /** One round trip for a new intent: the INSERT and the primary-key read-back of what the database decided (its clock;
   *  MySQL has no INSERT … RETURNING) as one batch, outside any transaction. The INSERT commits as it completes, so
   *  the read-back (a consistent read begun after it) sees the row. A taken key stops the batch at the INSERT (the
   *  read-back never runs): the stored intent is read by its key, a second round trip. A reply lost after the
   *  INSERT committed fails the call; the client's retry with the key finds the row and replays it. */
  async insert(n: NewIntent): Promise<{ kind: 'created' | 'existing'; intent: IntentRow }> {
    const id = idParam(n.intentId);
    let inserted: Omit<IntentDbRow, 'contract'> | undefined;
    try {
      const [, read] = await this.db.batch([
        { text: INSERT, params: [id, n.idempotencyKey, n.requestHash, JSON.stringify(n.contract), n.maxAttempts,
          n.notBefore ? dbTime(n.notBefore) : null, n.partition ?? null, n.partitionHash ?? null, n.partitionKey ?? null], waits: true },
        { text: CREATED, params: [id] },
      ]);
      inserted = read!.rows[0] as Omit<IntentDbRow, 'contract'> | undefined;
    } catch (e) {
      // The key is taken (the INSERT waited for the other writer's commit): return the stored intent.
      if (!(isStoreError(e) && e.kind === 'conflict' && n.idempotencyKey !== null)) throw e;
      const existing = await this.db.query<IntentDbRow>(`SELECT ${INTENT_COLS} FROM submission_intents WHERE idempotency_key = ?`, [n.idempotencyKey]);
      if (!existing.rows[0]) throw e; // the duplicate was the intent id, not the key
      return { kind: 'existing', intent: toIntent(existing.rows[0]) };
    }
    if (!inserted) throw new Error(`intent ${id} inserted but not found`);
    return { kind: 'created', intent: toIntent({ ...inserted, contract: n.contract }) };
  }

  async get(intentId: string): Promise<IntentRow | null> {
    const r = await this.db.query<IntentDbRow>(BY_ID, [idParam(intentId)]);
    return r.rows[0] ? toIntent(r.rows[0]) : null;
  }

  /** A status given: its own statement, one range of ix_intents_status_id (status, intent_id) from the cursor, forced
   *  (with every column selected MariaDB prefers the ordered walk of the primary key, which passes every row of another
   *  status before the page), so the page reads its own rows whatever the table holds. */
  async list(q: { status?: IntentStatus; limit: number; after?: string }): Promise<IntentRow[]> {
    const after = q.after ? idParam(q.after) : null;
    const r = !q.status
      ? await this.db.query<IntentDbRow>(
        `SELECT ${INTENT_COLS} FROM submission_intents WHERE (? IS NULL OR intent_id > ?)
          ORDER BY intent_id LIMIT ?`, [after, after, q.limit])
      : await this.db.query<IntentDbRow>(
        `SELECT ${INTENT_COLS} FROM submission_intents FORCE INDEX (ix_intents_status_id)
          WHERE status = ? AND (? IS NULL OR intent_id > ?) ORDER BY intent_id LIMIT ?`,
        [q.status, after, after, q.limit]);
    return r.rows.map(toIntent);
  }

  async listAttempts(intentId: string): Promise<AttemptRow[]> {
    const r = await this.db.query<AttemptDbRow>(
      `SELECT ${ATTEMPT_COLS} FROM submission_attempts WHERE intent_id = ? ORDER BY attempt_no`, [idParam(intentId)]);
    return r.rows.map(toAttempt);
  }

  cancel(intentId: string): Promise<MutationOutcome> {
    return this.mutate(intentId, "status IN ('scheduled', 'in_flight')",
      `UPDATE submission_intents SET status = 'cancelled', last_modified_at = ${NEXT_MODIFIED()} WHERE intent_id = ?`, []);
  }

  reschedule(intentId: string, notBefore: Date): Promise<MutationOutcome> {
    return this.mutate(intentId, "status = 'scheduled'",
      `UPDATE submission_intents SET next_attempt_at = CAST(? AS DATETIME(6)), last_modified_at = ${NEXT_MODIFIED()} WHERE intent_id = ?`,
      [dbTime(notBefore)]);
  }

  /** One transaction: lock the row, decide from it, update it, read it back. */
  private mutate(intentId: string, allowed: string, update: string, params: unknown[]): Promise<MutationOutcome> {
    const id = idParam(intentId);
    return this.db.transaction(async (tx): Promise<MutationOutcome> => {
      const cur = await lockIntent(tx, id, allowed);
      if (!cur) return { kind: 'notFound' };
      if (Number(cur.allowed) !== 1) return { kind: 'conflict', intent: toIntent(cur) };
      await tx.query(update, [...params, id]);
      return { kind: 'ok', intent: toIntent((await tx.query<IntentDbRow>(BY_ID, [id])).rows[0]!) };
    });
  }
}
