// Every-instance timers with processes of different EXECUTOR_PARTITIONS beside the recorded count 4 (in-process apps
// on each dialect, every partition's executor ticking like its timer): two apps run 4 partitions, one runs 1. The
// smaller one cannot run partitions 1–3, so it is outside the fair share (its heartbeat row has no `fair-share` role)
// and nobody counts it: every partition is led, and stays led, whether it joins a settled pair or all start at once.
// Judged by the lease rows and events (holders, epochs, releases), not by the clock.
import { describe, expect, it } from 'vitest';
import type { App } from '../../src/app.js';
import { partitionLeaseName } from '../../src/limits.js';
import { FAIR_SHARE_ROLE } from '../../src/lease/instanceHeartbeat.js';
import { dialects } from '../support/dialects.js';
import { useApps } from '../support/appsFixture.js';
import { sleep, startApps, testConfig, tickLoops, TEST_LEASE, waitUntil } from '../support/apps.js';

const P = 4;
const PERIOD_MS = 1_000; // testConfig's EXECUTOR_SCHEDULE: every second

describe.each(dialects)('every-instance with EXECUTOR_PARTITIONS 4, 4 and 1 beside the recorded count 4: $name', (dialect) => {
  const s = useApps(dialect);

  const start = (partitions: number) => startApps(s.ctx, 1, testConfig(s.provider.url, { EXECUTOR_PARTITIONS: String(partitions), DB_POOL_MAX: '13',
    INSTANCE_HEARTBEAT_MS: '300', INSTANCE_LIVE_WINDOW_MS: '3000' }), undefined, 13, 'every-instance').then(([a]) => a!);
  const led = (app: App) => app.partitions.filter((p) => p.partition < P && p.lease.requireLeader()).map((p) => p.partition);
  /** Lease rows of the P partitions: holder and epoch, or null when free or expired (by database time). */
  const rows = async () => Promise.all(Array.from({ length: P }, async (_, k) => {
    const r = await s.apps[0]!.stores.lease.get(partitionLeaseName(TEST_LEASE, k));
    return r && r.expiresAt > r.dbNow ? `${r.holderId}@${r.leaseEpoch}` : null;
  }));
  const everyLed = async () => (await rows()).every((r) => r !== null) && s.apps.reduce((n, a) => n + led(a).length, 0) === P;
  const releases = async () => (await Promise.all(Array.from({ length: P }, (_, k) => s.apps[0]!.stores.lease.listEvents(partitionLeaseName(TEST_LEASE, k)))))
    .flat().filter((e) => e.event === 'released').length;
  const roles = async (app: App) =>
    (await app.stores.instances.listLive(60_000)).instances.find((i) => i.holderId === app.config.lease.holderId)?.roles ?? [];

  /** Over `periods` timer periods (each several fair-share decisions), every partition stays led by the same holder
   *  under the same epoch, and nothing is released (no hand-back). */
  async function staysLed(periods: number) {
    const before = [await rows(), await releases()] as const;
    for (let i = 0; i < 2 * periods; i++) {
      await sleep(PERIOD_MS / 2);
      const now = await rows();
      expect(now, `after ${(i + 1) / 2} periods: ${JSON.stringify(now)} (was ${JSON.stringify(before[0])})`).toEqual(before[0]);
    }
    expect(await releases(), 'partitions released (handed back) meanwhile').toBe(before[1]);
  }

  it('the smaller one joining a settled pair: not counted, nothing handed back, every partition stays led; a leave is covered', async () => {
    s.apps = [await start(4), await start(4)];
    s.loops = tickLoops(s.apps, 400, 50);
    await waitUntil('the pair leads 2 + 2', async () => (await everyLed()) && s.apps.every((a) => led(a).length === 2), 30_000);
    await s.loops.stop();
    const small = await start(1);
    expect(small.layout.count()).toBe(P);
    s.apps.push(small);
    s.loops = tickLoops(s.apps, 400, 50);
    await waitUntil('the smaller one beats', async () => (await roles(small)).length > 0, 10_000);
    await staysLed(4);
    expect(await roles(small), 'outside the fair share').not.toContain(FAIR_SHARE_ROLE);
    expect(await roles(s.apps[0]!)).toContain(FAIR_SHARE_ROLE);
    expect(led(small)).toEqual([]);
    // A graceful leave of one of the pair: its two partitions are led again (by the other, or 0 by the smaller one).
    const [leaver, stays] = [s.apps[0]!, s.apps[1]!];
    await s.loops.stop();
    await leaver.close();
    s.apps = [stays, small];
    s.loops = tickLoops(s.apps, 400, 50);
    await waitUntil('every partition led after the leave', everyLed, 30_000);
    expect(led(stays).length + led(small).length).toBe(P);
  }, 90_000);

  it('all three starting at once: every partition led, and it stays so', async () => {
    s.apps = [await start(4), await start(4), await start(1)];
    s.loops = tickLoops(s.apps, 400, 50);
    // Instances started together may take more than their share at first and hand it back: led, then settled (the
    // two sharers within one of each other, the lease rows and the releases unchanged over a period), then it stays so.
    await waitUntil('every partition led', everyLed, 30_000);
    const shared = () => Math.abs(led(s.apps[0]!).length - led(s.apps[1]!).length) <= 1;
    await waitUntil('settled', async () => {
      const before = JSON.stringify([await rows(), await releases()]);
      await sleep(PERIOD_MS);
      return shared() && (await everyLed()) && JSON.stringify([await rows(), await releases()]) === before;
    }, 30_000);
    await staysLed(3);
    expect(s.apps.map((a) => led(a).length).reduce((x, y) => x + y)).toBe(P);
  }, 90_000);
});
