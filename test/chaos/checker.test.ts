// The chaos checker must catch what it claims to: a clean synthetic history passes, and each corruption
// (the kind a real bug would leave behind) is reported under the right check, with its evidence.
import { describe, expect, it } from 'vitest';
import { check, type History } from './checker.js';
import type { FaultRecord } from './faults.js';

const A = '00000000-0000-0000-0000-00000000000a';
const B = '00000000-0000-0000-0000-00000000000b';

function clean(): History {
  const fault: FaultRecord = {
    kind: 'kill', slot: 0, victim: 'h1', victimWasLeader: true, epochAtFault: 1, startedAt: 10_000, endedAt: 10_500,
    measureFrom: 10_000, exclude: { holderId: 'h1', until: Number.POSITIVE_INFINITY }, detail: 'killed h1', resumedAt: 13_000,
  };
  return {
    leaseMs: 2_000, resumeBound: 2.5,
    events: [
      { seq: 1, epoch: 1, holderId: 'h1', event: 'acquired' },
      { seq: 6, epoch: 2, holderId: 'h2', event: 'acquired' },
    ],
    audit: [
      { seq: 2, epoch: 1, holderId: 'h1', action: 'start_attempts', atMs: 9_000 },
      { seq: 7, epoch: 2, holderId: 'h2', action: 'recover_orphans', atMs: 12_900 },
      { seq: 8, epoch: 2, holderId: 'h2', action: 'start_attempts', atMs: 13_000 },
      { seq: 9, epoch: 2, holderId: 'h2', action: 'complete_attempts', atMs: 13_100 },
    ],
    intents: [
      { intentId: A, key: 'k1', status: 'succeeded', attemptCount: 2 },
      { intentId: B, key: 'k2', status: 'cancelled', attemptCount: 0 },
    ],
    attempts: [
      { intentId: A, attemptNo: 1, epoch: 1, holderId: 'h1', outcome: 'abandoned', httpStatus: null, error: 'abandoned: leader epoch 1 …' },
      { intentId: A, attemptNo: 2, epoch: 2, holderId: 'h2', outcome: 'succeeded', httpStatus: 200, error: null },
    ],
    provider: [
      { key: A, attemptNo: 1, epoch: 1, arrivedAt: 9_100, status: 200, delayMs: 10, staleEpoch: false },
      { key: A, attemptNo: 2, epoch: 2, arrivedAt: 13_050, status: 200, delayMs: 10, staleEpoch: false },
    ],
    accepted: [
      { key: 'k1', n: 1, mode: 'ok', intentId: A, status: 201, at: 8_000 },
      { key: 'k2', n: 2, mode: 'ok', intentId: B, status: 201, at: 8_000 },
    ],
    replays: [{ key: 'k1', expectedId: A, answer: 200, intentId: A }],
    cancels: [{ intentId: B, answer: 200 }],
    faults: [fault],
    leaderless: [],
  };
}

const checksOf = (h: History) => check(h).violations.map((v) => v.check);

