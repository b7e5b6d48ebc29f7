// The release guard on partition changes (PostgreSQL m018, MySQL/MariaDB m012, SQL Server m018), run against every
// dialect: the previous release's own claim and switch statements (their text as test/support/previousRelease.json's
// commit issues them; only SQL Server's parameter names differ) are refused on a change this release requested —
// the statement fails naming the constraint and writes nothing, the count stays — before and after this release's
// claim, while this release's claim and switch go through. A change the previous release requested (its own INSERT,
// requested_release NULL) it still claims and switches as before: the migration is additive.
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectStores } from '../support/dialectFixture.js';
import { changeArrangement, CHANGER, ok } from '../support/partitionChanges.js';
import type { Stores } from '../../src/store/stores.js';
import { uuidv7 } from '../../src/intents/ids.js';

const OLD_CHANGER = 'old1~partition-change';
const GUARD = /ck_partition_changes_release_guard/;

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

const OLD_COLS = `change_id, from_count, to_count, state, requested_at, requested_by, prepare_cursor,
  prepared_at, changer, claimed_at, switched_at, scan_cursor, scan_done_at, rows_moved, completed_at`;
const pgParams: OldStatements['params'] = {
  claim: (id, by) => [id, by], switchCount: (id, to, by) => [id, to, by], request: (id, from, to, by) => [id, from, to, by],
};
const PG: OldStatements = {
  claim: `UPDATE submission_manager_partition_changes SET changer = $2, claimed_at = clock_timestamp()
  WHERE change_id = $1 AND state <> 'completed' RETURNING ${OLD_COLS}`,
  switchCount: `/* sm:partition_switch */
WITH now AS MATERIALIZED (SELECT clock_timestamp() AS t),
recorded AS (
  INSERT INTO submission_manager_partition_count (id, partition_count, recorded_at, recorded_by)
  SELECT 1, $2, now.t, $3 FROM now
  ON CONFLICT (id) DO UPDATE SET partition_count = EXCLUDED.partition_count, recorded_at = EXCLUDED.recorded_at,
    recorded_by = EXCLUDED.recorded_by
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
  const { takeLeases, prepared } = changeArrangement(() => s);
  const old = OLD[dialect.name]!;
  const oldClaim = (id: string) => ctx.sql(old.claim, old.params.claim(id, OLD_CHANGER));
  const oldSwitch = (id: string, to: number) => ctx.sql(old.switchCount, old.params.switchCount(id, to, OLD_CHANGER));

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

  it('a change the previous release requested: it claims and switches it as before (the migration is additive)', async () => {
    await s.partitions.recordPartitionCount(2, 'host-a');
    const id = uuidv7();
    await ctx.sql(old.request, old.params.request(id, 2, 4, 'old1'));
    let c = (await s.partitions.getChange(id))!;
    while (c.state === 'preparing') c = (await s.partitions.prepareBatch(id, { limit: 1000, horizon: new Date(0) }))!;
    await oldClaim(id);
    expect(await s.partitions.getChange(id)).toMatchObject({ state: 'pending', changer: OLD_CHANGER });
    await oldSwitch(id, 4);
    expect(await s.partitions.getChange(id)).toMatchObject({ state: 'reassigning', changer: OLD_CHANGER, switchedAt: expect.any(Date) });
  });
});
