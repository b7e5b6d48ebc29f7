// SQL Server InstanceStore: the instance heartbeat rows, every time SYSUTCDATETIME() read once per batch. The upsert
// is an UPDATE, then an INSERT when no row was there, in one transaction under UPDLOCK+SERIALIZABLE on the key (as
// the lease acquire does): a concurrent first beat of the same holder waits, then updates (never a duplicate key).
// Results are selected after COMMIT, so no lock is held while the client reads.
import { instanceColumns, toInstance, INSTANCE_HOLDER_MAX_LENGTH, INSTANCE_PARTITIONS_MAX_LENGTH, INSTANCE_ROLES_MAX_LENGTH,
  INSTANCE_VERSION_MAX_LENGTH, type InstanceBeat, type InstanceDbRow, type InstanceRow, type InstanceStore } from '../instancePorts.js';
import type { MssqlRunner } from './db.js';
import { BATCH_START, p, type SqlQuery } from './params.js';

const COLS = 'holder_id, version, roles, started_at, last_seen_at, partitions_led';
const holderParam = (holderId: string) => p.varchar('holder_id', INSTANCE_HOLDER_MAX_LENGTH, holderId);
const msParam = (name: string, ms: number) => p.bigint(name, Math.max(0, Math.floor(ms)));

export const instanceQueries = {
  heartbeat(beat: InstanceBeat): SqlQuery {
    const c = instanceColumns(beat);
    return {
      text: `
${BATCH_START}
BEGIN TRANSACTION;
UPDATE submission_manager_instances WITH (UPDLOCK, SERIALIZABLE)
   SET version = @version, roles = @roles, last_seen_at = @now, partitions_led = @partitions_led
 WHERE holder_id = @holder_id;
IF @@ROWCOUNT = 0
  INSERT INTO submission_manager_instances (${COLS})
  VALUES (@holder_id, @version, @roles, @now, @now, @partitions_led);
COMMIT TRANSACTION;
SELECT ${COLS} FROM submission_manager_instances WHERE holder_id = @holder_id;`,
      params: [holderParam(c.holder), p.varchar('version', INSTANCE_VERSION_MAX_LENGTH, c.version),
        p.varchar('roles', INSTANCE_ROLES_MAX_LENGTH, c.roles), p.varchar('partitions_led', INSTANCE_PARTITIONS_MAX_LENGTH, c.partitions)],
    };
  },
  /** Always at least one row (database now), joined with the live rows. */
  listLive(withinMs: number): SqlQuery {
    return {
      text: `
DECLARE @now datetime2(7) = SYSUTCDATETIME();
SELECT i.holder_id, i.version, i.roles, i.started_at, i.last_seen_at, i.partitions_led, @now AS db_now
  FROM (SELECT 1 AS one) AS n
  LEFT JOIN submission_manager_instances AS i ON i.last_seen_at >= DATEADD(millisecond, -@within_ms, @now)
 ORDER BY i.holder_id;`,
      params: [p.int('within_ms', Math.min(2_147_483_647, Math.max(0, Math.floor(withinMs))))],
    };
  },
  remove(holderId: string): SqlQuery {
    return { text: 'DELETE FROM submission_manager_instances OUTPUT deleted.holder_id WHERE holder_id = @holder_id;', params: [holderParam(holderId)] };
  },
  /** DATEADD takes an int: milliseconds beyond 24 days are counted in seconds. */
  prune(olderThanMs: number): SqlQuery {
    return {
      text: `
SET NOCOUNT ON;
DECLARE @n int;
DELETE FROM submission_manager_instances
 WHERE last_seen_at < DATEADD(millisecond, -(@older_than_ms % 1000), DATEADD(second, -CAST(@older_than_ms / 1000 AS int), SYSUTCDATETIME()));
SET @n = @@ROWCOUNT;
SELECT @n AS n;`,
      params: [msParam('older_than_ms', olderThanMs)],
    };
  },
};

export class MssqlInstanceStore implements InstanceStore {
  constructor(private readonly db: MssqlRunner) {}

  async heartbeat(beat: InstanceBeat): Promise<InstanceRow> {
    const sets = await this.db.run<InstanceDbRow>(instanceQueries.heartbeat(beat));
    const row = sets[sets.length - 1]?.[0];
    if (!row) throw new Error('submission_manager_instances: no row after the upsert');
    return toInstance(row);
  }

  async listLive(withinMs: number): Promise<{ instances: InstanceRow[]; dbNow: Date }> {
    const [rows = []] = await this.db.run<InstanceDbRow & { db_now: Date }>(instanceQueries.listLive(withinMs));
    return { instances: rows.filter((r) => r.holder_id !== null).map(toInstance), dbNow: rows[0]!.db_now };
  }

  async remove(holderId: string): Promise<boolean> {
    const [rows = []] = await this.db.run(instanceQueries.remove(holderId));
    return rows.length > 0;
  }

  async prune(olderThanMs: number): Promise<number> {
    const sets = await this.db.run<{ n: number }>(instanceQueries.prune(olderThanMs));
    return Number(sets[sets.length - 1]?.[0]?.n ?? 0);
  }
}
