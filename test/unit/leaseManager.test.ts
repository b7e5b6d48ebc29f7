// The lease algorithm (LeaseManager) against an in-memory LeaseStore, with a FakeClock for monotonic time
// and the store's own database clock. Logs are captured from pino as JSON lines and checked field by field.
import { describe, it, expect } from 'vitest';
import { FakeClock } from '../../src/lease/clock.js';
import { LeaseManager, type LeadershipChange, type LeaseSettings } from '../../src/lease/leaseManager.js';
import { createLogger } from '../../src/observability/logger.js';
import { StoreError } from '../../src/store/ports.js';
import { MemoryLeaseStore } from '../support/memoryLeaseStore.js';

const NAME = 'submission-manager-executor';
const SETTINGS: Omit<LeaseSettings, 'holderId'> = {
  name: NAME,
  durationMs: 60_000,
  renewIntervalMs: 20_000,
  acquireIntervalMs: 30_000,
  safetyMarginMs: 5_000,
  acquireJitterMs: 250,
};
/** durationMs − safetyMarginMs: how long after sending an acquire/renew the instance may act. */
const ACT_WINDOW = SETTINGS.durationMs - SETTINGS.safetyMarginMs;
const DB_START = Date.UTC(2030, 0, 1);

type LogLine = Record<string, unknown> & { level: string; event?: string; msg: string; time: string };

interface HarnessOptions {
  /** Monotonic origin of the FakeClock (arbitrary; may be negative). */
  clockOriginMs?: number;
  /** Database time at the start. */
  dbStartMs?: number;
  /** true: database time moves with the FakeClock (from its own origin); false: it only moves when told. */
  linked?: boolean;
}

function harness(opts: HarnessOptions = {}) {
  const clock = new FakeClock();
  clock.advance(opts.clockOriginMs ?? 0);
  const origin = clock.nowMs();
  const dbStart = opts.dbStartMs ?? DB_START;
  const store = opts.linked === false
    ? new MemoryLeaseStore({ startMs: dbStart })
    : new MemoryLeaseStore({ now: () => dbStart + (clock.nowMs() - origin) });

  const lines: LogLine[] = [];
  const logger = createLogger('trace', {
    write(chunk: string) {
      for (const l of chunk.split('\n')) if (l.trim()) lines.push(JSON.parse(l) as LogLine);
    },
  });
  const changes = new Map<string, LeadershipChange[]>();

  return {
    clock,
    store,
    lines,
    /** Time since the harness started (on the FakeClock). */
    t: () => clock.nowMs() - origin,
    /** Move the FakeClock to `ms` after the start. */
    at(ms: number) {
      const d = ms - (clock.nowMs() - origin);
      if (d < 0) throw new Error(`time goes forward only (at ${ms}, now ${clock.nowMs() - origin})`);
      clock.advance(d);
    },
    /** Database time relative to the start, for expires_at values. */
    rel: (d: Date | string) => new Date(d).getTime() - dbStart,
    dbStart,
    manager(holderId: string, random: () => number = () => 0.5) {
      const m = new LeaseManager(store, { ...SETTINGS, holderId }, clock, logger, random);
      const mine: LeadershipChange[] = [];
      changes.set(holderId, mine);
      m.onChange((c) => mine.push(c));
      return m;
    },
    changes: (holderId: string) => changes.get(holderId) ?? [],
    logs: (event: string, holderId?: string) =>
      lines.filter((l) => l.event === event && (holderId === undefined || l.holder_id === holderId)),
  };
}

/** Let timers resolved by the FakeClock and fire-and-forget store calls run. */
const settle = async () => {
  for (let i = 0; i < 5; i++) await new Promise((r) => setImmediate(r));
};

/** Required fields on every leader_* line that concerns a held lease. */
function expectLeaseFields(line: LogLine | undefined, holderId: string, epoch: number, expiresAt?: Date) {
  expect(line).toBeDefined();
  expect(line!.holder_id).toBe(holderId);
  expect(line!.lease_epoch).toBe(epoch);
  expect(typeof line!.expires_at).toBe('string');
  expect(new Date(line!.expires_at as string).toISOString()).toBe(line!.expires_at);
  if (expiresAt) expect(line!.expires_at).toBe(expiresAt.toISOString());
  expect(typeof line!.time).toBe('string');
  expect(typeof line!.msg).toBe('string');
}

