// The rules on the campaign's operator actions and provider limits (operatorActions.ts; docs/reliability.md):
//  - paused_sent: nothing is sent while the cluster is paused. From one SCHEDULE_REFRESH_INTERVAL_MS after a pause
//    was answered (every leader reads the flag at each refresh) until its resume was requested, no request reaches the
//    provider that was sent after that deadline; "sent" is the provider's arrival less SEND_SLACK_MS (loopback
//    delivery and the provider's own event-loop lag). A call whose process was stopped (a stop/pause fault) between
//    its start and its arrival is counted, not failed: it was started before and written late (docs: known limits).
//  - drain: a cluster drain reaches every partition: no partition of the count at its answer starts anything under
//    the epoch it had then, from one refresh interval (+ the slack) after the answer (after its leader woke, when a
//    stop or pause fault froze it meanwhile).
//  - in_flight: the provider never has more than PROVIDER_MAX_IN_FLIGHT requests at once (M; below the partition count
//    P of the moment, P: the documented bound), from its own record of each request's arrival and end (its answer
//    written, or the caller gone). A request started before a stop of its
//    process and written after it is counted apart (the stop-before-send window: its leader was frozen, not sending).
//  - rate: no second holds more arrivals than PROVIDER_RATE_LIMIT_PER_SEC allows (rateBound) — except a second in
//    which a stopped process woke up (it writes at once what it had granted before the stop).
//  The documented slack of both: a process that lost a lease under it (expired, not released) may still have calls
//  of its other partitions out, granted under the lost partitions' share, beside the next leader's: the cap may be
//  exceeded by at most the share of the partitions it lost (leaseLossSlack; counted, not failed).
// Pure: every violation carries its evidence.
import type { FaultRecord } from './faults.js';
import type { AuditRow, History, OperatorAction } from './history.js';
import type { ProviderRecord } from './providerProcess.js';
import { partitionInFlightQuota } from '../../src/provider/guardShare.js';

/** Arrival at the provider minus this is the latest a request can have been sent (loopback, the provider's lag). */
export const SEND_SLACK_MS = 100;
/** Default SCHEDULE_REFRESH_INTERVAL_MS for histories recorded without it (the campaign's hosts). */
const DEFAULT_REFRESH_MS = 200;

const ok = (a: OperatorAction) => a.status !== null && a.status >= 200 && a.status < 300;
const byRequest = (actions: readonly OperatorAction[] | undefined) => [...(actions ?? [])].sort((a, b) => a.requestedAt - b.requestedAt);

/** A span in which the cluster was surely paused for sending: from a pause's answer + the reaction time until the
 *  next resume was requested (the earliest that resume can have taken effect). */
export interface PauseWindow { pausedAt: number; from: number; until: number; via: string | null; viaPartitions: number | null }

export function pauseWindows(actions: readonly OperatorAction[] | undefined, reactionMs: number): PauseWindow[] {
  const out: PauseWindow[] = [];
  let open: OperatorAction | null = null;
  for (const a of byRequest(actions)) {
    if (a.action === 'pause' && ok(a) && open === null) open = a;
    else if (a.action === 'resume' && open !== null) {
      out.push({ pausedAt: open.answeredAt!, from: open.answeredAt! + reactionMs, until: a.requestedAt, via: open.via, viaPartitions: open.viaPartitions });
      open = null;
    }
  }
  if (open) out.push({ pausedAt: open.answeredAt!, from: open.answeredAt! + reactionMs, until: Number.POSITIVE_INFINITY, via: open.via, viaPartitions: open.viaPartitions });
  return out;
}

/** Spans in which execution may be halted by the operator: from a pause's request (answered or not) to the answer of
 *  the first resume answered 2xx after it. The liveness rules measure a resume across such a span from its end. */
export function pauseHalts(actions: readonly OperatorAction[] | undefined): { from: number; until: number }[] {
  const out: { from: number; until: number }[] = [];
  let from: number | null = null;
  for (const a of byRequest(actions)) {
    if (a.action === 'pause' && from === null) from = a.requestedAt;
    else if (a.action === 'resume' && from !== null && ok(a)) {
      out.push({ from, until: a.answeredAt! });
      from = null;
    }
  }
  if (from !== null) out.push({ from, until: Number.POSITIVE_INFINITY });
  return out;
}