describe('chaos checker', () => {
  it('fencing provider: a stale request it acted on is a violation (recomputed per partition from its record); one it refused is counted', () => {
    const stale = (status: number, partition = 0) => {
      const h = clean();
      h.provider = h.provider.map((p) => ({ ...p, fenced: true, partition: 0 }));
      h.provider.push({ key: A, attemptNo: 1, epoch: 1, arrivedAt: 13_060, status, delayMs: 0, staleEpoch: true, fenced: true, partition, refused: status === 409 });
      return check(h);
    };
    const accepted = stale(200);
    expect(accepted.violations.filter((v) => v.check === 'stale_accepted').map((v) => v.message)).toEqual([
      `provider call ${A}#1: epoch 1 < 2 seen for partition 0, answered 200`]);
    expect(accepted.stats).toMatchObject({ staleAccepted: 1, staleRefused: 0 });
    const refused = stale(409);
    expect(refused.violations.map((v) => v.check)).not.toContain('stale_accepted');
    expect(refused.stats).toMatchObject({ staleAccepted: 0, staleRefused: 1 });
    // Epochs are per partition: epoch 1 of partition 1 is not stale after epoch 2 of partition 0.
    expect(stale(200, 1).stats).toMatchObject({ staleAccepted: 0, staleRefused: 0 });
    expect(check(clean()).stats).toMatchObject({ staleAccepted: 0, staleRefused: 0 });
  });

  it('passes a clean history and reports the abandoned re-delivery as a duplicate with its reason', () => {
    const { violations, stats } = check(clean());
    expect(violations).toEqual([]);
    expect(stats.duplicateDeliveries).toBe(1);
    expect(stats.duplicatesByReason).toEqual({ 'abandoned (lease lost / crash mid-attempt)': 1 });
    expect(stats.resumes[0]!.ms).toBe(3_000);
  });

  it('lease: two holders for one epoch, a non-increasing epoch, a write by a non-holder', () => {
    const h = clean();
    h.events.push({ seq: 10, epoch: 2, holderId: 'h3', event: 'acquired' });
    expect(checksOf(h)).toContain('lease');
    const h2 = clean();
    h2.audit[2]!.holderId = 'h1';
    expect(check(h2).violations.some((v) => v.check === 'lease' && v.message.includes('seq 8'))).toBe(true);
  });

  it('fencing: a write of epoch 1 committed after epoch 2 was acquired', () => {
    const h = clean();
    h.audit.push({ seq: 11, epoch: 1, holderId: 'h1', action: 'complete_attempts', atMs: 14_000 });
    expect(check(h).violations).toContainEqual({ check: 'fencing', message: expect.stringContaining('write seq 11') });
  });

  it('attempts: a gap, and attempt_count disagreeing with the rows', () => {
    const h = clean();
    h.attempts[1]!.attemptNo = 3;
    h.provider[1]!.attemptNo = 3;
    expect(checksOf(h)).toContain('attempts');
    const h2 = clean();
    h2.intents[0]!.attemptCount = 3;
    expect(checksOf(h2)).toContain('attempts');
  });

  it('lost: an accepted intent missing or not terminal, a replay creating a second intent, an acknowledged cancel undone', () => {
    const h = clean();
    h.intents[1]!.status = 'in_flight';
    expect(checksOf(h)).toContain('lost');
    const h2 = clean();
    h2.intents.splice(1, 1);
    expect(checksOf(h2)).toContain('lost');
    const h3 = clean();
    h3.replays.push({ key: 'k2', expectedId: B, answer: 201, intentId: A });
    expect(checksOf(h3)).toContain('lost');
    const h4 = clean();
    h4.cancels.push({ intentId: A, answer: 200 });
    expect(checksOf(h4)).toContain('lost');
  });

  it('provider: epoch mismatch, an aborted attempt that was sent, an unexplained duplicate, a success never delivered', () => {
    const h = clean();
    h.provider[1]!.epoch = 1;
    expect(checksOf(h)).toContain('provider');
    const h2 = clean();
    h2.attempts[0]!.outcome = 'aborted';
    expect(checksOf(h2)).toContain('provider');
    const h3 = clean();
    h3.attempts[0]!.outcome = 'permanent_error';
    expect(checksOf(h3)).toContain('provider');
    const h4 = clean();
    h4.provider[1]!.status = 503;
    expect(checksOf(h4)).toContain('provider');
  });

  it('liveness: resuming later than the bound, or never', () => {
    const h = clean();
    h.audit[2]!.atMs = 16_000; // 6 s = 3 × lease > 2.5
    expect(checksOf(h)).toContain('liveness');
    const h2 = clean();
    h2.audit[2]!.holderId = 'h1'; // the killed victim does not count (and is no holder of epoch 2)
    expect(check(h2).violations.some((v) => v.check === 'liveness' && v.message.includes('never resumed'))).toBe(true);
  });
});

