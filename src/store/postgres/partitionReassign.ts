// PostgreSQL: the intents' side of a partition change (port: ../partitionPorts.ts): the reassignment's reads and the
// preparing pass's batch. Each costs what its rows cost, never what the table holds (tables keep tens of millions of
// finished intents):
// - the open intents after a cursor, LIMIT rows of each kind in id order: the scheduled ones from each partition's
//   range of ix_intents_partition_scheduled (partition_no, intent_id) WHERE status = 'scheduled', the failed ones from
//   ix_intents_failed (m015), the in-flight ones from ix_intents_status_partition_due (the calls out; none after the
//   switch, which recovers them), merged;
// - the rows modified since a time: each partition's range of ix_intents_partition_modified (partition_no,
//   last_modified_at, intent_id) from that time (PARTITIONS_CTE finds the partitions, one probe each), sorted;
// - the preparing pass's key range: the next `limit` ids of the primary key (index entries only), then set-based
//   UPDATEs inside that range, the partition computed by the rule in SQL (PARTITION_RULE), no row sent either way.
import type { PartitionChange, PrepareBatch, ReassignRow, ReassignScope } from '../partitionPorts.js';
import { LEFT_TO_SCAN_SQL, PARTITION_CHANGE_COLS, PREPARABLE_SQL, toPartitionChange, type PartitionChangeDbRow } from '../partitionMapping.js';
import type { PgQueryable } from './db.js';
import { NIL_UUID, PARTITIONS_CTE, nextModified } from './rows.js';

/** The partition rule of src/intents/partition.ts in SQL (docs/operations.md): the first 4 bytes of SHA-256 of the
 *  UTF-8 key (partition_key, else the id as lower-case text), unsigned big-endian, mod `count`. Pinned against the
 *  TypeScript rule by the contract tests (keys of every width of UTF-8). */
export const PARTITION_RULE = (alias: string, count: string) =>
  `(('x' || left(encode(sha256(convert_to(COALESCE(${alias}.partition_key, ${alias}.intent_id::text), 'UTF8')), 'hex'), 8))::bit(32)::bigint % ${count})::smallint`;

const COLS = 'intent_id, partition_key, partition_no';

// $1 after, $2 limit; needs PARTITIONS_CTE. Each partial index's predicate is its branch's own, so the planner reads
// each in id order and stops at LIMIT.
const UNSETTLED = `SELECT ${COLS} FROM (
  (SELECT o.intent_id, o.partition_key, o.partition_no FROM parts CROSS JOIN LATERAL (SELECT ${COLS} FROM submission_intents
     WHERE status = 'scheduled' AND partition_no = parts.p AND intent_id > $1::uuid ORDER BY intent_id LIMIT $2) AS o WHERE parts.p IS NOT NULL)
  UNION ALL (SELECT ${COLS} FROM submission_intents WHERE status = 'failed' AND intent_id > $1::uuid ORDER BY intent_id LIMIT $2)
  UNION ALL (SELECT ${COLS} FROM submission_intents WHERE status = 'in_flight' AND intent_id > $1::uuid)
) AS u ORDER BY intent_id LIMIT $2`;
// $1 after, $2 limit, $3 modifiedSince: each partition's range from $3 (LATERAL: one index range per partition),
// every row there after $1, sorted. The recent rows only (as many as were written since $3).
const MODIFIED = `SELECT m.intent_id, m.partition_key, m.partition_no FROM parts
  CROSS JOIN LATERAL (SELECT ${COLS} FROM submission_intents
    WHERE partition_no = parts.p AND last_modified_at >= $3 AND intent_id > $1::uuid) AS m
  WHERE parts.p IS NOT NULL ORDER BY m.intent_id LIMIT $2`;

const READS: Record<ReassignScope, { plain: string; since: string }> = {
  open: {
    plain: `WITH RECURSIVE ${PARTITIONS_CTE} ${UNSETTLED}`,
    since: `WITH RECURSIVE ${PARTITIONS_CTE} (${UNSETTLED}) UNION (${MODIFIED}) ORDER BY intent_id LIMIT $2`,
  },
  all: {
    // Without modifiedSince (tests and tools only; the changer always names it): the primary key from the cursor.
    plain: `SELECT ${COLS} FROM submission_intents WHERE intent_id > $1::uuid ORDER BY intent_id LIMIT $2`,
    since: `WITH RECURSIVE ${PARTITIONS_CTE} ${MODIFIED}`,
  },
};

interface ReassignDbRow { intent_id: string; partition_key: string | null; partition_no: number | string }