/** Spans in which a drain halts execution (docs/operations.md: from the drain to the next tick after its completion):
 *  from a drain answered 2xx's request to the last handover its leaders completed within `withinMs` after it (audit
 *  `complete_handover`), else its answer. A drain whose answer failed or never came (a store error after some partitions'
 *  requests were recorded, a reply lost) halts too where handovers completed after it: it took effect. The liveness rules
 *  measure a resume across one from its end. */
export function drainHalts(actions: readonly OperatorAction[] | undefined, audit: readonly AuditRow[], withinMs: number): { from: number; until: number }[] {
  return byRequest(actions).filter((a) => a.action === 'drain').flatMap((d) => {
    const done = audit.filter((x) => x.action === 'complete_handover' && x.atMs >= d.requestedAt && x.atMs <= d.requestedAt + withinMs).map((x) => x.atMs);
    if (!ok(d) && done.length === 0) return [];
    return [{ from: d.requestedAt, until: Math.max(d.answeredAt ?? d.requestedAt, ...done) }];
  });
}

/** Was `holderId`'s process stopped (a stop or pause fault) at some moment of [fromMs, toMs]? */
const stoppedBetween = (faults: readonly FaultRecord[], holderId: string, fromMs: number, toMs: number) =>
  faults.some((f) => (f.kind === 'stop' || f.kind === 'pause') && f.victim === holderId && f.startedAt <= toMs && f.endedAt >= fromMs);

export interface OperatorStats {
  pauses: number;
  /** Pauses and drains sent through an instance whose EXECUTOR_PARTITIONS is below the hosts' largest. */
  pausesViaSmaller: number;
  drains: number;
  drainsViaSmaller: number;
  /** Requests that arrived in a pause window but were started before it by a process stopped meanwhile (allowed). */
  pausedSendsAfterStop: number;
  /** The latest arrival after a pause was answered (before its resume), ms: the calls still in flight then. */
  lastArrivalAfterPauseMs: number | null;
  slowPhases: number;
  maxInFlight: number;
  /** PROVIDER_MAX_IN_FLIGHT (0: none). */
  inFlightCap: number;
  /** Excursions above the cap made only by requests written late by a process stopped meanwhile (allowed). */
  inFlightLateExcursions: number;
  /** Excursions above the cap within the documented slack of a lease lost under its leader (allowed). */
  inFlightSlackExcursions: number;
  busiestSecond: number;
  /** rateBound of PROVIDER_RATE_LIMIT_PER_SEC (0: none). */
  busiestSecondBound: number;
}

type Fail = (check: string, message: string) => void;
type Attempt = History['attempts'][number];

export function pausedSends(provider: readonly ProviderRecord[], attempts: ReadonlyMap<string, Attempt>, faults: readonly FaultRecord[],
  windows: readonly PauseWindow[], fail: Fail): { excused: number; lastAfterPauseMs: number | null } {
  let excused = 0;
  let last: number | null = null;
  for (const w of windows) {
    for (const p of provider) {
      if (p.arrivedAt < w.pausedAt || p.arrivedAt >= w.until) continue;
      last = Math.max(last ?? 0, p.arrivedAt - w.pausedAt);
      if (p.arrivedAt - SEND_SLACK_MS <= w.from) continue;
      const a = attempts.get(`${p.key}#${p.attemptNo}`);
      if (a && stoppedBetween(faults, a.holderId, a.startedAtMs ?? p.arrivedAt, p.arrivedAt)) {
        excused++;
        continue;
      }
      fail('paused_sent', `provider call ${p.key}#${p.attemptNo} (partition ${p.partition ?? 0}, epoch ${p.epoch}) arrived ${Math.round(p.arrivedAt - w.pausedAt)} ms ` +
        `after the pause via ${w.via ?? '?'} (EXECUTOR_PARTITIONS ${w.viaPartitions ?? '?'}) was answered, ${Math.round(p.arrivedAt - w.from)} ms past the reaction time, ` +
        `before the resume was requested${w.until === Number.POSITIVE_INFINITY ? ' (never)' : ` (${Math.round(w.until - p.arrivedAt)} ms later)`}; ` +
        `its attempt started ${a?.startedAtMs === undefined ? 'at an unknown time' : `${Math.round(a.startedAtMs - w.pausedAt)} ms after the pause answer`} by ${a?.holderId ?? '?'}`);
    }
  }
  return { excused, lastAfterPauseMs: last };
}

/** When a request stopped being in flight at the provider: its recorded end, else its planned answer. */
const endOf = (p: ProviderRecord) => p.endedAt ?? p.arrivedAt + p.delayMs;