describe('issue 13: faults during which the lease stayed valid', () => {
  const leaseLock = (over: Partial<FaultRecord> = {}): FaultRecord => ({
    kind: 'lease_lock', slot: 0, victim: 'h2', victimWasLeader: true, epochAtFault: 2, startedAt: 14_000, endedAt: 15_500,
    measureFrom: 14_000, exclude: null, detail: 'locked the lease table', resumedAt: 16_000, leaseValid: true, ...over,
  });
  const withStartAt = (h: History, atMs: number) => ({ ...h, audit: [...h.audit, { seq: 10, epoch: 2, holderId: 'h2', action: 'start_attempts', atMs }] });

  it('resumed within one tick + 1 s of the end, nothing re-sent: no violation', () => {
    const h = withStartAt({ ...clean(), tickMs: 1_000, faults: [...clean().faults, leaseLock()] }, 16_400);
    expect(checksOf(h)).toEqual([]);
  });

  it('resumed later than one tick + 1 s after the end → lease_valid_resume', () => {
    const h = withStartAt({ ...clean(), tickMs: 1_000, faults: [...clean().faults, leaseLock()] }, 17_600);
    expect(checksOf(h)).toEqual(['lease_valid_resume']);
  });

  it('a later fault starting inside the window before anything started cuts it short: judged by its own rule', () => {
    const second = leaseLock({ startedAt: 16_000, endedAt: 17_000, resumedAt: 17_600 }); // 0.5 s after the first ended
    const h = withStartAt({ ...clean(), tickMs: 1_000, faults: [...clean().faults, leaseLock(), second] }, 17_600);
    expect(checksOf(h)).toEqual([]);
    const late = withStartAt({ ...clean(), tickMs: 1_000, faults: [...clean().faults, leaseLock(), { ...second, startedAt: 17_700, endedAt: 18_000 }] }, 19_500);
    expect(checksOf(late)).toContain('lease_valid_resume'); // not cut: the first window (2 s) passed with nothing started
  });

  it('a call answered 2xx and sent again after its leader released the row → resend_after_2xx (even with a reason elsewhere)', () => {
    const base = clean();
    // Attempt 1 of A answered 2xx at 9 100; epoch 1 was handed back by its holder (not refused by the fence).
    const h = withStartAt({ ...base, tickMs: 1_000, faults: [...base.faults, leaseLock({ startedAt: 10_000, endedAt: 11_500 })] }, 12_000);
    h.events.push({ seq: 5, epoch: 1, holderId: 'h1', event: 'released' });
    expect(checksOf(h)).toContain('resend_after_2xx');
  });

  // Campaign on 2620eb3, every-instance seed 400005: the bridge does not renew, so the lease had 652 ms left when a
  // 1 166-ms lock began 13 ms after a 2xx; the renew waited behind it, the lease expired, the next epoch was acquired
  // as the lock ended, and the fence refused the leader's completion. Excused only when the lock outlasted the lease.
  it('a 2xx sent again after a lease table lock that outlasted the lease (leaseValid false) → excused, counted', () => {
    const base = clean();
    const locked = leaseLock({ victim: 'h1', epochAtFault: 1, startedAt: 9_150, endedAt: 10_300, measureFrom: 9_150, leaseValid: false });
    const h = withStartAt({ ...base, tickMs: 1_000, faults: [locked] }, 12_000);
    const { violations, stats } = check(h);
    expect(violations.map((x) => x.check)).toEqual([]);
    expect(stats.resendsExcusedBy).toEqual({ lease_lock: 1 });
    // The same lock with the lease still valid under it costs nothing: the leader keeps its result.
    expect(checksOf({ ...h, faults: [{ ...locked, leaseValid: true }] })).toContain('resend_after_2xx');
    // … nor may a lock whose expiry was not read (older histories) excuse anything.
    expect(checksOf({ ...h, faults: [{ ...locked, leaseValid: undefined }] })).toContain('resend_after_2xx');
  });

  // Found by a lease_lock-only run on a starved process: the provider answered 200 in 19 ms, the caller read it
  // only after its 800-ms timeout had fired (the attempt says timeout), and retried. Not a result thrown away.
  it('a 2xx the executor never read (attempt closed as a timeout) and its retry → no resend_after_2xx', () => {
    const base = clean();
    const attempts = base.attempts.map((a) => a.intentId === base.attempts[0]!.intentId && a.attemptNo === 1
      ? { ...a, outcome: 'retryable_error', error: 'timeout after 800 ms' } : a);
    const h = withStartAt({ ...base, attempts, tickMs: 1_000, faults: [...base.faults, leaseLock({ startedAt: 10_000, endedAt: 11_500 })] }, 12_000);
    h.events.push({ seq: 5, epoch: 1, holderId: 'h1', event: 'released' });
    expect(checksOf(h)).not.toContain('resend_after_2xx');
  });
});

