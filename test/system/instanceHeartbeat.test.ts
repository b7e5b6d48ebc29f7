// InstanceHeartbeat (src/lease/instanceHeartbeat.ts) against real databases, with a short interval: the row is written
// before start() resolves and then every interval with the partitions led at that beat; live() holds the last read
// (every live instance, this one included) and becomes unknown (null) once older than the liveness window; stop()
// removes the row; SQL that fails (the table dropped) never throws into the caller, and is logged at warn (not at every beat).
import { describe, expect, it } from 'vitest';
import { dialects, type DialectContext } from '../support/dialects.js';
import { useDialectContext } from '../support/dialectFixture.js';
import type { Stores } from '../../src/store/stores.js';
import { FakeClock, systemClock } from '../../src/lease/clock.js';
import { InstanceHeartbeat, type InstanceHeartbeatSettings } from '../../src/lease/instanceHeartbeat.js';
import { createLogger, silentLogger } from '../../src/observability/logger.js';

const settings = (holderId: string, over: Partial<InstanceHeartbeatSettings> = {}): InstanceHeartbeatSettings =>
  ({ holderId, version: '9.9.9', roles: ['http', 'timer'], heartbeatMs: 100, liveWindowMs: 2_000, ...over });
const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

describe.each(dialects)('instance heartbeat: $name', (dialect) => {
  let ctx: DialectContext;
  let s: Stores;
  const started: InstanceHeartbeat[] = [];
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    s = await ctx.openStores();
  }, async () => {
    for (const h of started.splice(0)) await h.stop();
  });
  const start = async (...args: Parameters<typeof InstanceHeartbeat.start>) => {
    const h = await InstanceHeartbeat.start(...args);
    started.push(h);
    return h;
  };

  it('writes its row before start() resolves, then every interval with the partitions led; live() lists every live instance', async () => {
    let led: number[] = [];
    const a = await start(s.instances, settings('host-a'), systemClock, silentLogger, () => led);
    const first = (await s.instances.listLive(60_000)).instances;
    expect(first).toMatchObject([{ holderId: 'host-a', version: '9.9.9', roles: ['http', 'timer'], partitions: [] }]);
    expect(a.live()?.map((r) => r.holderId)).toEqual(['host-a']);

    const b = await start(s.instances, settings('host-b', { roles: ['http'] }), systemClock, silentLogger);
    expect(b.live()?.map((r) => r.holderId)).toEqual(['host-a', 'host-b']);
    led = [2, 0];
    for (let end = Date.now() + 5_000; Date.now() < end; await sleep(50)) {
      const rows = (await s.instances.listLive(60_000)).instances;
      if (rows.find((r) => r.holderId === 'host-a')?.partitions.length === 2 && a.live()?.length === 2) break;
    }
    const rows = (await s.instances.listLive(60_000)).instances;
    expect(rows.find((r) => r.holderId === 'host-a')!.partitions).toEqual([0, 2]);
    expect(rows.find((r) => r.holderId === 'host-a')!.lastSeenAt.getTime()).toBeGreaterThan(first[0]!.lastSeenAt.getTime());
    expect(a.live()?.map((r) => r.holderId)).toEqual(['host-a', 'host-b']);
    // The fair share counts only the instances that may lead.
    expect(a.liveLeaders()).toEqual([{ holderId: 'host-a', partitions: [0, 2] }]);
  });

  it('liveSharers() marks silent a sharer whose row was older than two heartbeats at the read (database times); on a list older than a heartbeat, nobody', async () => {
    // host-b beats once and then never again (cut off); host-a keeps beating every 500 ms (silent past 1 s).
    await s.instances.heartbeat({ holderId: 'host-b', version: '9.9.9', roles: ['timer', 'fair-share'], partitions: [] });
    const clock = new FakeClock();
    const a = await start(s.instances, settings('host-a', { roles: ['timer', 'fair-share'], heartbeatMs: 500, liveWindowMs: 60_000 }), clock, silentLogger);
    const silentOf = () => Object.fromEntries((a.liveSharers() ?? []).map((i) => [i.holderId, i.silent]));
    let seen: Record<string, boolean | undefined> = {};
    for (let end = Date.now() + 10_000; Date.now() < end && seen['host-b'] !== true; await sleep(20)) seen = silentOf();
    // Judged by the rows' own times: b's last beat is over 1 s old at a's read; a's was written in the same beat.
    expect(seen).toEqual({ 'host-a': false, 'host-b': true });
    // A list older than a heartbeat (this instance's own beats failing, say) judges nobody silent.
    await a.stop();
    clock.advance(501);
    expect(a.liveSharers()?.map((i) => i.silent)).toEqual([false, false]);
  });

  it('beat(true) while a beat is in flight beats once more after it: roles changed meanwhile are written when it resolves', async () => {
    let roles = ['http', 'timer'];
    const h = await start(s.instances, settings('host-a', { roles: () => roles, heartbeatMs: 60_000 }), systemClock, silentLogger);
    const inFlight = h.beat(); // read the roles as they are now
    roles = ['http', 'timer', 'fair-share'];
    const joined = h.beat(); // a plain beat joins the one in flight
    await h.beat(true);
    await Promise.all([inFlight, joined]);
    expect((await s.instances.listLive(60_000)).instances.find((r) => r.holderId === 'host-a')?.roles).toEqual(roles);
  });

  it('stop() removes the row and stops beating; the others stop listing it', async () => {
    const a = await start(s.instances, settings('host-a'), systemClock, silentLogger);
    const b = await start(s.instances, settings('host-b'), systemClock, silentLogger);
    await b.stop();
    await sleep(300); // three intervals: a stopped heartbeat would have written its row again by now
    expect((await s.instances.listLive(60_000)).instances.map((r) => r.holderId)).toEqual(['host-a']);
    await a.beat();
    expect(a.live()?.map((r) => r.holderId)).toEqual(['host-a']);
  });

  it('a failing database: start() and beat() resolve, one warn per failure (not per beat), live() null after the window; stop() resolves', async () => {
    const logs: Record<string, unknown>[] = [];
    const logger = createLogger('debug', { write: (line: string) => void logs.push(JSON.parse(line) as Record<string, unknown>) });
    const clock = new FakeClock();
    const h = await start(s.instances, settings('host-x', { heartbeatMs: 50 }), clock, logger);
    expect(h.live()?.map((r) => r.holderId)).toEqual(['host-x']);
    await ctx.sql('DROP TABLE submission_manager_instances'); // every statement of the heartbeat now fails in SQL
    // Two of the timer's beats fail (counted, not timed: a loaded database answers each later; 10 s is a liveness guard).
    const failures = () => logs.filter((l) => l.event === 'instance_heartbeat_failed');
    for (const end = Date.now() + 10_000; failures().length < 2 && Date.now() < end;) await sleep(20);
    await expect(h.beat()).resolves.toBeUndefined();
    const failed = failures();
    expect(failed.length).toBeGreaterThanOrEqual(3);
    expect(failed.filter((l) => l.level === 'warn')).toHaveLength(1); // warn once; the repeats at debug
    expect(h.live()?.map((r) => r.holderId)).toEqual(['host-x']); // the last list, still within the window
    clock.advance(2_001);
    expect(h.live()).toBeNull();
    expect(h.liveLeaders()).toBeNull();
    await expect(h.stop()).resolves.toBeUndefined();
    expect(logs.some((l) => l.event === 'instance_remove_failed' && l.level === 'warn')).toBe(true);
  });
});
