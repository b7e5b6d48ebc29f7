// The operator rules (checkerOperator.ts) as pure functions, each both ways: a history that keeps the rule passes, the
// same history with one thing moved across the line fails under the rule's check, with its evidence.
import { describe, expect, it } from 'vitest';
import {
  busiestSecond, drainEffects, inFlightPeaks, leaseLossSlack, pauseHalts, pausedSends, pauseWindows, rateBound, SEND_SLACK_MS, writtenLate,
} from './checkerOperator.js';
import { check, type History } from './checker.js';
import type { FaultRecord } from './faults.js';
import type { AuditRow, OperatorAction } from './history.js';
import type { ProviderRecord } from './providerProcess.js';

const act = (action: OperatorAction['action'], requestedAt: number, answeredAt: number | null, status: number | null = answeredAt === null ? null : 200,
  viaPartitions = 1): OperatorAction => ({ action, via: 'h-small', viaPartitions, requestedAt, answeredAt, status, detail: '' });
const call = (key: string, arrivedAt: number, endedAt: number, more: Partial<ProviderRecord> = {}): ProviderRecord => ({
  key, attemptNo: 1, epoch: 1, arrivedAt, status: 200, delayMs: endedAt - arrivedAt, staleEpoch: false, partition: 0, endedAt, ...more,
});
const attempt = (key: string, startedAtMs: number, holderId = 'h1') =>
  ({ intentId: key, attemptNo: 1, epoch: 1, holderId, outcome: 'succeeded', httpStatus: 200, error: null, startedAtMs, finishedAtMs: startedAtMs + 50 });
const stop = (victim: string, startedAt: number, endedAt: number): FaultRecord => ({
  kind: 'stop', slot: 0, victim, victimWasLeader: true, epochAtFault: 1, startedAt, endedAt, measureFrom: startedAt, exclude: null, detail: '', resumedAt: null,
});
/** renew_late: the victim's database traffic held from startedAt, delivered at endedAt. */
const held = (victim: string, startedAt: number, endedAt: number): FaultRecord => ({ ...stop(victim, startedAt, endedAt), kind: 'renew_late' });
const collect = () => {
  const v: { check: string; message: string }[] = [];
  return { v, fail: (check: string, message: string) => v.push({ check, message }) };
};

// A pause answered at 10 000 (reaction: refresh 200 ms, so nothing sent after 10 200), its resume requested at 14 000.
const ACTIONS = [act('pause', 9_900, 10_000), act('resume', 14_000, 14_050)];
const REFRESH = 200;

describe('pause windows', () => {
  it('open at the pause answer + the reaction time, close at the resume request; an unanswered pause opens none', () => {
    expect(pauseWindows(ACTIONS, REFRESH)).toEqual([{ pausedAt: 10_000, from: 10_200, until: 14_000, via: 'h-small', viaPartitions: 1 }]);
    expect(pauseWindows([act('pause', 9_900, null), act('resume', 14_000, 14_050)], REFRESH)).toEqual([]);
    expect(pauseWindows([act('pause', 9_900, 10_000)], REFRESH)[0]!.until).toBe(Number.POSITIVE_INFINITY);
  });

  it('halts run from the pause request to the first resume answered 2xx', () => {
    expect(pauseHalts([act('pause', 9_900, null), act('resume', 14_000, null), act('resume', 15_000, 15_100)])).toEqual([{ from: 9_900, until: 15_100 }]);
  });
});