describe('issue 20: writes that commit with their reply lost cost nothing', () => {
  const C = '00000000-0000-0000-0000-00000000000c';
  // Intent C (one attempt allowed) failed: attempt 1 under epoch 1, started at 9 500, abandoned by epoch 2.
  const withFailed = (provider: boolean): History => {
    const h = clean();
    h.intents.push({ intentId: C, key: 'k3', status: 'failed', attemptCount: 1 });
    h.accepted.push({ key: 'k3', n: 3, mode: 'ok', intentId: C, status: 201, at: 8_000, maxAttempts: 1 });
    h.attempts.push({ intentId: C, attemptNo: 1, epoch: 1, holderId: 'h1', outcome: 'abandoned', httpStatus: null, error: 'abandoned: …',
      startedAtMs: 9_500, finishedAtMs: 12_900 });
    if (provider) h.provider.push({ key: C, attemptNo: 1, epoch: 1, arrivedAt: 9_510, status: 503, delayMs: 10, staleEpoch: false });
    return h;
  };
  const lostAcquire = (over: Partial<FaultRecord> = {}): FaultRecord => ({
    kind: 'lost_acquire', slot: 1, victim: 'h2', victimWasLeader: false, epochAtFault: 2, startedAt: 14_000, endedAt: 15_000,
    measureFrom: 14_900, exclude: null, detail: 'acquire of h2 committed, reply lost, then reset', resumedAt: null,
    lostReply: { statement: 'acquire', end: 'reset', holderId: 'h2', at: 14_900, endedAt: 15_000 }, ...over,
  });
  const startAt = (h: History, atMs: number): History => ({ ...h, tickMs: 1_000, audit: [...h.audit, { seq: 10, epoch: 2, holderId: 'h2', action: 'start_attempts', atMs }] });

  it('re-sent after a 2xx: allowed only when the fence refused the result (its epoch ended by expiry)', () => {
    const { violations, stats } = check(clean()); // epoch 1's holder was killed: its lease expired
    expect(violations).toEqual([]);
    expect(stats).toMatchObject({ resendsAfter2xx: 0, resendsAfterFenceRefusal: 1, resendsExcusedBy: { kill: 1 } });
    const released = clean();
    released.events.push({ seq: 5, epoch: 1, holderId: 'h1', event: 'released' }); // the leader handed the row back with the 2xx unwritten
    expect(check(released).violations).toEqual([{ check: 'resend_after_2xx', message: expect.stringContaining('released by its holder') }]);
    expect(check(released).stats.resendsAfter2xx).toBe(1);
    // Epoch 1 expired, but its holder was never cut off (here: a completion reply lost, its process and database
    // reachable): it gave its result up, the fence did not refuse it.
    const gaveUp = clean();
    gaveUp.faults = [{ ...gaveUp.faults[0]!, kind: 'lost_complete', exclude: null }];
    expect(check(gaveUp).violations).toContainEqual({ check: 'resend_after_2xx', message: expect.stringContaining('no fault cut h1 off') });
    const elsewhere = clean(); // the kill hit another instance
    elsewhere.faults = [{ ...elsewhere.faults[0]!, victim: 'h9', exclude: null }];
    expect(checksOf(elsewhere)).toContain('resend_after_2xx');
    const sameEpoch = clean(); // sent again by the same leader, its lease never lost
    sameEpoch.attempts[1] = { ...sameEpoch.attempts[1]!, epoch: 1, holderId: 'h1' };
    sameEpoch.provider[1]!.epoch = 1;
    expect(checksOf(sameEpoch)).toContain('resend_after_2xx');
  });

  it('an intent failed with an attempt charged but never sent → charged_not_sent, unless its process was killed while it was out', () => {
    expect(checksOf(withFailed(true))).toEqual([]);
    expect(check(withFailed(true)).stats).toMatchObject({ chargedNotSent: 0, chargedNotSentKilled: 0 });
    const killed = withFailed(false); // h1 killed at 10 000 while attempt 1 was out
    expect(checksOf(killed)).toEqual([]);
    expect(check(killed).stats).toMatchObject({ chargedNotSent: 0, chargedNotSentKilled: 1 });
    const unexplained = withFailed(false);
    unexplained.faults = [{ ...unexplained.faults[0]!, victim: 'h9' }]; // someone else was killed (A's re-send is then unexcused too)
    expect(check(unexplained).violations).toContainEqual({ check: 'charged_not_sent', message: expect.stringContaining(`intent ${C} failed with 1 attempt(s) charged but 0 sent`) });
    const aborted = withFailed(false); // an attempt known never sent is `aborted`: not charged
    aborted.faults = unexplained.faults;
    aborted.attempts[2]!.outcome = 'aborted';
    expect(checksOf(aborted)).not.toContain('charged_not_sent');
    // Cut off from the database while the attempt was out (its epoch expired, not released): the `aborted` could not
    // pass the fence, and the next leader's orphan recovery charged it — allowed, counted apart (CI run, seed 2202).
    const cutOff = withFailed(false);
    cutOff.faults = [{ ...cutOff.faults[0]!, kind: 'proxy_blackhole' }];
    expect(checksOf(cutOff)).not.toContain('charged_not_sent');
    expect(check(cutOff).stats).toMatchObject({ chargedNotSent: 0, chargedNotSentKilled: 1 });
    const cutOffReleased = withFailed(false); // … but not when its holder released that epoch itself
    cutOffReleased.faults = cutOff.faults;
    cutOffReleased.events.push({ seq: 5, epoch: 1, holderId: 'h1', event: 'released' });
    expect(checksOf(cutOffReleased)).toContain('charged_not_sent');
  });

  it('a lost acquire reply (the lease left valid): leaderless for more than one tick + 1 s after it → lease_valid_resume', () => {
    expect(checksOf(startAt({ ...clean(), faults: [...clean().faults, lostAcquire()] }, 16_500))).toEqual([]);
    const slow = check(startAt({ ...clean(), faults: [...clean().faults, lostAcquire()] }, 17_400)); // the row waited out: 2.4 s
    expect(slow.violations).toEqual([{ check: 'lease_valid_resume', message: expect.stringContaining('lost_acquire') }]);
    expect(slow.stats.resumes[1]!.afterEndMs).toBe(2_400);
    // A lost_* fault whose trap never fired lost nothing: judged by the liveness bound only.
    const { lostReply: _, ...notFired } = lostAcquire();
    expect(checksOf(startAt({ ...clean(), faults: [...clean().faults, notFired] }, 17_400))).toEqual([]);
  });
});

