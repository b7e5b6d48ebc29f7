// SQL Server IntentStore: client-side writes on any instance. Every insert/update sets last_modified_at to
// SYSUTCDATETIME() in the same statement, so the leader's refresh cursor sees it.
import type { AttemptRow, IntentRow, IntentStatus, IntentStore, MutationOutcome, NewIntent } from '../intentPorts.js';
import { NEXT_VERSION } from './executionQueries.js';
import { isStoreError } from '../ports.js';
import type { MssqlRunner } from './db.js';
import { BATCH_START, p, type SqlQuery } from './params.js';
import { PARTITION_KEY_MAX_LENGTH } from '../partitionPorts.js';
import { ATTEMPT_COLS, intentCols, toAttempt, toIntent, type AttemptDbRow, type IntentDbRow } from './rows.js';

export const intentQueries = {
  /**
   * Idempotent insert. The NOT EXISTS probe takes UPDLOCK+SERIALIZABLE on the key's range in the filtered
   * unique index, so a concurrent insert with the same key waits for our commit and then finds our row
   * (like ON CONFLICT DO NOTHING). One result set: `created` + the stored row (ours, or the one holding the key).
   * Partition (issue 26): the explicit one, else partitionHash (bigint) mod the recorded count (1 if none), else 0. The
   * count row is read with a shared lock held to the commit (REPEATABLEREAD; a locking read under RCSI too): a change's
   * switch, which updates the row, waits for inserts in flight, and an insert begun meanwhile reads the new count.
   */
  insert(n: NewIntent): SqlQuery {
    return {
      text: `
${BATCH_START}
DECLARE @created int;
BEGIN TRANSACTION;
INSERT INTO submission_intents (intent_id, idempotency_key, request_hash, contract, status, attempt_count,
  max_attempts, next_attempt_at, created_at, last_modified_at, partition_no, partition_key)
SELECT @intent_id, @idempotency_key, @request_hash, @contract, 'scheduled', 0,
       @max_attempts, COALESCE(@not_before, @now), @now, @now,
       COALESCE(@partition_no,
                @partition_hash % ISNULL((SELECT partition_count FROM submission_manager_partition_count WITH (REPEATABLEREAD) WHERE id = 1), 1),
                0),
       @partition_key
 WHERE @idempotency_key IS NULL
    OR NOT EXISTS (SELECT 1 FROM submission_intents WITH (UPDLOCK, SERIALIZABLE)
                    WHERE idempotency_key = @idempotency_key AND idempotency_key IS NOT NULL);
SET @created = @@ROWCOUNT;
COMMIT TRANSACTION;
IF @created = 1
BEGIN
  SELECT CAST(1 AS bit) AS created, ${intentCols()} FROM submission_intents WHERE intent_id = @intent_id;
END
ELSE
BEGIN
  SELECT CAST(0 AS bit) AS created, ${intentCols()} FROM submission_intents WHERE idempotency_key = @idempotency_key;
END;`,
      params: [
        p.uuid('intent_id', n.intentId),
        p.nvarchar('idempotency_key', 255, n.idempotencyKey),
        p.char('request_hash', 64, n.requestHash),
        p.nvarcharMax('contract', JSON.stringify(n.contract)),
        p.int('max_attempts', n.maxAttempts),
        p.datetime2('not_before', n.notBefore),
        p.int('partition_no', n.partition ?? null),
        p.uint32('partition_hash', n.partitionHash ?? null),
        p.nvarchar('partition_key', 2 * PARTITION_KEY_MAX_LENGTH, n.partitionKey ?? null), // code points → UTF-16 units
      ],
    };
  },

  byKey(idempotencyKey: string): SqlQuery {
    return {
      text: `SELECT ${intentCols()} FROM submission_intents WHERE idempotency_key = @idempotency_key;`,
      params: [p.nvarchar('idempotency_key', 255, idempotencyKey)],
    };
  },

  get(intentId: string): SqlQuery {
    return { text: `SELECT ${intentCols()} FROM submission_intents WHERE intent_id = @intent_id;`, params: [p.uuid('intent_id', intentId)] };
  },

  /** OPTION (RECOMPILE): each call is planned with its values (as PostgreSQL's unnamed statements are), so the page is a
   *  seek from @after and a given status can use the filtered indexes; one cached plan for every combination of the
   *  optional filters would read the primary key from its first row (docs/sqlserver.md, "plan shapes"). */
  list(q: { status?: IntentStatus; limit: number; after?: string }): SqlQuery {
    return {
      text: `SELECT TOP (@limit) ${intentCols()} FROM submission_intents
 WHERE (@status IS NULL OR status = @status) AND (@after IS NULL OR intent_id > @after)
 ORDER BY intent_id OPTION (RECOMPILE);`,
      params: [p.varchar('status', 16, q.status ?? null), p.uuid('after', q.after ?? null), p.int('limit', q.limit)],
    };
  },

  listAttempts(intentId: string): SqlQuery {
    return {
      text: `SELECT ${ATTEMPT_COLS} FROM submission_attempts WHERE intent_id = @intent_id ORDER BY attempt_no;`,
      params: [p.uuid('intent_id', intentId)],
    };
  },

  cancel(intentId: string): SqlQuery {
    return {
      text: `SET NOCOUNT ON;
UPDATE submission_intents SET status = 'cancelled', last_modified_at = ${NEXT_VERSION('last_modified_at', 'SYSUTCDATETIME()')}
OUTPUT ${intentCols('inserted.')}
 WHERE intent_id = @intent_id AND status IN ('scheduled', 'in_flight');`,
      params: [p.uuid('intent_id', intentId)],
    };
  },

  reschedule(intentId: string, notBefore: Date): SqlQuery {
    return {
      text: `SET NOCOUNT ON;
UPDATE submission_intents SET next_attempt_at = @not_before, last_modified_at = ${NEXT_VERSION('last_modified_at', 'SYSUTCDATETIME()')}
OUTPUT ${intentCols('inserted.')}
 WHERE intent_id = @intent_id AND status = 'scheduled';`,
      params: [p.uuid('intent_id', intentId), p.datetime2('not_before', notBefore)],
    };
  },
};