describe('paused_sent: nothing sent from one refresh after the pause was answered until the resume was requested', () => {
  const deadline = 10_000 + REFRESH;
  const cases: { name: string; arrivedAt: number; startedAt: number; faults?: FaultRecord[]; fails: boolean }[] = [
    { name: 'a call in flight at the pause (arrives within the reaction time)', arrivedAt: 10_150, startedAt: 10_140, fails: false },
    { name: 'a call arriving just within the send slack past the deadline', arrivedAt: deadline + SEND_SLACK_MS, startedAt: 10_100, fails: false },
    { name: 'a call sent after the deadline', arrivedAt: deadline + SEND_SLACK_MS + 1, startedAt: 10_250, fails: true },
    { name: 'a call started long after the pause (as through a smaller instance on 51c9d7b)', arrivedAt: 12_000, startedAt: 11_990, fails: true },
    { name: 'a call sent after the resume was requested', arrivedAt: 14_000, startedAt: 13_990, fails: false },
    { name: 'a call started before, written late by a process stopped meanwhile', arrivedAt: 12_500, startedAt: 10_100, faults: [stop('h1', 10_120, 12_480)], fails: false },
    { name: 'a call started by a process that was stopped before it started', arrivedAt: 12_500, startedAt: 12_490, faults: [stop('h1', 10_120, 12_480)], fails: true },
  ];
  it.each(cases)('$name → fails: $fails', ({ arrivedAt, startedAt, faults, fails }) => {
    const { v, fail } = collect();
    const r = pausedSends([call('k', arrivedAt, arrivedAt + 20)], new Map([['k#1', attempt('k', startedAt)]]), faults ?? [], pauseWindows(ACTIONS, REFRESH), fail);
    expect(v.map((x) => x.check)).toEqual(fails ? ['paused_sent'] : []);
    if (fails) expect(v[0]!.message).toMatch(/after the pause via h-small \(EXECUTOR_PARTITIONS 1\) was answered/);
    if (faults && !fails) expect(r.excused).toBe(1);
  });
});