describe('issue 22: Azure-like layout, the lock holder cut off from the database', () => {
  const blackhole = (over: Partial<FaultRecord> = {}): FaultRecord => ({
    kind: 'proxy_blackhole', slot: 1, victim: 'h2', victimWasLeader: true, epochAtFault: 2, startedAt: 14_000, endedAt: 17_300,
    measureFrom: 14_000, exclude: null, detail: 'blackholed h2 for 3300 ms', resumedAt: 17_600, ...over,
  });
  const run = (f: FaultRecord, byLength: boolean) => checksOf({
    ...clean(), resumeBound: 1.7, tickMs: 1_000, faults: [...clean().faults, f],
    audit: [...clean().audit, { seq: 10, epoch: 2, holderId: 'h2', action: 'start_attempts', atMs: 17_600 }],
    ...(byLength ? { faultLengthBound: { kinds: ['proxy_blackhole'], slackMs: 2_000 } } : {}),
  });

  it('resumed a tick after a 3.3-s blackhole ended (1.8 × lease): judged by the fault length + tick + slack, not 1.7', () => {
    expect(run(blackhole(), false)).toContain('liveness');
    expect(run(blackhole(), true)).toEqual([]);
    expect(run(blackhole({ victimWasLeader: false }), true)).toContain('liveness'); // a follower cut off: others lead meanwhile
  });
});
