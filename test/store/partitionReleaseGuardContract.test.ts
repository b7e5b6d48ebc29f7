// The release guards on partition changes (claim and switch: PostgreSQL m018, MySQL/MariaDB m012, SQL Server m018;
// preparing: m020, m014, m020), run against every dialect: the previous release's own claim, switch and preparing
// statements (their text as test/support/previousRelease.json's commit, 0.2.0, issues them; only SQL Server's
// parameter names differ) are refused on a change this release requested — the statement fails naming the constraint, its
// transaction writes nothing, the count, the change row and every intent stay — before, during and after this
// release's preparing pass (its move back on a cancel included) and claim, while this release's pass, claim and
// switch go through. A change the previous release requested (its own INSERT, requested_release NULL) it still
// prepares, claims and switches as before: the migrations are additive.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectStores } from '../support/dialectFixture.js';
import { changeArrangement, CHANGER, ok } from '../support/partitionChanges.js';
import { oldPrepare, OLD_COLS, type OldBatch } from '../support/previousReleasePrepare.js';
import type { Stores } from '../../src/store/stores.js';
import type { PartitionChange } from '../../src/store/partitionPorts.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { partitionOf } from '../../src/intents/partition.js';

const OLD_CHANGER = 'old1~partition-change';
const GUARD = /ck_partition_changes_release_guard/;
const PREPARE_GUARD = /ck_partition_changes_prepare_guard/;
/** Before every intent's last change: a batch with this horizon moves nothing. */
const PAST = new Date(Date.now() - 7 * 86_400_000);
/** Keys whose partition differs under 2 and 4 partitions: each of them moves. */
const MOVING = Array.from({ length: 100 }, (_, i) => `key-${i}`).filter((k) => partitionOf(k, 2) !== partitionOf(k, 4)).slice(0, 4);

/** The previous release's statements, per dialect ($n placeholders: each harness binds them its way). */
interface OldStatements {
  /** (change_id, changer) */
  claim: string;
  /** (change_id, to_count, recorded_by): the statement that sets the change's state to 'reassigning'. */
  switchCount: string;
  /** (change_id, from_count, to_count, requested_by) */
  request: string;
  params: { claim: (id: string, by: string) => unknown[]; switchCount: (id: string, to: number, by: string) => unknown[];
    request: (id: string, from: number, to: number, by: string) => unknown[] };
}

const pgParams: OldStatements['params'] = {
  claim: (id, by) => [id, by], switchCount: (id, to, by) => [id, to, by], request: (id, from, to, by) => [id, from, to, by],
};
const PG: OldStatements = {
  claim: `UPDATE submission_manager_partition_changes SET changer = $2, claimed_at = clock_timestamp()
  WHERE change_id = $1 AND state <> 'completed' RETURNING ${OLD_COLS}`,
  switchCount: `/* sm:partition_switch */
WITH now AS MATERIALIZED (SELECT clock_timestamp() AS t),
recorded AS (
  INSERT INTO submission_manager_partition_count (id, partition_count, recorded_at, recorded_by, layout_generation)
  SELECT 1, $2, now.t, $3, 1 FROM now
  ON CONFLICT (id) DO UPDATE SET partition_count = EXCLUDED.partition_count, recorded_at = EXCLUDED.recorded_at,
    recorded_by = EXCLUDED.recorded_by, layout_generation = submission_manager_partition_count.layout_generation + 1
)
UPDATE submission_manager_partition_changes SET state = 'reassigning', switched_at = now.t
  FROM now WHERE change_id = $1 RETURNING ${OLD_COLS}`,
  request: `INSERT INTO submission_manager_partition_changes (change_id, from_count, to_count, state, requested_at, requested_by)
VALUES ($1, $2, $3, 'preparing', clock_timestamp(), $4)
RETURNING ${OLD_COLS}`,
  params: pgParams,
};
const MYSQL: OldStatements = {
  claim: 'UPDATE submission_manager_partition_changes SET changer = ?, claimed_at = UTC_TIMESTAMP(6) WHERE change_id = ?',
  switchCount: `UPDATE submission_manager_partition_changes SET state = 'reassigning', switched_at = UTC_TIMESTAMP(6) WHERE change_id = ?`,
  request: `INSERT INTO submission_manager_partition_changes (change_id, from_count, to_count, state, requested_at, requested_by)
VALUES (?, ?, ?, 'preparing', UTC_TIMESTAMP(6), ?)`,
  params: { claim: (id, by) => [by, id], switchCount: (id) => [id], request: (id, from, to, by) => [id, from, to, by] },
};
const MSSQL: OldStatements = {
  claim: `UPDATE submission_manager_partition_changes SET changer = $2, claimed_at = SYSUTCDATETIME()
 WHERE change_id = $1 AND state <> 'completed'`,
  switchCount: `UPDATE submission_manager_partition_changes SET state = 'reassigning', switched_at = SYSUTCDATETIME() WHERE change_id = $1 AND state = 'pending'`,
  request: `INSERT INTO submission_manager_partition_changes (change_id, from_count, to_count, state, requested_at, requested_by, rows_moved)
  VALUES ($1, $2, $3, 'preparing', SYSUTCDATETIME(), $4, 0)`,
  params: { claim: (id, by) => [id, by], switchCount: (id) => [id], request: (id, from, to, by) => [id, from, to, by] },
};
const OLD: Record<string, OldStatements> = { pglite: PG, postgres: PG, mysql: MYSQL, mssql: MSSQL };