describe('acquire', () => {
  it('follower → leader: token, onChange acquired, leader_acquired log, acquired event in the store', async () => {
    const h = harness();
    const a = h.manager('A');
    expect(a.status()).toEqual({ mode: 'follower', holderId: 'A', leaseEpoch: null, expiresAt: null });
    expect(a.requireLeader()).toBeNull();
    expect(a.followerRetryDelayMs()).toBe(0);

    const token = await a.tryAcquireOrRenew();

    const expiresAt = new Date(h.dbStart + SETTINGS.durationMs);
    expect(token).toEqual({ leaseName: NAME, holderId: 'A', leaseEpoch: 1 });
    expect(a.requireLeader()).toEqual(token);
    expect(a.ensureEpoch(1)).toBe(true);
    expect(a.status()).toEqual({ mode: 'leader', holderId: 'A', leaseEpoch: 1, expiresAt });
    expect(a.remainingMs()).toBe(ACT_WINDOW);
    expect(h.changes('A')).toEqual([{ kind: 'acquired', token, expiresAt }]);

    const [line, ...more] = h.logs('leader_acquired');
    expect(more).toEqual([]);
    expect(line!.level).toBe('info');
    expectLeaseFields(line, 'A', 1, expiresAt);
    expect(h.lines.filter((l) => l.event === 'leader_lost')).toEqual([]);

    expect(await h.store.listEvents(NAME)).toMatchObject([{ seq: 1, leaseEpoch: 1, holderId: 'A', event: 'acquired' }]);
  });

  // A holds from t=0 (expires at 60 000 in database time); B tries at `elapsed`.
  it.each([
    { elapsed: 0, random: 0, delay: 30_000 }, // 60 000 left → capped by acquireIntervalMs
    { elapsed: 10_000, random: 0.5, delay: 30_125 }, // 50 000 left → capped, + jitter
    { elapsed: 45_000, random: 0, delay: 15_000 }, // right at the observed expiry
    { elapsed: 45_000, random: 0.5, delay: 15_125 },
    { elapsed: 45_000, random: 0.999, delay: 15_249 }, // jitter < acquireJitterMs
    { elapsed: 54_990, random: 0.5, delay: 5_135 }, // (A, never renewing, steps down at its local deadline 55 000)
  ])('refused while held (B at +$elapsed, random $random) → retry after $delay ms', async ({ elapsed, random, delay }) => {
    const h = harness();
    const a = h.manager('A');
    const b = h.manager('B', () => random);
    await a.tryAcquireOrRenew();
    h.at(elapsed);

    expect(await b.tryAcquireOrRenew()).toBeNull();
    expect(await b.tryAcquire()).toBe(false);
    expect(b.status().mode).toBe('follower');
    expect(b.followerRetryDelayMs()).toBe(delay);
    expect(h.changes('B')).toEqual([]);
    const refused = h.logs('leader_acquire_failed', 'B');
    expect(refused).toHaveLength(2);
    // The first sighting of holder A / epoch 1 is news (info); the same observation again is debug.
    expect(refused.map((l) => l.level)).toEqual(['info', 'debug']);
    expect(refused[0]).toMatchObject({
      holder_id: 'B', lease_epoch: 1, current_holder_id: 'A',
      expires_at: new Date(h.dbStart + SETTINGS.durationMs).toISOString(),
    });
    expect(refused[0]).not.toHaveProperty('sql_error');

    // The delay counts down on the monotonic clock.
    h.clock.advance(Math.floor(delay / 2));
    expect(b.followerRetryDelayMs()).toBe(delay - Math.floor(delay / 2));

    // A has "crashed" (never renews): B gets it when it retries at or after the expiry, never before.
    h.at(elapsed + delay);
    expect(b.followerRetryDelayMs()).toBe(0);
    const token = await b.tryAcquireOrRenew();
    if (elapsed + delay >= SETTINGS.durationMs) {
      expect(token).toEqual({ leaseName: NAME, holderId: 'B', leaseEpoch: 2 });
    } else {
      expect(token).toBeNull();
    }
  });

  // LEASE_ACQUIRE_INTERVAL_MS as documented (README, settings): it never spaces out acquire attempts — every
  // call (one per timer tick) sends the conditional statement — it only caps the in-tick wait for an expiry.
  it('LEASE_ACQUIRE_INTERVAL_MS does not delay the next attempt: a lease released right after a refusal is taken at once', async () => {
    const h = harness();
    const a = h.manager('A');
    const b = h.manager('B', () => 0);
    await a.tryAcquireOrRenew();
    expect(await b.tryAcquireOrRenew()).toBeNull();
    expect(b.followerRetryDelayMs()).toBe(SETTINGS.acquireIntervalMs); // the in-tick wait it would allow…
    expect(await a.release()).toBe(true);
    h.clock.advance(1); // …is no back-off: the next tick (here 1 ms later) tries again and wins
    expect(await b.tryAcquireOrRenew()).toEqual({ leaseName: NAME, holderId: 'B', leaseEpoch: 2 });
  });

  it('a follower refused every 10 s says so at info on each new holder/epoch and once a minute, debug in between', async () => {
    const h = harness();
    const a = h.manager('A');
    const b = h.manager('B');
    await a.tryAcquireOrRenew();
    for (let t = 0; t <= 130_000; t += 10_000) { // A renews every 20 s; B tries at every tick
      h.at(t);
      await a.tryAcquireOrRenew();
      await b.tryAcquire();
    }
    await a.release();
    const c = h.manager('C');
    await c.tryAcquireOrRenew(); // a new holder and epoch: news at once
    h.at(140_000);
    await b.tryAcquire();
    const refused = h.logs('leader_acquire_failed', 'B');
    const info = refused.filter((l) => l.level === 'info').map((l) => [l.current_holder_id, l.repeats]);
    expect(refused).toHaveLength(15);
    expect(refused.every((l) => l.level === 'info' || l.level === 'debug')).toBe(true);
    expect(info).toEqual([['A', undefined], ['A', 5], ['A', 5], ['C', undefined]]); // t = 0, 60 s, 120 s; 140 s
  });
});

