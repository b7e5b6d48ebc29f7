// MySQL / MariaDB InstanceStore: the instance heartbeat rows, every time UTC_TIMESTAMP(6) (one instant per
// statement). The upsert keeps started_at (only the listed columns change on a duplicate key); the row is read back
// by a second statement (affectedRows is never an outcome here).
import { instanceColumns, toInstance, type InstanceBeat, type InstanceDbRow, type InstanceRow, type InstanceStore } from '../instancePorts.js';
import type { MyQueryable } from './db.js';
import { NOW, minusMs } from './rows.js';

const COLS = 'holder_id, version, roles, started_at, last_seen_at, partitions_led';

const BEAT = `INSERT INTO submission_manager_instances (${COLS}) VALUES (?, ?, ?, ${NOW}, ${NOW}, ?)
ON DUPLICATE KEY UPDATE version = ?, roles = ?, last_seen_at = ${NOW}, partitions_led = ?`;

const READ = `SELECT ${COLS} FROM submission_manager_instances WHERE holder_id = ?`;

// Always at least one row (database now), joined with the live rows.
const LIVE = `
SELECT i.holder_id, i.version, i.roles, i.started_at, i.last_seen_at, i.partitions_led, n.t AS db_now
  FROM (SELECT ${NOW} AS t) AS n
  LEFT JOIN submission_manager_instances AS i ON i.last_seen_at >= ${minusMs('n.t', '?')}
 ORDER BY i.holder_id`;

const PRUNE = `DELETE FROM submission_manager_instances WHERE last_seen_at < ${minusMs(NOW, '?')}`;

export class MysqlInstanceStore implements InstanceStore {
  constructor(private readonly db: MyQueryable) {}

  async heartbeat(beat: InstanceBeat): Promise<InstanceRow> {
    const c = instanceColumns(beat);
    await this.db.query(BEAT, [c.holder, c.version, c.roles, c.partitions, c.version, c.roles, c.partitions]);
    const row = (await this.db.query<InstanceDbRow>(READ, [c.holder])).rows[0];
    if (!row) throw new Error('submission_manager_instances: no row after the upsert');
    return toInstance(row);
  }

  async listLive(withinMs: number): Promise<{ instances: InstanceRow[]; dbNow: Date }> {
    const rows = (await this.db.query<InstanceDbRow & { db_now: Date }>(LIVE, [Math.max(0, Math.floor(withinMs))])).rows;
    return { instances: rows.filter((r) => r.holder_id !== null).map(toInstance), dbNow: rows[0]!.db_now };
  }

  async remove(holderId: string): Promise<boolean> {
    return (await this.db.query('DELETE FROM submission_manager_instances WHERE holder_id = ?', [holderId])).affectedRows > 0;
  }

  async prune(olderThanMs: number): Promise<number> {
    return (await this.db.query(PRUNE, [Math.max(0, Math.floor(olderThanMs))])).affectedRows;
  }
}