export async function listForReassign(db: PgQueryable, q: { after: string | null; limit: number; modifiedSince: Date | null; scope: ReassignScope }):
Promise<ReassignRow[]> {
  const since = q.modifiedSince !== null;
  const params: unknown[] = [q.after ?? NIL_UUID, q.limit, ...(since ? [q.modifiedSince] : [])];
  const r = await db.query<ReassignDbRow>(READS[q.scope][since ? 'since' : 'plain'], params);
  return r.rows.map((x) => ({ intentId: x.intent_id, partitionKey: x.partition_key, partition: Number(x.partition_no) }));
}

// The preparing pass's key range: the id `limit` entries after the cursor ($1; $2 = limit), none when fewer remain.
const EDGE = 'SELECT intent_id::text AS hi FROM submission_intents WHERE intent_id > $1::uuid ORDER BY intent_id OFFSET $2 - 1 LIMIT 1';

// The batch in (the cursor $2, the edge $3], one statement, one snapshot: the settled rows modified before the horizon
// ($6) with no attempt started move to the rule's partition under to_count ($5) where it differs; those whose call is
// still out get last_modified_at bumped (for the scan) instead. Both tests read the attempts in the same snapshot, so
// each row meets exactly one; a settled row modified before the horizon changes only by a purge (a deleted row is
// skipped). The cursor only moves forward; a range that reached the last id ($4) ends the pass: pending, or, for a
// change cancelled after rows moved (its pass moving them back under to_count := from_count), cancelled (completed).
// rows_moved, prepare_cursor and prepared_at are written with their release_ copies, the same value each (m020's
// guard: an earlier release's batch, writing them alone, is refused).
const inRange = (alias: string) => `${alias}.intent_id > $2::uuid AND ${alias}.intent_id <= $3::uuid AND ${alias}.last_modified_at < $6`;
const PREPARE = `/* sm:partition_prepare */
WITH now AS MATERIALIZED (SELECT clock_timestamp() AS t),
moved AS (
  UPDATE submission_intents i SET partition_no = ${PARTITION_RULE('i', '$5::int')}
   WHERE ${inRange('i')} AND ${PREPARABLE_SQL('i')} AND i.partition_no <> ${PARTITION_RULE('i', '$5::int')}
  RETURNING 1
),
left_to_scan AS (
  UPDATE submission_intents i SET last_modified_at = ${nextModified('i.last_modified_at')}
   WHERE ${inRange('i')} AND ${LEFT_TO_SCAN_SQL('i')}
  RETURNING 1
)
UPDATE submission_manager_partition_changes
   SET rows_moved = rows_moved + (SELECT count(*) FROM moved),
       release_rows_moved = release_rows_moved + (SELECT count(*) FROM moved),
       prepare_cursor = CASE WHEN $4::boolean THEN prepare_cursor ELSE GREATEST(prepare_cursor, $3::uuid) END,
       release_prepare_cursor = CASE WHEN $4::boolean THEN release_prepare_cursor ELSE GREATEST(release_prepare_cursor, $3::uuid) END,
       state = CASE WHEN NOT $4::boolean THEN state WHEN cancelled_at IS NULL THEN 'pending' ELSE 'completed' END,
       prepared_at = CASE WHEN $4::boolean THEN now.t ELSE prepared_at END,
       release_prepared_at = CASE WHEN $4::boolean THEN now.t ELSE release_prepared_at END,
       completed_at = CASE WHEN $4::boolean AND cancelled_at IS NOT NULL THEN now.t ELSE completed_at END
  FROM now
 WHERE change_id = $1
RETURNING ${PARTITION_CHANGE_COLS}`;

const LAST_UUID = 'ffffffff-ffff-ffff-ffff-ffffffffffff';

/** One batch of the preparing pass, in `tx` after the change row `c` (state preparing) was locked FOR UPDATE. */
export async function prepareBatch(tx: PgQueryable, c: PartitionChange, batch: PrepareBatch): Promise<PartitionChange> {
  if (!Number.isInteger(batch.limit) || batch.limit < 1) throw new RangeError(`prepareBatch: limit ${batch.limit} is not a positive integer`);
  const from = c.prepareCursor ?? NIL_UUID;
  const hi = (await tx.query<{ hi: string }>(EDGE, [from, batch.limit])).rows[0]?.hi ?? null;
  const r = await tx.query<PartitionChangeDbRow>(PREPARE, [c.changeId, from, hi ?? LAST_UUID, hi === null, c.toCount, batch.horizon]);
  return toPartitionChange(r.rows[0]!);
}