describe('renew', () => {
  it.each([
    { after: 0, renews: false },
    { after: 1, renews: false },
    { after: 19_999, renews: false },
    { after: 20_000, renews: true },
    { after: 35_000, renews: true },
  ])('tryAcquireOrRenew at +$after ms → renew sent: $renews', async ({ after, renews }) => {
    const h = harness();
    const a = h.manager('A');
    await a.tryAcquireOrRenew();
    h.at(after);

    expect(a.renewDue()).toBe(renews);
    expect(await a.tryAcquireOrRenew()).toEqual({ leaseName: NAME, holderId: 'A', leaseEpoch: 1 });
    expect(h.store.calls.filter((c) => c === 'renew')).toHaveLength(renews ? 1 : 0);
    expect(h.store.calls.filter((c) => c === 'tryAcquire')).toHaveLength(1);

    if (renews) {
      const expiresAt = new Date(h.dbStart + after + SETTINGS.durationMs);
      const [line] = h.logs('leader_renewed');
      expect(line!.level).toBe('info');
      expectLeaseFields(line, 'A', 1, expiresAt);
      expect(a.status().expiresAt).toEqual(expiresAt);
      expect(a.remainingMs()).toBe(ACT_WINDOW); // deadline restarts from the renew's send time
      expect(h.store.peek(NAME)).toMatchObject({ leaseEpoch: 1, holderId: 'A', expiresAt });
      // The next renew waits another full interval from this one.
      h.at(after + SETTINGS.renewIntervalMs - 1);
      await a.tryAcquireOrRenew();
      expect(h.store.calls.filter((c) => c === 'renew')).toHaveLength(1);
      h.at(after + SETTINGS.renewIntervalMs);
      await a.tryAcquireOrRenew();
      expect(h.store.calls.filter((c) => c === 'renew')).toHaveLength(2);
    } else {
      expect(h.logs('leader_renewed')).toEqual([]);
      expect(a.remainingMs()).toBe(ACT_WINDOW - after);
    }
    // Renew never changes the epoch or logs an event.
    expect((await h.store.listEvents(NAME)).map((e) => e.event)).toEqual(['acquired']);
  });

  it.each([
    { case: 'expired in the database and taken by B', steal: true },
    { case: 'expired in the database, nobody took it', steal: false },
  ])('renew refused ($case) → leader_renew_failed, leader_lost, requireLeader() null', async ({ steal }) => {
    const h = harness();
    const a = h.manager('A');
    const b = h.manager('B');
    await a.tryAcquireOrRenew();
    h.store.advanceDb(SETTINGS.durationMs + 1_000); // the database clock jumps past the expiry
    if (steal) expect((await b.tryAcquireOrRenew())?.leaseEpoch).toBe(2);
    h.at(SETTINGS.renewIntervalMs);

    expect(a.requireLeader()).not.toBeNull(); // locally still inside its deadline…
    expect(await a.tryAcquireOrRenew()).toBeNull(); // …until the renew is refused
    expect(a.requireLeader()).toBeNull();
    expect(a.ensureEpoch(1)).toBe(false);
    expect(a.status().mode).toBe('follower');

    const expiresAt = new Date(h.dbStart + SETTINGS.durationMs);
    const [failed] = h.logs('leader_renew_failed', 'A');
    expect(failed!.level).toBe('warn');
    expectLeaseFields(failed, 'A', 1, expiresAt);
    expect(failed).not.toHaveProperty('sql_error');
    const [lost] = h.logs('leader_lost', 'A');
    expectLeaseFields(lost, 'A', 1, expiresAt);
    expect(lost).toMatchObject({ level: 'warn', reason: 'renew_refused' });
    expect(h.changes('A').map((c) => c.kind)).toEqual(['acquired', 'lost']);
    expect(h.changes('A')[1]).toEqual({ kind: 'lost', token: { leaseName: NAME, holderId: 'A', leaseEpoch: 1 }, reason: 'renew_refused' });
  });

  it.each([
    { name: 'StoreError with a SQLSTATE', error: new StoreError('transient', 'Connection terminated unexpectedly', '08006'),
      sqlError: { message: 'Connection terminated unexpectedly', code: '08006' } },
    { name: 'SQL Server error number', error: new StoreError('fatal', 'Login failed for user', 'ELOGIN'),
      sqlError: { message: 'Login failed for user', code: 'ELOGIN' } },
    { name: 'plain Error, no code', error: new Error('socket hang up'), sqlError: { message: 'socket hang up' } },
  ])('renew throws ($name) → leadership dropped at once, leader_renew_failed with sql_error, row handed back', async ({ error, sqlError }) => {
    const h = harness();
    const a = h.manager('A');
    await a.tryAcquireOrRenew();
    h.at(SETTINGS.renewIntervalMs);
    h.store.failNext('renew', error);

    expect(await a.tryAcquireOrRenew()).toBeNull();
    // Dropped immediately, although the database row is still valid and the local deadline is far away.
    expect(a.requireLeader()).toBeNull();
    expect(a.ensureEpoch(1)).toBe(false);
    expect(a.remainingMs()).toBe(0);
    // The row was still ours: handed back best-effort (expired in place), so nobody waits out the lease.
    await settle();
    const row = h.store.peek(NAME)!;
    expect(row).toMatchObject({ holderId: 'A', leaseEpoch: 1 });
    expect(row.expiresAt.getTime()).toBe(row.dbNow.getTime());
    expect((await h.store.listEvents(NAME)).map((e) => e.event)).toEqual(['acquired', 'released']);

    const [failed] = h.logs('leader_renew_failed', 'A');
    expect(failed!.level).toBe('warn');
    expectLeaseFields(failed, 'A', 1);
    expect(failed!.sql_error).toEqual(sqlError);
    const [lost] = h.logs('leader_lost', 'A');
    expect(lost).toMatchObject({ reason: 'renew_error', sql_error: sqlError });
    expectLeaseFields(lost, 'A', 1);
    expect(h.changes('A').at(-1)).toMatchObject({ kind: 'lost', reason: 'renew_error' });
  });

  // Found by the fault campaign (terminate): the sessions killed under the renew also kill the idle pooled
  // connection the release then gets, so the row stayed held and the instance waited out its own lease.
  it('a hand-back that fails (dead pooled connection) is retried: the row is released, a follower takes it at once', async () => {
    const h = harness();
    const a = h.manager('A');
    const b = h.manager('B');
    await a.tryAcquireOrRenew();
    h.at(SETTINGS.renewIntervalMs);
    const terminated = new StoreError('transient', 'terminating connection due to administrator command', '57P01');
    h.store.failNext('renew', terminated);
    h.store.failNext('release', terminated);
    h.store.failNext('release', terminated);
    expect(await a.tryAcquireOrRenew()).toBeNull();
    await settle();
    expect(h.store.peek(NAME)!.expiresAt.getTime()).toBeGreaterThan(h.store.peek(NAME)!.dbNow.getTime()); // not yet
    for (let i = 0; i < 2; i++) {
      h.clock.advance(100);
      await settle();
    }
    expect((await h.store.listEvents(NAME)).map((e) => e.event)).toEqual(['acquired', 'released']);
    expect(h.logs('leader_release_failed', 'A').map((l) => [l.attempt, l.retry])).toEqual([[1, true], [2, true]]);
    expect(h.logs('leader_released_after_step_down', 'A')).toMatchObject([{ attempt: 3, released: true }]);
    expect(await b.tryAcquireOrRenew()).toEqual({ leaseName: NAME, holderId: 'B', leaseEpoch: 2 });
  });

  it('a hand-back is retried only while the row is surely still valid', async () => {
    const h = harness();
    const a = h.manager('A');
    await a.tryAcquireOrRenew();
    h.at(SETTINGS.durationMs - 150); // (no renew: past the local deadline, 150 ms before the row expires)
    const terminated = new StoreError('transient', 'terminating connection due to administrator command', '57P01');
    for (let i = 0; i < 4; i++) h.store.failNext('release', terminated);
    expect(await a.tryAcquireOrRenew()).toBeNull(); // local_deadline: hand back
    for (let i = 0; i < 4; i++) {
      await settle();
      h.clock.advance(100);
    }
    expect(h.logs('leader_release_failed', 'A').map((l) => [l.attempt, l.retry])).toEqual([[1, true], [2, false]]);
  });
});

