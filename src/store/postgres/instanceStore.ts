// PostgreSQL InstanceStore: the instance heartbeat rows. One statement each; every time is clock_timestamp(), read
// once per statement (a CTE) so started_at and last_seen_at of a first beat are the same instant.
import { instanceColumns, toInstance, type InstanceBeat, type InstanceDbRow, type InstanceRow, type InstanceStore } from '../instancePorts.js';
import type { PgQueryable } from './db.js';

const COLS = 'holder_id, version, roles, started_at, last_seen_at, partitions_led';

const BEAT = `
INSERT INTO submission_manager_instances AS i (${COLS})
SELECT $1, $2, $3, n.t, n.t, $4 FROM (SELECT clock_timestamp() AS t) AS n
ON CONFLICT (holder_id) DO UPDATE
   SET version = EXCLUDED.version, roles = EXCLUDED.roles, last_seen_at = EXCLUDED.last_seen_at, partitions_led = EXCLUDED.partitions_led
RETURNING ${COLS}`;

// Always at least one row (database now), joined with the live rows.
const LIVE = `
SELECT i.holder_id, i.version, i.roles, i.started_at, i.last_seen_at, i.partitions_led, n.t AS db_now
  FROM (SELECT clock_timestamp() AS t) AS n
  LEFT JOIN submission_manager_instances AS i ON i.last_seen_at >= n.t - $1::bigint * interval '1 millisecond'
 ORDER BY i.holder_id`;

const PRUNE = `DELETE FROM submission_manager_instances WHERE last_seen_at < clock_timestamp() - $1::bigint * interval '1 millisecond'`;

export class PgInstanceStore implements InstanceStore {
  constructor(private readonly db: PgQueryable) {}

  async heartbeat(beat: InstanceBeat): Promise<InstanceRow> {
    const c = instanceColumns(beat);
    const row = (await this.db.query<InstanceDbRow>(BEAT, [c.holder, c.version, c.roles, c.partitions])).rows[0];
    if (!row) throw new Error('submission_manager_instances: the upsert returned no row');
    return toInstance(row);
  }

  async listLive(withinMs: number): Promise<{ instances: InstanceRow[]; dbNow: Date }> {
    const rows = (await this.db.query<InstanceDbRow & { db_now: Date }>(LIVE, [Math.max(0, Math.floor(withinMs))])).rows;
    return { instances: rows.filter((r) => r.holder_id !== null).map(toInstance), dbNow: rows[0]!.db_now };
  }

  async remove(holderId: string): Promise<boolean> {
    return ((await this.db.query('DELETE FROM submission_manager_instances WHERE holder_id = $1', [holderId])).rowCount ?? 0) > 0;
  }

  async prune(olderThanMs: number): Promise<number> {
    return (await this.db.query(PRUNE, [Math.max(0, Math.floor(olderThanMs))])).rowCount ?? 0;
  }
}