/** The provider's concurrency over time against `cap` (0: no cap): one violation per excursion above it. Requests in
 *  `late` (started before a stop of their process, written after it) count for the maximum but not against the cap:
 *  an excursion only they make is counted in `lateExcursions`. */
export function inFlightPeaks(provider: readonly ProviderRecord[], capOf: number | ((atMs: number) => number), fail: Fail,
  late: ReadonlySet<ProviderRecord> = new Set(), slackAt: (open: readonly ProviderRecord[]) => number = () => 0):
  { max: number; lateExcursions: number; slackExcursions: number } {
  const edges = provider.flatMap((p) => [{ t: p.arrivedAt, d: 1, p }, { t: endOf(p), d: -1, p }])
    .sort((a, b) => a.t - b.t || a.d - b.d); // an end before an arrival at the same millisecond
  const open = new Set<ProviderRecord>();
  let max = 0, lateExcursions = 0, slackExcursions = 0, judged = 0;
  let reported = false, counted = false, countedLate = false; // within the current excursion above the cap
  for (const e of edges) {
    const cap = typeof capOf === 'number' ? capOf : capOf(e.t);
    if (e.d < 0) open.delete(e.p);
    else open.add(e.p);
    if (!late.has(e.p)) judged += e.d;
    max = Math.max(max, open.size);
    if (cap <= 0) continue;
    if (e.d > 0 && judged > cap) {
      const judgedOpen = [...open].filter((p) => !late.has(p));
      if (judged > cap + slackAt(judgedOpen)) {
        if (!reported) {
          const calls = judgedOpen.map((p) => `${p.key.slice(-6)}#${p.attemptNo} p${p.partition ?? 0}/e${p.epoch} ${Math.round(p.arrivedAt - e.t)}…${Math.round(endOf(p) - e.t)}`);
          const bound = typeof capOf === 'number' ? `PROVIDER_MAX_IN_FLIGHT ${cap}` : `the bound ${cap} (PROVIDER_MAX_IN_FLIGHT, or the partition count where higher)`;
          fail('in_flight', `${judged} requests in flight at the provider at ${new Date(e.t).toISOString()} > ${bound}: ${calls.join(', ')} (ms from then)`);
        }
        reported = true;
      } else if (!counted) {
        slackExcursions++;
        counted = true;
      }
    }
    if (e.d > 0 && open.size > cap && judged <= cap && !countedLate) {
      lateExcursions++;
      countedLate = true;
    }
    if (judged <= cap) reported = counted = false;
    if (open.size <= cap) countedLate = false;
  }
  return { max, lateExcursions, slackExcursions };
}

/** The documented slack at a moment, given the calls out then: for each partition with a call out under epoch e, if
 *  an earlier epoch of its lease ended by expiry (no release) under another holder that still has calls out, that
 *  partition's share of the cap (`quota(k)`) may be out twice. `holder(lease, epoch)`, `released(lease, epoch)` from
 *  the lease events; `holderOfCall`: the writer of a call's attempt. */
export function leaseLossSlack(leaseOf: (partition: number) => string, holder: (lease: string, epoch: number) => string | undefined,
  released: (lease: string, epoch: number) => boolean, holderOfCall: (p: ProviderRecord) => string | undefined, quota: (partition: number) => number) {
  return (open: readonly ProviderRecord[]): number => {
    const out = new Set(open.map(holderOfCall));
    const newest = new Map<number, number>();
    for (const p of open) newest.set(p.partition ?? 0, Math.max(newest.get(p.partition ?? 0) ?? 0, p.epoch));
    let slack = 0;
    for (const [k, e] of newest) {
      const lease = leaseOf(k);
      for (let ep = e - 1; ep >= 1; ep--) {
        const h = holder(lease, ep);
        if (h !== undefined && h !== holder(lease, e) && !released(lease, ep) && out.has(h)) {
          slack += quota(k);
          break;
        }
      }
    }
    return slack;
  };
}

/** Requests written late by a process stopped (a stop or pause fault) between their attempt's start and arrival. */
export function writtenLate(provider: readonly ProviderRecord[], attempts: ReadonlyMap<string, Attempt>, faults: readonly FaultRecord[]): Set<ProviderRecord> {
  return new Set(provider.filter((p) => {
    const a = attempts.get(`${p.key}#${p.attemptNo}`);
    return a !== undefined && stoppedBetween(faults, a.holderId, a.startedAtMs ?? p.arrivedAt, p.arrivedAt);
  }));
}