describe('the gate: local deadline', () => {
  const probes = {
    requireLeader: (m: LeaseManager) => m.requireLeader() !== null,
    ensureEpoch: (m: LeaseManager) => m.ensureEpoch(1),
    remainingMs: (m: LeaseManager) => m.remainingMs() > 0,
    status: (m: LeaseManager) => m.status().mode === 'leader',
  };
  const cases = Object.keys(probes).flatMap((probe) =>
    [0, 1, 7_000, 30_000].map((latency) => ({ probe: probe as keyof typeof probes, latency })));

  it.each(cases)('$probe: stops at sentAt + duration − margin (acquire took $latency ms) without side effects; the deadline timer steps down and hands the row back',
    async ({ probe, latency }) => {
      // Database time does not move: the store would say the lease is valid for the whole test.
      const h = harness({ linked: false });
      const a = h.manager('A');
      h.store.beforeDecide = (op) => {
        if (op === 'tryAcquire') h.clock.advance(latency); // the statement takes `latency` on the wire
      };
      const sentAt = h.t();
      expect(await a.tryAcquireOrRenew()).toEqual({ leaseName: NAME, holderId: 'A', leaseEpoch: 1 });
      h.store.beforeDecide = undefined;
      expect(h.t()).toBe(sentAt + latency);
      expect(a.remainingMs()).toBe(ACT_WINDOW - latency); // counted from the send, not the reply
      expect(a.ensureEpoch(2)).toBe(false);

      h.at(sentAt + ACT_WINDOW - 1);
      expect(probes[probe](a)).toBe(true);
      h.at(sentAt + ACT_WINDOW);
      expect(probes[probe](a)).toBe(false);
      expect(a.requireLeader()).toBeNull();
      expect(a.ensureEpoch(1)).toBe(false);
      expect(a.remainingMs()).toBe(0);
      // A query has no side effect: nothing was dropped or logged by asking.
      expect(h.changes('A').map((c) => c.kind)).toEqual(['acquired']);
      expect(h.logs('leader_lost', 'A')).toEqual([]);

      await settle(); // the local-deadline timer runs
      expect(h.store.calls).toEqual(['tryAcquire', 'release']);
      const row = h.store.peek(NAME)!;
      expect(row).toMatchObject({ holderId: 'A', leaseEpoch: 1 });
      expect(row.expiresAt.getTime()).toBe(row.dbNow.getTime()); // handed back: expired in place
      const [lost] = h.logs('leader_lost', 'A');
      expect(lost).toMatchObject({ level: 'warn', reason: 'local_deadline' });
      expectLeaseFields(lost, 'A', 1);
      expect(h.changes('A').map((c) => c.kind)).toEqual(['acquired', 'lost']);
    });

  it('the deadline after a renew counts from the renew send time (renew took 5 s)', async () => {
    const h = harness({ linked: false });
    const a = h.manager('A');
    await a.tryAcquireOrRenew();
    h.at(SETTINGS.renewIntervalMs);
    h.store.beforeDecide = (op) => {
      if (op === 'renew') h.clock.advance(5_000);
    };
    expect(await a.tryAcquireOrRenew()).not.toBeNull();
    expect(a.remainingMs()).toBe(ACT_WINDOW - 5_000);
    h.at(SETTINGS.renewIntervalMs + ACT_WINDOW - 1);
    expect(a.requireLeader()).not.toBeNull();
    h.at(SETTINGS.renewIntervalMs + ACT_WINDOW);
    expect(a.requireLeader()).toBeNull();
  });

  it.each([
    { phase: 'request', latency: ACT_WINDOW },
    { phase: 'request', latency: 90_000 },
    { phase: 'response', latency: ACT_WINDOW },
    { phase: 'response', latency: 90_000 },
  ])('an acquire whose reply arrives after the deadline (slow $phase, $latency ms) does not make the instance act',
    async ({ phase, latency }) => {
      const h = harness();
      const a = h.manager('A');
      const slow = (op: string) => {
        if (op === 'tryAcquire') h.clock.advance(latency);
      };
      if (phase === 'request') h.store.beforeDecide = slow;
      else h.store.afterDecide = slow;

      expect(await a.tryAcquire()).toBe(false);
      expect(a.requireLeader()).toBeNull();
      expect(a.ensureEpoch(1)).toBe(false);
      expect(a.status().mode).toBe('follower');
      expect(h.changes('A').at(-1)?.kind ?? 'lost').toBe('lost');
      // The database did grant it (epoch 1); the instance simply never acts on it.
      expect(h.store.peek(NAME)).toMatchObject({ holderId: 'A', leaseEpoch: 1 });
    });

  it.each([
    { replyAt: ACT_WINDOW + 1_000, leads: true }, // before the renew's own deadline (sent at 20 000 → 75 000)
    { replyAt: SETTINGS.renewIntervalMs + ACT_WINDOW, leads: false }, // at/after it: too late
  ])('a renew sent before the deadline and answered at $replyAt: gate closed meanwhile; leads again: $leads', async ({ replyAt, leads }) => {
    const h = harness();
    const a = h.manager('A');
    await a.tryAcquireOrRenew();
    h.at(SETTINGS.renewIntervalMs);
    let reply!: () => void;
    h.store.afterDecide = (op) => (op === 'renew' ? new Promise<void>((r) => { reply = r; }) : undefined);

    const renewing = a.tryAcquireOrRenew();
    await Promise.resolve();
    h.at(ACT_WINDOW); // the old deadline passes while the renew is on the wire
    await settle();
    expect(a.requireLeader()).toBeNull(); // the gate says no, whatever the store will answer
    expect(a.ensureEpoch(1)).toBe(false);
    expect(h.logs('leader_lost')).toEqual([]); // the renew in flight decides, not the timer
    h.at(replyAt);
    reply();
    const token = await renewing;
    await settle();
    if (leads) {
      // Safe: the renewed expiry counts from the statement, which ran after its send time (20 000).
      expect(token).toEqual({ leaseName: NAME, holderId: 'A', leaseEpoch: 1 });
      expect(a.remainingMs()).toBe(SETTINGS.renewIntervalMs + ACT_WINDOW - replyAt);
    } else {
      expect(token).toBeNull();
      expect(a.requireLeader()).toBeNull();
      expect(h.logs('leader_lost', 'A')[0]).toMatchObject({ reason: 'local_deadline' });
      expect(h.store.calls).toContain('release'); // handed back
    }
    expect(h.store.peek(NAME)).toMatchObject({ holderId: 'A', leaseEpoch: 1 });
  });
});