describe.each(dialects)('partition change release guard: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  useDialectStores(dialect, (fresh, stores) => {
    ctx = fresh;
    s = stores;
  });
  const { put, takeLeases, request, prepared } = changeArrangement(() => s);
  const old = OLD[dialect.name]!;
  const oldClaim = (id: string) => ctx.sql(old.claim, old.params.claim(id, OLD_CHANGER));
  const oldSwitch = (id: string, to: number) => ctx.sql(old.switchCount, old.params.switchCount(id, to, OLD_CHANGER));
  const oldBatch = (id: string, b: OldBatch) => oldPrepare[dialect.name](ctx, id, b);

  /** Succeeded intents a day old, one per MOVING key (id order), under the recorded count; their ids. */
  const settled = async () => {
    const ids: string[] = [];
    for (const key of MOVING) {
      const intent = await put({ key });
      await ctx.setIntentStatus(intent.intentId, 'succeeded', 86_400_000);
      ids.push(intent.intentId);
    }
    return ids;
  };
  const partitions = async () => (await ctx.intentRows()).map((r) => r.partition);
  /** The previous release's batches of every kind are refused; the change row and every intent stay as they were.
   *  `horizon`: after the settled intents' last change (they move); `PAST` before it (nothing moves). */
  const refusedEveryBatch = async (c: PartitionChange, horizon: Date) => {
    const before = await ctx.intentRows();
    const batches: OldBatch[] = [
      { limit: 2, horizon }, // as its changer sends one: rows moved, the cursor
      { limit: 1, horizon: PAST }, // the cursor alone
      { limit: 1_000, horizon }, // rows moved and the end of the pass
      { limit: 1_000, horizon: PAST }, // the end of the pass alone: pending (cancelled: completed), prepared_at
    ];
    for (const b of batches) {
      await expect(oldBatch(c.changeId, b)).rejects.toThrow(PREPARE_GUARD);
      expect(await s.partitions.getChange(c.changeId)).toEqual(c);
      expect(await ctx.intentRows()).toEqual(before);
    }
  };

  it('a change this release requested: the previous release\'s preparing batches are refused, nothing written; this release\'s pass prepares it, and moves it back on a cancel', async () => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    const ids = await settled();
    const under2 = await partitions();
    const change = await request(4);
    const horizon = (await s.partitions.readLayout()).dbNow;
    await refusedEveryBatch(change, horizon);
    expect(await partitions()).toEqual(under2);

    // This release's pass, a batch at a time; the previous release's batches refused between them.
    const first = (await s.partitions.prepareBatch(change.changeId, { limit: 2, horizon }))!;
    expect(first).toMatchObject({ state: 'preparing', rowsMoved: 2, prepareCursor: ids[1] });
    await refusedEveryBatch(first, horizon);
    let c = first;
    while (c.state === 'preparing') c = (await s.partitions.prepareBatch(change.changeId, { limit: 2, horizon }))!;
    expect(c).toMatchObject({ state: 'pending', rowsMoved: 4, preparedAt: expect.any(Date) });
    expect(await partitions()).toEqual(MOVING.map((k) => partitionOf(k, 4)));

    // Cancelled: back to preparing under to_count := from_count; the move back is this release's alone too.
    const cancelled = await s.partitions.cancelChange(change.changeId, 'ops');
    expect(cancelled).toMatchObject({ kind: 'cancelled', change: { state: 'preparing', toCount: 2, prepareCursor: null, preparedAt: null } });
    c = (cancelled as { change: PartitionChange }).change;
    await refusedEveryBatch(c, horizon);
    while (c.state === 'preparing') c = (await s.partitions.prepareBatch(change.changeId, { limit: 3, horizon }))!;
    expect(c).toMatchObject({ state: 'cancelled', rowsMoved: 8, cancelledAt: expect.any(Date) });
    expect(await partitions()).toEqual(under2);
    expect((await s.partitions.readLayout())).toMatchObject({ count: 2, generation: 0, active: null });
  });

  it('a change this release requested: the previous release\'s claim and switch are refused, nothing written; this release claims and switches it', async () => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    const change = await prepared(4);
    const layoutBefore = await s.partitions.readLayout();

    await expect(oldClaim(change.changeId)).rejects.toThrow(GUARD);
    await expect(oldSwitch(change.changeId, 4)).rejects.toThrow(GUARD);
    expect(await s.partitions.getChange(change.changeId)).toEqual(change);
    expect(await s.partitions.readLayout()).toMatchObject({ count: 2, generation: 0, active: change });

    const fence = await takeLeases(4);
    const claimed = ok(await s.partitions.claimChange([fence[0]!], change.changeId));
    expect(claimed).toMatchObject({ state: 'pending', changer: CHANGER });
    // Claimed by this release: the previous release can neither take it over nor switch it.
    await expect(oldClaim(change.changeId)).rejects.toThrow(GUARD);
    await expect(oldSwitch(change.changeId, 4)).rejects.toThrow(GUARD);
    expect(await s.partitions.getChange(change.changeId)).toEqual(claimed);
    expect((await s.partitions.readLayout()).count).toBe(layoutBefore.count);

    const switched = ok(await s.partitions.switchCount(fence, change.changeId));
    expect(switched).toMatchObject({ state: 'reassigning', changer: CHANGER, switchedAt: expect.any(Date) });
    expect(await s.partitions.readLayout()).toMatchObject({ count: 4, generation: 1 });
    await expect(oldClaim(change.changeId)).rejects.toThrow(GUARD);
    expect(await s.partitions.getChange(change.changeId)).toEqual(switched);
  });

  it('a change the previous release requested: it prepares, claims and switches it as before (the migrations are additive)', async () => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    const id = uuidv7();
    const ids = await settled();
    await ctx.sql(old.request, old.params.request(id, 2, 4, 'old1'));
    // Its preparing batches move the first half and end the pass; this release's pass takes part between them.
    const horizon = (await s.partitions.readLayout()).dbNow;
    await oldBatch(id, { limit: 2, horizon });
    expect(await s.partitions.getChange(id)).toMatchObject({ state: 'preparing', rowsMoved: 2, prepareCursor: ids[1] });
    expect(await s.partitions.prepareBatch(id, { limit: 2, horizon })).toMatchObject({ state: 'preparing', rowsMoved: 4, prepareCursor: ids[3] });
    await oldBatch(id, { limit: 2, horizon });
    expect(await s.partitions.getChange(id)).toMatchObject({ state: 'pending', rowsMoved: 4, preparedAt: expect.any(Date) });
    expect(await partitions()).toEqual(MOVING.map((k) => partitionOf(k, 4)));
    await oldClaim(id);
    expect(await s.partitions.getChange(id)).toMatchObject({ state: 'pending', changer: OLD_CHANGER });
    await oldSwitch(id, 4);
    expect(await s.partitions.getChange(id)).toMatchObject({ state: 'reassigning', changer: OLD_CHANGER, switchedAt: expect.any(Date) });
  });
});