/** How far arrivals may bunch against grants: the provider sees a call after its fenced start write, whose latency
 *  varies (docs/operations.md: the system test allows 0.5 s on a loaded 2-core runner; so does the campaign). */
export const ARRIVAL_SPREAD_S = 0.5;

/** The most arrivals any 1-s window may hold (docs/operations.md, provider limits, bounds): R over the window and the
 *  arrival spread D, plus the bursts of the leading processes — ⌈R ÷ 10⌉ in all, and at least one call each, for up
 *  to `leaders` processes (a new leader's bucket starts empty). */
export const rateBound = (ratePerSec: number, leaders: number) =>
  Math.ceil(ratePerSec * (1 + ARRIVAL_SPREAD_S)) + Math.ceil(ratePerSec / 10) + Math.max(1, leaders);

/** The busiest 1-s window of arrivals against `bound` (0: none); a window in which a stopped process woke is exempt. */
export function busiestSecond(provider: readonly ProviderRecord[], bound: number, wakes: readonly number[], fail: Fail): number {
  const t = provider.map((p) => p.arrivedAt).sort((a, b) => a - b);
  let max = 0;
  let reportedUntil = Number.NEGATIVE_INFINITY;
  for (let i = 0, j = 0; j < t.length; j++) {
    while (t[j]! - t[i]! >= 1_000) i++;
    const n = j - i + 1;
    max = Math.max(max, n);
    if (bound > 0 && n > bound && t[i]! > reportedUntil && !wakes.some((w) => w >= t[i]! - 1_000 && w <= t[j]!)) {
      fail('rate', `${n} provider arrivals within 1 s from ${new Date(t[i]!).toISOString()} > bound ${bound}`);
      reportedUntil = t[j]!;
    }
  }
  return max;
}

/** Faults that hold a process's database traffic and deliver it when they end (a held write commits late). */
const LATE_DELIVERY = new Set(['renew_late', 'proxy_blackhole', 'blackhole_long']);
/** Faults that freeze a process (it reads nothing until it wakes). */
const FROZEN = new Set(['stop', 'pause']);

/** A cluster drain reaches every partition of the count at its answer: none starts under the epoch it had then once
 *  the leaders had a refresh to read it. `countAt` and `leaseOf` map partitions to lease names at a time. */
export function drainEffects(actions: readonly OperatorAction[] | undefined, audit: readonly AuditRow[], reactionMs: number,
  partitionLeases: (atMs: number) => string[], fail: Fail, faults: readonly FaultRecord[] = [], olderRelease: ReadonlySet<string> = new Set()): void {
  // A fault of `kinds` on `holderId`, begun by `beganBy` and still on at `fromMs`, after whose end the start at `atMs`
  // came within the reaction time.
  const heldBy = (kinds: ReadonlySet<string>, holderId: string, beganBy: number, fromMs: number, atMs: number) => faults.some((f) =>
    kinds.has(f.kind) && f.victim === holderId && f.startedAt <= beganBy && f.endedAt >= fromMs && atMs <= f.endedAt + reactionMs);
  // A leader frozen (a stop or pause fault) when the drain came reads it at its first refresh after waking: a start it
  // commits before that reaction time is not late (it may start until it has read the request; it hands over after).
  const woke = (holderId: string, fromMs: number, atMs: number) => heldBy(FROZEN, holderId, atMs, fromMs, atMs);
  // A leader of the previous release judges a drain only when it issues a START (this release's START statement also
  // holds itself in SQL): one it issued while a fault held its traffic commits when that traffic is delivered late.
  const delivered = (holderId: string, fromMs: number, atMs: number) => olderRelease.has(holderId) &&
    heldBy(LATE_DELIVERY, holderId, fromMs + reactionMs, fromMs, atMs);
  for (const d of byRequest(actions).filter((a) => a.action === 'drain' && ok(a))) {
    const names = partitionLeases(d.answeredAt!);
    for (const [p, lease] of names.entries()) {
      const before = audit.filter((a) => (a.leaseName ?? '') === lease && a.atMs <= d.answeredAt!);
      if (!before.length) continue;
      // Handed over between the request and its answer (an answer held up, e.g. by a stop of the instance that took
      // the request): the drain took effect then, and the epoch at the answer is already the next leader's.
      if (before.some((a) => a.action === 'complete_handover' && a.atMs >= d.requestedAt)) continue;
      const epoch = Math.max(...before.map((a) => a.epoch));
      const late = audit.find((a) => (a.leaseName ?? '') === lease && a.action === 'start_attempts' && a.epoch === epoch && a.atMs > d.answeredAt! + reactionMs &&
        !woke(a.holderId, d.requestedAt, a.atMs) && !delivered(a.holderId, d.answeredAt!, a.atMs));
      if (late) {
        fail('drain', `drain via ${d.via ?? '?'} (EXECUTOR_PARTITIONS ${d.viaPartitions ?? '?'}) answered at ${new Date(d.answeredAt!).toISOString()}: partition ${p} (${lease}) ` +
          `still started attempts under epoch ${epoch} ${Math.round(late.atMs - d.answeredAt!)} ms later (audit seq ${late.seq} by ${late.holderId})`);
      }
    }
  }
}