describe('release and re-acquire', () => {
  it('release expires the row in place; another manager acquires at once with epoch + 1', async () => {
    const h = harness();
    const a = h.manager('A');
    const b = h.manager('B');
    await a.tryAcquireOrRenew();
    h.at(1_000);
    expect(await b.tryAcquireOrRenew()).toBeNull();

    expect(await a.release()).toBe(true);
    expect(a.requireLeader()).toBeNull();
    const row = h.store.peek(NAME)!;
    expect(row).toMatchObject({ holderId: 'A', leaseEpoch: 1 }); // still there, never deleted
    expect(row.expiresAt.getTime()).toBe(row.dbNow.getTime()); // expired now
    const [lost] = h.logs('leader_lost', 'A');
    expect(lost).toMatchObject({ reason: 'released' });
    expectLeaseFields(lost, 'A', 1);
    expect(h.changes('A').map((c) => c.kind)).toEqual(['acquired', 'lost']);

    expect(await b.tryAcquireOrRenew()).toEqual({ leaseName: NAME, holderId: 'B', leaseEpoch: 2 }); // no wait
    expect(h.t()).toBe(1_000);
    expect(await a.release()).toBe(false); // not held any more: nothing happens
    expect((await h.store.listEvents(NAME)).map((e) => [e.event, e.holderId, e.leaseEpoch])).toEqual([
      ['acquired', 'A', 1], ['released', 'A', 1], ['acquired', 'B', 2],
    ]);
  });

  it.each([
    { how: 'the lease ran out', end: async (h: ReturnType<typeof harness>) => h.at(SETTINGS.durationMs) },
    { how: 'it was released', end: async (_h: ReturnType<typeof harness>, a: LeaseManager) => void (await a.release()) },
  ])('the same holder re-acquiring after $how gets a new epoch', async ({ end }) => {
    const h = harness();
    const a = h.manager('A');
    await a.tryAcquireOrRenew();
    await end(h, a);
    expect(await a.tryAcquireOrRenew()).toEqual({ leaseName: NAME, holderId: 'A', leaseEpoch: 2 });
    expect(h.changes('A').map((c) => [c.kind, c.token.leaseEpoch])).toEqual([['acquired', 1], ['lost', 1], ['acquired', 2]]);
    expect(h.logs('leader_acquired').map((l) => l.lease_epoch)).toEqual([1, 2]);
    const events = await h.store.listEvents(NAME);
    expect(events.filter((e) => e.event === 'acquired').map((e) => e.leaseEpoch)).toEqual([1, 2]);
  });
});

