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

  it('a call answered 2xx during the fault and sent again → resend_after_2xx (even with a reason elsewhere)', () => {
    const base = clean();
    // Attempt 1 of A answered 2xx at 9 100; a fault starting within 2 s after it (so the answer was in flight).
    const h = withStartAt({ ...base, tickMs: 1_000, faults: [...base.faults, leaseLock({ startedAt: 10_000, endedAt: 11_500 })] }, 12_000);
    expect(checksOf(h)).toContain('resend_after_2xx');
  });

  // Found by a lease_lock-only run on a starved process: the provider answered 200 in 19 ms, the caller read it
  // only after its 800-ms timeout had fired (the attempt says timeout), and retried. Not a result thrown away.
  it('a 2xx the executor never read (attempt closed as a timeout) and its retry → no resend_after_2xx', () => {
    const base = clean();
    const attempts = base.attempts.map((a) => a.intentId === base.attempts[0]!.intentId && a.attemptNo === 1
      ? { ...a, outcome: 'retryable_error', error: 'timeout after 800 ms' } : a);
    const h = withStartAt({ ...base, attempts, tickMs: 1_000, faults: [...base.faults, leaseLock({ startedAt: 10_000, endedAt: 11_500 })] }, 12_000);
    expect(checksOf(h)).not.toContain('resend_after_2xx');
  });
});