/** Every rule above over one history; `partitionLeases(t)`: the lease names of the partitions of the count at t. */
export function operatorChecks(h: History, attempts: ReadonlyMap<string, Attempt>, partitionLeases: (atMs: number) => string[], fail: Fail,
  countAtEnd = 1): OperatorStats {
  const refreshMs = h.refreshMs ?? DEFAULT_REFRESH_MS;
  const actions = h.operatorActions ?? [];
  const windows = pauseWindows(actions, refreshMs);
  const sent = pausedSends(h.provider, attempts, h.faults, windows, fail);
  drainEffects(actions, h.audit, refreshMs + SEND_SLACK_MS, partitionLeases, fail, h.faults, new Set(h.olderReleaseHolders ?? []));
  const limits = h.providerLimits ?? { maxInFlight: 0, ratePerSec: 0 };
  const widest = Math.max(0, ...actions.map((a) => a.viaPartitions ?? 0), (h.partitionLeases ?? []).length);
  const smaller = (a: OperatorAction) => a.viaPartitions !== null && a.viaPartitions < widest;
  const wakes = h.faults.filter((f) => f.kind === 'stop' || f.kind === 'pause').map((f) => f.endedAt);
  const names = h.partitionLeases ?? [];
  const holders = new Map(h.events.filter((e) => e.event === 'acquired').map((e) => [`${e.leaseName ?? ''}@${e.epoch}`, e.holderId]));
  const releases = new Set(h.events.filter((e) => e.event === 'released').map((e) => `${e.leaseName ?? ''}@${e.epoch}`));
  const slack = leaseLossSlack((k) => (names.length > 1 ? names[k] ?? '?' : h.events[0]?.leaseName ?? ''), (l, e) => holders.get(`${l}@${e}`),
    (l, e) => releases.has(`${l}@${e}`), (p) => attempts.get(`${p.key}#${p.attemptNo}`)?.holderId,
    // the share of partition k: of the count at the end (a change's renumbering is rare beside a lost lease)
    (k) => partitionInFlightQuota(limits.maxInFlight, Math.max(1, countAtEnd), k));
  // PROVIDER_MAX_IN_FLIGHT (M) below the partition count P: a process leading only permit-less partitions still sends
  // one call at a time, so the cluster may have up to P − M more out (docs/operations.md): P is the bound then.
  const m = limits.maxInFlight;
  const capAt = (atMs: number) => (m > 0 ? Math.max(m, partitionLeases(atMs).length) : 0);
  const peaks = inFlightPeaks(h.provider, capAt, fail, writtenLate(h.provider, attempts, h.faults), slack);
  const bound = limits.ratePerSec > 0 ? rateBound(limits.ratePerSec, Math.max(1, names.length)) : 0;
  return {
    pauses: windows.length, drains: actions.filter((a) => a.action === 'drain').length,
    pausesViaSmaller: actions.filter((a) => a.action === 'pause' && smaller(a)).length,
    drainsViaSmaller: actions.filter((a) => a.action === 'drain' && smaller(a)).length,
    pausedSendsAfterStop: sent.excused, lastArrivalAfterPauseMs: sent.lastAfterPauseMs === null ? null : Math.round(sent.lastAfterPauseMs),
    slowPhases: actions.filter((a) => a.action === 'slow').length,
    maxInFlight: peaks.max, inFlightCap: limits.maxInFlight, inFlightLateExcursions: peaks.lateExcursions, inFlightSlackExcursions: peaks.slackExcursions,
    busiestSecond: busiestSecond(h.provider, bound, wakes, fail), busiestSecondBound: bound,
  };
}