describe('skewed clocks', () => {
  const HOUR = 3_600_000;
  const MIN = 60_000;

  /** A full scenario; returns what happened with every time made relative to its own clock's start. */
  async function scenario(opts: HarnessOptions) {
    const h = harness(opts);
    const a = h.manager('A');
    const b = h.manager('B');
    const trace: unknown[] = [];
    const note = (what: string, v: unknown) => trace.push([h.t(), what, v]);

    note('B initial delay', b.followerRetryDelayMs());
    note('A acquire', await a.tryAcquireOrRenew());
    h.at(5_000);
    note('B try', await b.tryAcquireOrRenew());
    const firstDelay = b.followerRetryDelayMs();
    note('B delay', firstDelay);
    h.at(20_000);
    note('A renew', await a.tryAcquireOrRenew());
    h.at(5_000 + firstDelay);
    note('B try', await b.tryAcquireOrRenew());
    note('B delay', b.followerRetryDelayMs());
    h.at(40_000);
    note('A renew', await a.tryAcquireOrRenew()); // then A crashes: no more calls
    for (let i = 0; i < 10 && !b.requireLeader(); i++) {
      h.clock.advance(b.followerRetryDelayMs());
      note('B try', await b.tryAcquireOrRenew());
      note('B delay', b.followerRetryDelayMs());
    }
    note('A gate', a.requireLeader());
    note('A delay after drop', a.followerRetryDelayMs());
    h.clock.advance(1_000);
    note('B release', await b.release());
    note('A acquire', await a.tryAcquireOrRenew());
    note('status A', { ...a.status(), expiresAt: h.rel(a.status().expiresAt!) });
    note('events', (await h.store.listEvents(NAME)).map((e) => [e.seq, e.event, e.holderId, e.leaseEpoch, h.rel(e.at)]));
    note('logs', h.lines.filter((l) => l.event).map((l) => ({
      level: l.level, event: l.event, holder_id: l.holder_id, lease_epoch: l.lease_epoch, reason: l.reason,
      expires_at: typeof l.expires_at === 'string' ? h.rel(l.expires_at) : l.expires_at,
    })));
    return trace;
  }

  it('baseline: failover right after the observed expiry (+ jitter), epochs 1 → 2 → 3', async () => {
    const trace = await scenario({});
    // A's last renew at 40 000 expires at 100 000; B (jitter 0.5 × 250) takes over at 100 125.
    expect(trace).toContainEqual([100_125, 'B try', { leaseName: NAME, holderId: 'B', leaseEpoch: 2 }]);
    expect(trace).toContainEqual([100_125, 'A gate', null]);
    expect(trace).toContainEqual([0, 'B initial delay', 0]);
    expect(trace).toContainEqual([100_125, 'A delay after drop', 0]);
    expect(trace).toContainEqual([101_125, 'A acquire', { leaseName: NAME, holderId: 'A', leaseEpoch: 3 }]);
  });

  it.each([
    { name: 'FakeClock origin +10 min', clockOriginMs: 10 * MIN },
    { name: 'FakeClock origin −10 min', clockOriginMs: -10 * MIN },
    { name: 'database clock +5 h', dbStartMs: DB_START + 5 * HOUR },
    { name: 'database clock −7 h', dbStartMs: DB_START - 7 * HOUR },
    { name: 'FakeClock +10 min, database −3 h', clockOriginMs: 10 * MIN, dbStartMs: DB_START - 3 * HOUR },
    { name: 'FakeClock −10 min, database +11 h', clockOriginMs: -10 * MIN, dbStartMs: DB_START + 11 * HOUR },
  ])('$name → the same outcome as the baseline', async ({ clockOriginMs, dbStartMs }) => {
    const baseline = await scenario({});
    expect(await scenario({ clockOriginMs, dbStartMs })).toEqual(baseline);
  });
});

