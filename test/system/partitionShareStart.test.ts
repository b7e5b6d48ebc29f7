// Every-instance timers with a process started but not yet ticking (in-process apps on each dialect, EXECUTOR_PARTITIONS
// 2 beside the recorded count 2): its heartbeat row exists from its start, but it claims its place in the fair share
// (role `fair-share`) only at its first tick. Until then the ticking one is not held back for it: it leads every
// partition, none stays unled waiting for a taker that does not run. Once the other ticks, its row says `fair-share`
// and the partitions end up shared one each (a hand-back by the existing rules). Judged by the lease rows, the
// instances' rows and their roles, not by the clock.
import { describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { partitionLeaseName } from '../../src/limits.js';
import { FAIR_SHARE_ROLE } from '../../src/lease/instanceHeartbeat.js';
import { dialects } from '../support/dialects.js';
import { useApps } from '../support/appsFixture.js';
import { sleep, startApps, testConfig, timerLoops, TEST_LEASE, waitUntil } from '../support/apps.js';

const P = 2;
const PERIOD_MS = 1_000; // testConfig's EXECUTOR_SCHEDULE: every second

describe.each(dialects)('every-instance: a process not ticking yet is not counted in the fair share: $name', (dialect) => {
  const s = useApps(dialect);

  const start = () => startApps(s.ctx, 1, testConfig(s.provider.url, { EXECUTOR_PARTITIONS: String(P), DB_POOL_MAX: '7',
    INSTANCE_HEARTBEAT_MS: '300', INSTANCE_LIVE_WINDOW_MS: '3000' }), undefined, 7, 'every-instance').then(([a]) => a!);
  /** Lease holders of the P partitions (null: free or expired, by database time). */
  const holders = async () => Promise.all(Array.from({ length: P }, async (_, k) => {
    const r = await s.apps[0]!.stores.lease.get(partitionLeaseName(TEST_LEASE, k));
    return r && r.expiresAt > r.dbNow ? r.holderId : null;
  }));
  const id = (app: App) => app.config.lease.holderId;
  const row = async (app: App) => (await app.stores.instances.listLive(60_000)).instances.find((i) => i.holderId === id(app));

  it('the ticking one leads every partition while the other only beats; once the other ticks, they share', async () => {
    const [a, b] = [await start(), await start()];
    s.apps = [a, b];
    expect(a.layout.count()).toBe(P);
    expect((await row(b))?.roles, 'started, not ticking: its row is there, without the share').toEqual(['http', 'timer']);

    // Only A ticks: nobody counts B, so A's share is every partition (B, counted, would leave one unled: A at its share).
    s.loops = timerLoops([a]); // as the Functions host runs each partition's timer (runPartitionTimer)
    await waitUntil('A leads every partition', async () => (await holders()).every((h) => h === id(a)), 10 * PERIOD_MS);
    expect((await row(a))?.roles).toContain(FAIR_SHARE_ROLE);
    // It stays so over several fair-share decisions (two a period), B's row live and without the role all along.
    for (let i = 0; i < 6; i++) {
      await sleep(PERIOD_MS / 2);
      expect(await holders(), `after ${(i + 1) / 2} periods`).toEqual([id(a), id(a)]);
    }
    const rowB = await row(b);
    expect(rowB, 'B beats').toBeDefined();
    expect(rowB!.roles).not.toContain(FAIR_SHARE_ROLE);
    expect(rowB!.partitions).toEqual([]);

    // B ticks: its row claims the share, A hands one partition back, and B takes it.
    await s.loops.stop();
    s.loops = timerLoops([a, b]);
    await waitUntil('B claims the share', async () => (await row(b))?.roles.includes(FAIR_SHARE_ROLE) ?? false, 10 * PERIOD_MS);
    await waitUntil('shared one each', async () => {
      const h = await holders();
      return h.filter((x) => x === id(a)).length === 1 && h.filter((x) => x === id(b)).length === 1;
    }, 30 * PERIOD_MS);
    // Each process's own view follows its lease row once its reply is read (an acquire or renew may be on the wire when
    // the rows say one each, and a loaded machine may read it late): never both for one partition, both in the end.
    const led = (app: App) => app.partitions.filter((p) => p.lease.requireLeader()).map((p) => p.partition);
    await waitUntil('each leads its own', async () => {
      expect(led(a).filter((k) => led(b).includes(k))).toEqual([]);
      return led(a).length + led(b).length === P;
    }, 10 * PERIOD_MS);
  }, 90_000);
});