describe('in_flight: the provider never holds more than PROVIDER_MAX_IN_FLIGHT at once', () => {
  // Two partitions' leaders with 2 each (cap 4); the third call of the handed-back partition's next leader overlaps.
  const base = [call('a', 0, 500), call('b', 10, 500), call('c', 20, 300), call('d', 30, 300)];
  const cases: { name: string; extra: ProviderRecord[]; max: number; fails: boolean }[] = [
    { name: 'four at once against a cap of 4', extra: [], max: 4, fails: false },
    { name: 'a fifth that arrives at the moment another ends (the end counts first)', extra: [call('e', 300, 400)], max: 4, fails: false },
    { name: 'a fifth while four are out (a hand-back under a slow provider)', extra: [call('e', 299, 400)], max: 5, fails: true },
    { name: 'a fifth after its caller closed another early (an aborted call ends at its close)', extra: [call('e', 200, 250)], max: 5, fails: true },
    { name: 'a caller that went away ends the call then', extra: [call('f', 100, 150, { aborted: true })], max: 5, fails: true },
  ];
  it.each(cases)('$name → max $max, fails: $fails', ({ extra, max, fails }) => {
    const { v, fail } = collect();
    expect(inFlightPeaks([...base, ...extra], 4, fail).max).toBe(max);
    expect(v.map((x) => x.check)).toEqual(fails ? ['in_flight'] : []);
    if (fails) expect(v[0]!.message).toMatch(/5 requests in flight at the provider .* > PROVIDER_MAX_IN_FLIGHT 4/);
  });

  it('PROVIDER_MAX_IN_FLIGHT 2 below 4 partitions: up to 4 out (a process leading only permit-less partitions sends one); the count down to 1: 2', () => {
    const { v, fail } = collect();
    const capAt = (t: number) => Math.max(2, t < 250 ? 4 : 1);
    expect(inFlightPeaks([call('a', 0, 200), call('b', 10, 200), call('c', 20, 200), call('d', 30, 200)], capAt, fail).max).toBe(4);
    expect(v).toEqual([]);
    inFlightPeaks([call('a', 0, 500), call('b', 10, 500), call('c', 300, 400)], capAt, fail);
    expect(v.map((x) => x.check)).toEqual(['in_flight']);
    expect(v[0]!.message).toMatch(/3 requests in flight at the provider .* > the bound 2 \(PROVIDER_MAX_IN_FLIGHT, or the partition count/);
  });

  it('a record without its end counts until its planned answer; no cap: nothing fails', () => {
    const { v, fail } = collect();
    const open = { ...call('x', 0, 0), endedAt: undefined, delayMs: 1_000 };
    expect(inFlightPeaks([open, ...base], 4, fail).max).toBe(5);
    expect(inFlightPeaks([open, ...base], 0, fail).max).toBe(5);
    expect(v).toHaveLength(1);
  });

  it('a fifth written late by a process stopped between its start and its arrival is counted apart', () => {
    const { v, fail } = collect();
    const fifth = call('e', 299, 400);
    const late = writtenLate([fifth], new Map([['e#1', attempt('e', 100, 'h9')]]), [stop('h9', 150, 280)]);
    expect(late.has(fifth)).toBe(true);
    expect(inFlightPeaks([...base, fifth], 4, fail, late)).toEqual({ max: 5, lateExcursions: 1, slackExcursions: 0 });
    expect(v).toEqual([]);
    expect(writtenLate([fifth], new Map([['e#1', attempt('e', 290, 'h9')]]), [stop('h9', 150, 280)]).size).toBe(0); // started after the stop
  });
});

describe('in_flight: the slack of a lease lost under its leader', () => {
  // Partition 1's epoch 1 (holder A) expired under A, which still has a call of partition 0 out (granted under
  // partition 1's share); B leads partition 1 from epoch 2. Cap 4 over 4 partitions: a share of 1 each.
  const events = { 'L#1@1': 'A', 'L#1@2': 'B', 'L@1': 'A', 'L#2@1': 'C', 'L#3@1': 'D' } as Record<string, string>;
  const holderOf = new Map([['a0', 'A'], ['a1', 'A'], ['b1', 'B'], ['c2', 'C'], ['d3', 'D'], ['b1x', 'B']]);
  const slackOf = (released: boolean) => leaseLossSlack((k) => (k === 0 ? 'L' : `L#${k}`), (l, e) => events[`${l}@${e}`], () => released,
    (p) => holderOf.get(p.key), () => 1);
  const out = [call('a0', 0, 500, { partition: 0 }), call('a1', 10, 500, { partition: 0 }), call('c2', 20, 500, { partition: 2 }), call('d3', 30, 500, { partition: 3 })];
  it.each([
    { name: 'the next leader\'s one call beside the lost share: within the slack', extra: [call('b1', 100, 200, { partition: 1, epoch: 2 })], released: false, fails: false },
    { name: 'the same after a release (a hand-back must wait for its calls)', extra: [call('b1', 100, 200, { partition: 1, epoch: 2 })], released: true, fails: true },
    { name: 'two calls of the next leader: one above the slack', extra: [call('b1', 100, 200, { partition: 1, epoch: 2 }), call('b1x', 110, 200, { partition: 1, epoch: 2 })], released: false, fails: true },
  ])('$name → fails: $fails', ({ extra, released, fails }) => {
    const { v, fail } = collect();
    const r = inFlightPeaks([...out, ...extra], 4, fail, new Set(), slackOf(released));
    expect(v.map((x) => x.check)).toEqual(fails ? ['in_flight'] : []);
    if (!fails) expect(r.slackExcursions).toBe(1);
  });
});

describe('rate: the busiest second against the rate limit', () => {
  const arrivals = (n: number, from: number, spanMs: number) => Array.from({ length: n }, (_, i) => call(`r${from}-${i}`, from + (i * spanMs) / n, from + (i * spanMs) / n + 10));
  const bound = rateBound(20, 4); // 30 + 2 + 4
  it.each([
    { name: 'at the bound', n: bound, wakes: [], fails: false },
    { name: 'one above it', n: bound + 1, wakes: [], fails: true },
    { name: 'one above it in a second a stopped process woke in', n: bound + 1, wakes: [5_300], fails: false },
  ])('$name → fails: $fails', ({ n, wakes, fails }) => {
    const { v, fail } = collect();
    expect(busiestSecond(arrivals(n, 5_000, 900), bound, wakes, fail)).toBe(n);
    expect(v.map((x) => x.check)).toEqual(fails ? ['rate'] : []);
  });
  it('is R over 1 s + the 0.5 s arrival spread, ⌈R ÷ 10⌉ of bursts and one call per leading process', () => expect(rateBound(20, 4)).toBe(36));
});

describe('drain: a cluster drain reaches every partition of the count', () => {
  const row = (seq: number, lease: string, epoch: number, atMs: number, holderId = 'h'): AuditRow =>
    ({ seq, epoch, holderId, action: 'start_attempts', atMs, leaseName: lease });
  const leases = () => ['L', 'L#1'];
  const drained = [act('drain', 9_900, 10_000, 202, 1)];
  it.each([
    { name: 'both partitions start under new epochs after the drain', late: row(5, 'L#1', 2, 11_000), fails: false },
    { name: 'a start under the old epoch within the reaction time', late: row(5, 'L#1', 1, 10_250), fails: false },
    { name: 'partition 1 still starts under its old epoch (drained through a smaller instance)', late: row(5, 'L#1', 1, 11_000), fails: true },
    { name: 'a leader frozen at the drain starts just after waking (before its first refresh)', late: row(5, 'L#1', 1, 11_000, 'h9'),
      faults: [stop('h9', 9_800, 10_800)], fails: false },
    { name: 'a leader frozen at the drain still starts a refresh after waking', late: row(5, 'L#1', 1, 11_200, 'h9'),
      faults: [stop('h9', 9_800, 10_800)], fails: true },
    // The previous release judges a drain only when it issues a START: one issued while its traffic was held commits late.
    { name: 'an older release\'s START held by a fault until after the drain commits when delivered', late: row(5, 'L#1', 1, 11_000, 'h9'),
      faults: [held('h9', 9_650, 10_990)], older: ['h9'], fails: false },
    { name: 'this release\'s START under the same fault (its statement holds itself)', late: row(5, 'L#1', 1, 11_000, 'h9'),
      faults: [held('h9', 9_650, 10_990)], fails: true },
    { name: 'an older release\'s START a refresh after the held traffic was delivered', late: row(5, 'L#1', 1, 11_200, 'h9'),
      faults: [held('h9', 9_650, 10_850)], older: ['h9'], fails: true },
    { name: 'an older release\'s START with no fault on its traffic', late: row(5, 'L#1', 1, 11_000, 'h9'), older: ['h9'], fails: true },
    // An answer held up after the handover completed (the instance that took the request stopped meanwhile): the
    // epoch at the answer is already the next leader's, which may start.
    { name: 'partition 1 handed over before the drain\'s late answer; its next epoch starts', late: row(5, 'L#1', 2, 11_000),
      extra: [{ ...row(4, 'L#1', 1, 9_950), action: 'complete_handover' }, row(4, 'L#1', 2, 9_990)], fails: false },
    { name: 'a handover before the drain was requested does not count', late: row(5, 'L#1', 2, 11_000),
      extra: [{ ...row(4, 'L#1', 1, 9_850), action: 'complete_handover' }, row(4, 'L#1', 2, 9_890)], fails: true },
  ])('$name → fails: $fails', ({ late, fails, faults, older, extra }: { late: AuditRow; fails: boolean; faults?: FaultRecord[]; older?: string[]; extra?: AuditRow[] }) => {
    const { v, fail } = collect();
    drainEffects(drained, [row(1, 'L', 1, 9_000), row(2, 'L#1', 1, 9_000), ...(extra ?? []), row(3, 'L', 2, 10_900), late], REFRESH + SEND_SLACK_MS, leases, fail,
      faults ?? [], new Set(older ?? []));
    expect(v.map((x) => x.check)).toEqual(fails ? ['drain'] : []);
    if (fails) expect(v[0]!.message).toMatch(/partition 1 \(L#1\) still started attempts under epoch [12] 1[02]00 ms later/);
  });
});

describe('the checker with operator actions', () => {
  // One partition: h1 leads from epoch 1; a kill at 9 000 would be resumed by h2 at 10 500, but a pause from 9 500
  // (answered 9 600) to the resume answered at 14 050 halted it: the resume is measured from the resume's answer.
  const history = (resumeAt: number): History => ({
    leaseMs: 2_000, resumeBound: 1.7, tickMs: 1_000, refreshMs: REFRESH, partitionLeases: ['L'], providerLimits: { maxInFlight: 4, ratePerSec: 0 },
    operatorActions: [act('pause', 9_500, 9_600), act('resume', 14_000, 14_050)],
    events: [{ seq: 1, epoch: 1, holderId: 'h1', event: 'acquired', leaseName: 'L' }, { seq: 3, epoch: 2, holderId: 'h2', event: 'acquired', leaseName: 'L' }],
    audit: [{ seq: 2, epoch: 1, holderId: 'h1', action: 'start_attempts', atMs: 8_000, leaseName: 'L' },
      { seq: 4, epoch: 2, holderId: 'h2', action: 'start_attempts', atMs: resumeAt, leaseName: 'L' }],
    intents: [], attempts: [], provider: [], accepted: [], replays: [], cancels: [], leaderless: [],
    faults: [{ kind: 'kill', slot: 0, victim: 'h1', victimWasLeader: true, epochAtFault: 1, startedAt: 9_000, endedAt: 9_000, measureFrom: 9_000,
      exclude: { holderId: 'h1', until: Number.POSITIVE_INFINITY }, detail: 'h1', resumedAt: null }],
  });
  it('measures a fault\'s resume across a pause from the resume\'s answer', () => {
    expect(check(history(15_000)).violations).toEqual([]);
    const late = check(history(14_050 + 3_500)).violations;
    expect(late.map((x) => x.check)).toEqual(['liveness']);
    expect(late[0]!.message).toMatch(/after the resume of the pause requested at .* was answered/);
  });

  // A drain (requested 9 400, answered 9 500, its handover completed 10 800) halts execution like a pause: a kill's
  // resume across it is measured from the completion; a drain begun once the resume was already overdue excuses nothing.
  const drained = (drainAt: number, resumeAt: number): History => {
    const x = history(resumeAt);
    x.operatorActions = [act('drain', drainAt, drainAt + 100, 202, 4)];
    x.audit.push({ seq: 5, epoch: 2, holderId: 'h2', action: 'complete_handover', atMs: drainAt + 1_400, leaseName: 'L' });
    return x;
  };
  it.each([
    { name: 'a resume 2.5 s after the drain completed', drainAt: 9_400, resumeAt: 10_800 + 2_500, fails: false },
    { name: 'a resume 3.5 s after the drain completed', drainAt: 9_400, resumeAt: 10_800 + 3_500, fails: true },
    { name: 'a drain begun 4 s after the kill (the bound 3.4 s had passed)', drainAt: 13_000, resumeAt: 14_500, fails: true },
  ])('a fault\'s resume across a drain: $name → fails: $fails', ({ drainAt, resumeAt, fails }) => {
    expect(check(drained(drainAt, resumeAt)).violations.map((v) => v.check)).toEqual(fails ? ['liveness'] : []);
  });

  // Campaign seed 39200: a cluster drain answered 500 (the lease table locked by a fault) after some partitions'
  // requests were recorded: those leaders drained. Its handovers halt execution as an answered drain's do.
  it('a drain answered 5xx whose handovers completed halts execution; one with none halts nothing', () => {
    const failed = drained(9_400, 10_800 + 2_500);
    failed.operatorActions = [act('drain', 9_400, 9_500, 500, 4)];
    expect(check(failed).violations).toEqual([]);
    failed.audit = failed.audit.filter((a) => a.action !== 'complete_handover');
    expect(check(failed).violations.map((v) => v.check)).toEqual(['liveness']);
  });

  it('a pause requested just before a fault\'s resume, which came in time, does not move the measure', () => {
    // The kill at 9 000 is resumed at 10 500 (1.5 s); a pause requested at 10 400 (answered 10 600) and resumed at
    // 14 050 must not re-measure it from the resume (where the partition may no longer exist).
    const x = history(10_500);
    x.operatorActions = [act('pause', 10_400, 10_600), act('resume', 14_000, 14_050)];
    expect(check(x).violations).toEqual([]);
    expect(check(x).stats.resumes[0]!.ms).toBe(1_500);
  });
});