describe('acquire failures', () => {
  it.each([
    { name: 'StoreError (connection refused)', error: new StoreError('transient', 'connect ECONNREFUSED 127.0.0.1:5432', 'ECONNREFUSED'),
      sqlError: { message: 'connect ECONNREFUSED 127.0.0.1:5432', code: 'ECONNREFUSED' }, random: 0 },
    { name: 'deadlock victim', error: new StoreError('transient', 'Transaction was deadlocked', '1205'),
      sqlError: { message: 'Transaction was deadlocked', code: '1205' }, random: 0.5 },
    { name: 'plain Error', error: new Error('timeout exceeded'), sqlError: { message: 'timeout exceeded' }, random: 0.999 },
  ])('acquire throws ($name) → leader_acquire_failed with sql_error, stays follower', async ({ error, sqlError, random }) => {
    const h = harness();
    const a = h.manager('A', () => random);
    h.store.failNext('tryAcquire', error);

    expect(await a.tryAcquireOrRenew()).toBeNull();
    expect(a.requireLeader()).toBeNull();
    expect(a.status()).toEqual({ mode: 'follower', holderId: 'A', leaseEpoch: null, expiresAt: null });
    expect(h.changes('A')).toEqual([]);
    const [line, ...more] = h.logs('leader_acquire_failed', 'A');
    expect(more).toEqual([]);
    expect(line).toMatchObject({ level: 'warn', holder_id: 'A', sql_error: sqlError });
    expect(h.logs('leader_acquired')).toEqual([]);
    // Retries soon (an error says nothing about the expiry): min(acquireIntervalMs, 1 s) + jitter.
    expect(a.followerRetryDelayMs()).toBe(1_000 + Math.floor(random * SETTINGS.acquireJitterMs));

    // The failed statement changed nothing: the next acquire is epoch 1.
    expect(await a.tryAcquireOrRenew()).toEqual({ leaseName: NAME, holderId: 'A', leaseEpoch: 1 });
    expect((await h.store.listEvents(NAME)).map((e) => e.leaseEpoch)).toEqual([1]);
  });
});