export class MssqlIntentStore implements IntentStore {
  constructor(private readonly db: MssqlRunner) {}

  async insert(n: NewIntent): Promise<{ kind: 'created' | 'existing'; intent: IntentRow }> {
    let sets: (IntentDbRow & { created: boolean })[][];
    try {
      sets = await this.db.run<IntentDbRow & { created: boolean }>(intentQueries.insert(n));
    } catch (e) {
      // Belt and braces: should a duplicate key still slip past the range lock, answer like a replay.
      if (!(isStoreError(e) && e.kind === 'conflict' && n.idempotencyKey !== null)) throw e;
      const [rows = []] = await this.db.run<IntentDbRow>(intentQueries.byKey(n.idempotencyKey));
      if (!rows[0]) throw e;
      return { kind: 'existing', intent: toIntent(rows[0]) };
    }
    const row = sets[sets.length - 1]?.[0];
    if (!row) throw new Error('idempotency key conflict but no row found');
    return { kind: row.created ? 'created' : 'existing', intent: toIntent(row) };
  }

  async get(intentId: string): Promise<IntentRow | null> {
    const [rows = []] = await this.db.run<IntentDbRow>(intentQueries.get(intentId));
    return rows[0] ? toIntent(rows[0]) : null;
  }

  async list(q: { status?: IntentStatus; limit: number; after?: string }): Promise<IntentRow[]> {
    const [rows = []] = await this.db.run<IntentDbRow>(intentQueries.list(q));
    return rows.map(toIntent);
  }

  async listAttempts(intentId: string): Promise<AttemptRow[]> {
    const [rows = []] = await this.db.run<AttemptDbRow>(intentQueries.listAttempts(intentId));
    return rows.map(toAttempt);
  }

  cancel(intentId: string): Promise<MutationOutcome> {
    return this.mutate(intentId, intentQueries.cancel(intentId));
  }

  reschedule(intentId: string, notBefore: Date): Promise<MutationOutcome> {
    return this.mutate(intentId, intentQueries.reschedule(intentId, notBefore));
  }

  /** A conditional update; when it matches nothing, tell "unknown id" from "state forbids it". */
  private async mutate(intentId: string, q: SqlQuery): Promise<MutationOutcome> {
    const [rows = []] = await this.db.run<IntentDbRow>(q);
    if (rows[0]) return { kind: 'ok', intent: toIntent(rows[0]) };
    const current = await this.get(intentId);
    return current ? { kind: 'conflict', intent: current } : { kind: 'notFound' };
  }
}
