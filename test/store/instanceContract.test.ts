// The InstanceStore contract (issue 25: instance heartbeats), run unchanged against every dialect: a beat upserts the
// holder's row stamped with database time (started_at kept from the first beat), listLive returns the rows seen within
// a window of database time with that time, remove and prune delete, holder ids compare byte-wise, and values wider
// than their columns are refused with nothing stored.
import { describe, expect, it } from 'vitest';
import { dialects, itWhere, type DialectContext } from '../support/dialects.js';
import { useDialectStores } from '../support/dialectFixture.js';
import type { Stores } from '../../src/store/stores.js';
import { isStoreError } from '../../src/store/ports.js';
import type { InstanceBeat } from '../../src/store/instancePorts.js';

const beat = (holderId: string, over: Partial<InstanceBeat> = {}): InstanceBeat =>
  ({ holderId, version: '0.1.0', roles: ['http', 'timer'], partitions: [], ...over });

describe.each(dialects)('instance store contract: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  const more = useDialectStores(dialect, (fresh, stores) => {
    ctx = fresh;
    s = stores;
  });

  const dbNow = async () => new Date(Date.parse(`${(await ctx.dbNowText()).replace(' ', 'T')}Z`));
  /** Move a row's last beat `seconds` into the past (as if the instance had stopped beating then). */
  const age = (holderId: string, seconds: number) => ctx.sql({
    mssql: `UPDATE submission_manager_instances SET last_seen_at = DATEADD(second, -${seconds}, last_seen_at) WHERE holder_id = '${holderId}'`,
    mysql: `UPDATE submission_manager_instances SET last_seen_at = DATE_SUB(last_seen_at, INTERVAL ${seconds} SECOND) WHERE holder_id = '${holderId}'`,
  }[dialect.name as string] ?? `UPDATE submission_manager_instances SET last_seen_at = last_seen_at - interval '${seconds} seconds' WHERE holder_id = '${holderId}'`);

  it('a first beat stores the row with database time (started = last seen); the partitions come back ascending, once each', async () => {
    const before = new Date((await dbNow()).getTime() - 1);
    const row = await s.instances.heartbeat(beat('host-a', { partitions: [3, 0, 3, 12] }));
    const after = new Date((await dbNow()).getTime() + 1);
    expect(row).toMatchObject({ holderId: 'host-a', version: '0.1.0', roles: ['http', 'timer'], partitions: [0, 3, 12] });
    expect(row.startedAt.getTime()).toBe(row.lastSeenAt.getTime());
    expect(row.lastSeenAt.getTime()).toBeGreaterThanOrEqual(before.getTime());
    expect(row.lastSeenAt.getTime()).toBeLessThanOrEqual(after.getTime());
    const live = await s.instances.listLive(60_000);
    expect(live.instances).toEqual([row]);
    expect(live.dbNow.getTime()).toBeGreaterThanOrEqual(row.lastSeenAt.getTime());
  });

  it('a later beat keeps started_at and replaces version, roles, partitions and last_seen_at', async () => {
    const first = await s.instances.heartbeat(beat('host-a', { partitions: [1] }));
    await age('host-a', 5);
    const second = await s.instances.heartbeat(beat('host-a', { version: '0.2.0', roles: ['http'], partitions: [] }));
    expect(second).toMatchObject({ holderId: 'host-a', version: '0.2.0', roles: ['http'], partitions: [] });
    expect(second.startedAt.getTime()).toBe(first.startedAt.getTime());
    expect(second.lastSeenAt.getTime()).toBeGreaterThanOrEqual(first.lastSeenAt.getTime());
    expect((await s.instances.listLive(60_000)).instances).toEqual([second]);
  });

  it('listLive: only the rows seen within the window of database time, by holder id; none is a list with database now', async () => {
    const empty = await s.instances.listLive(60_000);
    expect(empty.instances).toEqual([]);
    expect(Math.abs(empty.dbNow.getTime() - (await dbNow()).getTime())).toBeLessThan(5_000);
    await s.instances.heartbeat(beat('host-c'));
    await s.instances.heartbeat(beat('host-a', { partitions: [0, 1] }));
    await s.instances.heartbeat(beat('host-b', { roles: [] }));
    await age('host-b', 30);
    expect((await s.instances.listLive(10_000)).instances.map((i) => [i.holderId, i.partitions])).toEqual([['host-a', [0, 1]], ['host-c', []]]);
    const all = await s.instances.listLive(60_000);
    expect(all.instances.map((i) => i.holderId)).toEqual(['host-a', 'host-b', 'host-c']);
    expect(all.instances[1]).toMatchObject({ roles: [] });
    expect(all.dbNow.getTime() - all.instances[1]!.lastSeenAt.getTime()).toBeGreaterThanOrEqual(30_000);
  });

  it('remove deletes the row (false when there is none); prune deletes only the rows older than its bound', async () => {
    for (const h of ['gone', 'stale', 'fresh']) await s.instances.heartbeat(beat(h));
    expect(await s.instances.remove('gone')).toBe(true);
    expect(await s.instances.remove('gone')).toBe(false);
    await age('stale', 120);
    expect(await s.instances.prune(60_000)).toBe(1);
    expect(await s.instances.prune(60_000)).toBe(0);
    expect((await s.instances.listLive(3_600_000)).instances.map((i) => i.holderId)).toEqual(['fresh']);
  });

  it('holder ids compare byte-wise: "Host-A" and "host-a" are two rows', async () => {
    await s.instances.heartbeat(beat('host-a'));
    await s.instances.heartbeat(beat('Host-A'));
    expect((await s.instances.listLive(60_000)).instances.map((i) => i.holderId)).toEqual(['Host-A', 'host-a']);
  });

  it('values wider than their columns, a comma inside a role or a negative partition are refused, storing nothing', async () => {
    for (const bad of [beat('h'.repeat(129)), beat('x', { version: 'v'.repeat(65) }), beat('x', { roles: ['http,timer'] }),
      beat('x', { partitions: [-1] }), beat('x', { roles: ['r'.repeat(65)] })]) {
      const e = await s.instances.heartbeat(bad).then(() => null, (x: unknown) => x);
      expect(isStoreError(e) && e.kind, JSON.stringify(bad).slice(0, 80)).toBe('fatal');
    }
    expect((await s.instances.listLive(60_000)).instances).toEqual([]);
    // The widest list: 64 partitions fit.
    const all = Array.from({ length: 64 }, (_, i) => i);
    expect((await s.instances.heartbeat(beat('wide', { partitions: all }))).partitions).toEqual(all);
  });

  itWhere(dialect.manySessions)('concurrent first beats of one holder from separate pools: one row, every beat answered', async () => {
    const pools = await Promise.all([1, 2, 3, 4].map(() => more(1)));
    const rows = await Promise.all(pools.map((x, i) => x.instances.heartbeat(beat('same', { partitions: [i] }))));
    expect(new Set(rows.map((r) => r.startedAt.getTime())).size).toBe(1);
    const live = (await s.instances.listLive(60_000)).instances;
    expect(live).toHaveLength(1);
    expect(rows.map((r) => r.partitions[0])).toContain(live[0]!.partitions[0]);
  });
});