describe('acquire with a lost reply (issue 20, item 3)', () => {
  const lost = new StoreError('transient', 'Query read timeout', 'ETIMEDOUT');
  /** The next tryAcquire commits, then its reply is lost (the caller sees `lost`). */
  function loseNextAcquireReply(h: ReturnType<typeof harness>) {
    let armed = true;
    h.store.afterDecide = (op) => {
      if (op === 'tryAcquire' && armed) {
        armed = false;
        throw lost;
      }
    };
  }
  const events = async (h: ReturnType<typeof harness>) => (await h.store.listEvents(NAME)).map((e) => `${e.event}:${e.holderId}#${e.leaseEpoch}`);

  it.each([
    { name: 'the acquire committed, its reply was lost', stage: (h: ReturnType<typeof harness>) => loseNextAcquireReply(h),
      leads: 2, events: ['acquired:A#1', 'released:A#1', 'acquired:A#2'], releasedLog: [1] },
    { name: 'the acquire failed before committing', stage: (h: ReturnType<typeof harness>) => h.store.failNext('tryAcquire', lost),
      leads: 1, events: ['acquired:A#1'], releasedLog: [] },
    { name: 'a lost reply while another instance holds the row (not ours: left alone)', stage: async (h: ReturnType<typeof harness>) => {
      await h.manager('B').tryAcquire();
      h.store.failNext('tryAcquire', lost);
    }, leads: null, events: ['acquired:B#1'], releasedLog: [] },
  ])('$name → the next try leads at once (epoch $leads), not after the row expires', async ({ stage, leads, events: expected, releasedLog }) => {
    const h = harness();
    const a = h.manager('A');
    await stage(h);
    expect(await a.tryAcquireOrRenew()).toBeNull(); // the reply was lost: not leading
    h.at(1_000); // the next tick, well within the lost acquire's 60 s lease
    expect((await a.tryAcquireOrRenew())?.leaseEpoch ?? null).toBe(leads);
    expect(await events(h)).toEqual(expected);
    expect(h.logs('leader_unseen_acquire_released', 'A').map((l) => l.lease_epoch)).toEqual(releasedLog);
    if (leads !== null) expect(a.remainingMs()).toBe(ACT_WINDOW); // the new epoch's deadline counts from its own send
  });

  it.each([
    { name: 'another process with our holder id (no lost reply of ours)', ownEpochKnown: false },
    { name: 'an epoch this manager led itself (a step-down that hands nothing back)', ownEpochKnown: true },
  ])('a live row of ours that no lost reply explains is left alone: $name', async ({ ownEpochKnown }) => {
    const h = harness();
    const a = h.manager('A');
    if (ownEpochKnown) {
      await a.tryAcquire();
      a.drop('fence_failed');
      h.store.failNext('tryAcquire', lost); // an unrelated failure: the row it sees next is still the known epoch
      await a.tryAcquire();
    } else {
      await h.manager('A').tryAcquire(); // the twin
    }
    h.at(1_000);
    expect(await a.tryAcquire()).toBe(false);
    expect(h.logs('leader_unseen_acquire_released')).toEqual([]);
    expect((await h.store.listEvents(NAME)).filter((e) => e.event === 'released')).toEqual([]);
  });

  it('the hand-back itself fails: stays follower (logged), and the next try hands back and leads', async () => {
    const h = harness();
    const a = h.manager('A');
    loseNextAcquireReply(h);
    await a.tryAcquire();
    h.store.failNext('release', lost);
    h.at(1_000);
    expect(await a.tryAcquire()).toBe(false);
    expect(h.logs('leader_acquire_failed', 'A').at(-1)).toMatchObject({ sql_error: { message: 'Query read timeout' } });
    h.at(2_000);
    expect(await a.tryAcquire()).toBe(true);
    expect(await events(h)).toEqual(['acquired:A#1', 'released:A#1', 'acquired:A#2']);
  });
});

describe('release waits for the calls to fit the share of the partitions kept (releaseWhenFits)', () => {
  // `out` calls in flight when the partition stops counting, none of which the kept share allows: the release
  // (graceful, or after a step-down) hands the row back only once they ended; meanwhile the lease is held (renewed when
  // due) and no one else acquires. Calls that never end: a graceful release steps down past its bound without
  // releasing, a step-down's release gives up when the row may no longer be ours — the row expires either way.
  it.each<[string, 'release' | 'step-down', number, boolean]>([
    ['graceful, fits at once', 'release', 0, true],
    ['graceful, waits for 2 calls to end', 'release', 2, true],
    ['graceful, waits for 3 calls', 'release', 3, true],
    ['graceful, calls never end: stepped down at the bound, the row expires', 'release', 5, false],
    ['after a step-down, waits for 2 calls to end', 'step-down', 2, true],
    ['after a step-down, calls never end: the row expires', 'step-down', 5, false],
  ])('%s', async (_, how, out, callsEnd) => {
    const h = harness();
    const a = h.manager('A');
    const b = h.manager('B');
    let inFlight = out;
    let releasing = false;
    a.releaseWhenFits(() => {
      releasing ||= a.releasing;
      return inFlight === 0;
    }, 2_500);
    await a.tryAcquireOrRenew();
    let settled = false;
    const done = (how === 'release' ? a.release() : Promise.resolve(a.drop('renew_error'))).finally(() => (settled = true));
    for (let step = 1; step <= 30 && (inFlight > 0 || !settled); step++) {
      await settle();
      if (callsEnd && inFlight > 0 && step % 2 === 0) inFlight--; // one call ends every 200 ms
      else if (inFlight > 0) expect(await b.tryAcquire()).toBe(false); // nobody takes the row meanwhile
      h.at(step * 100);
      await settle();
    }
    if (!callsEnd) for (let t = 4_000; t <= 70_000; t += 1_000) { h.at(t); await settle(); } // past the row's expiry
    await done;
    await settle();
    const events = (await h.store.listEvents(NAME)).map((e) => e.event);
    expect(events.includes('released')).toBe(callsEnd);
    if (callsEnd && how === 'release' && out > 0) expect(releasing).toBe(true); // it counted for no share meanwhile
    if (callsEnd) expect(await b.tryAcquire()).toBe(true); // released: taken at once
    if (!callsEnd && how === 'release') expect(h.logs('leader_release_share_wait', 'A')).toHaveLength(1);
  });
});
