// The invariant checker over one run's recorded history: the database (lease events, fenced-write audit,
// intents, attempts), the provider's own record, the load generator's answers and the fault log. Pure:
// every violation carries its evidence; counts that are allowed but must never be silent go in `stats`.
import { staleWrites } from '../support/fenceChecker.js';
import type { ProviderRecord } from './providerProcess.js';
import { providerEffects } from './checkerEffects.js';
import { staleRequests } from './checkerStale.js';
import { Leases, partitionChecks, resumeAcrossChanges, resumeAfter, type PartitionStats } from './checkerPartitions.js';
import { operatorChecks, type OperatorStats } from './checkerOperator.js';
import { answerLost, type AttemptRow, type History, type Violation } from './history.js';
import type { FaultRecord } from './faults.js';

export type { AttemptRow, AuditRow, History, IntentRow, LeaseEventRow, Violation } from './history.js';

export interface RunStats extends PartitionStats, OperatorStats {
  epochs: number;
  intentsAccepted: number;
  intentsInDb: number;
  byStatus: Record<string, number>;
  attempts: number;
  byOutcome: Record<string, number>;
  providerRequests: number;
  duplicateDeliveries: number;
  duplicatesByReason: Record<string, number>;
  staleEpochArrivals: number;
  /** Stale requests (a newer layout generation, or a newer epoch of their partition, arrived before them: recomputed
   *  from the provider's record, checkerStale.ts) that it acted on, and that it refused (409). Fencing on: accepted = 0. */
  staleAccepted: number;
  staleRefused: number;
  openAttemptsOfCancelled: number;
  replays: number;
  cancelsAcknowledged: number;
  /** [fault kind, resume ms, ratio] per fault; for faults that left the lease valid also the resume after their end. */
  resumes: { kind: string; ms: number | null; ratio: number | null; detail: string; afterEndMs?: number | null }[];
  /** Provider arrivals after a 2xx the executor had received for the intent: violations, and those allowed
   *  because the fence refused that leader's write (its epoch ended by expiry). */
  resendsAfter2xx: number;
  resendsAfterFenceRefusal: number;
  resendsExcusedBy: Record<string, number>;
  /** Attempts charged (not `aborted`) that never reached the provider: unexplained, and with their process
   *  killed or stopped while the attempt was out. */
  chargedNotSent: number;
  chargedNotSentKilled: number;
  worstResumeRatio: number;
}

const TERMINAL = new Set(['succeeded', 'failed', 'cancelled']);
/** Faults that leave the lease valid in the database: a lock that outlasts the statement timeout, a reply lost after
 *  its write committed (an acquire too: the row is then held by an instance that does not know it), a stalled write. */
const leftLeaseValid = (f: FaultRecord) => f.leaseValid === true || f.lostReply !== undefined || f.kind === 'lease_lock' || f.kind === 'complete_stall';
const inc = (m: Record<string, number>, k: string, n = 1) => (m[k] = (m[k] ?? 0) + n);

export function check(h: History): { violations: Violation[]; stats: RunStats } {
  const v: Violation[] = [];
  const fail = (check: string, message: string) => v.push({ check, message });

  // 1. Lease history, per lease (issue 25: every partition's lease row has its own epochs; one lease with P = 1).
  const leases = new Leases(h);
  const acquired = h.events.filter((e) => e.event === 'acquired');
  const holderOf = new Map<string, Map<number, string>>(leases.keys().map((l) => [l, new Map()]));
  const holdersOf = (lease: string) => holderOf.get(lease) ?? holderOf.set(lease, new Map()).get(lease)!;
  for (const lease of leases.keys()) {
    const at = leases.label(lease);
    const holders = holdersOf(lease);
    let prev = 0;
    for (const e of acquired.filter((x) => leases.of(x) === lease)) {
      if (e.epoch <= prev) fail('lease', `${at}acquire seq ${e.seq}: epoch ${e.epoch} not greater than the previous acquire's epoch ${prev}`);
      else if (e.epoch !== prev + 1) fail('lease', `${at}acquire seq ${e.seq}: epoch jumped from ${prev} to ${e.epoch} (an acquire without its event)`);
      prev = Math.max(prev, e.epoch);
      const other = holders.get(e.epoch);
      if (other !== undefined && other !== e.holderId) fail('lease', `${at}epoch ${e.epoch} acquired by both ${other} and ${e.holderId}`);
      holders.set(e.epoch, e.holderId);
    }
  }
  for (const e of h.events.filter((x) => x.event !== 'acquired')) {
    const holder = holdersOf(leases.of(e)).get(e.epoch);
    if (holder !== e.holderId) fail('lease', `${leases.label(leases.of(e))}${e.event} seq ${e.seq}: epoch ${e.epoch} by ${e.holderId}, acquired by ${holder ?? 'nobody'}`);
  }
  // An attempt is read under its intent's partition's lease: its epoch must be one of that lease, held by its writer.
  for (const w of [...h.audit.map((a) => ({ what: `audit seq ${a.seq} (${a.action})`, lease: leases.of(a), ...a })),
    ...h.attempts.map((a) => ({ what: `attempt ${a.intentId}#${a.attemptNo}`, lease: leases.ofAttempt(a), ...a }))]) {
    const holder = holdersOf(w.lease).get(w.epoch);
    if (holder !== w.holderId) fail('lease', `${leases.label(w.lease)}${w.what}: written by ${w.holderId} under epoch ${w.epoch}, whose holder is ${holder ?? 'nobody'}`);
  }

  // 2. Fencing: no write of epoch e committed after a newer epoch of its lease was acquired (commit-ordered sequence).
  for (const lease of leases.keys()) {
    for (const s of staleWrites(h.audit.filter((a) => leases.of(a) === lease).map((a) => ({ seq: a.seq, leaseEpoch: a.epoch, action: a.action })),
      h.events.filter((e) => leases.of(e) === lease).map((e) => ({ seq: e.seq, leaseEpoch: e.epoch, event: e.event })))) fail('fencing', `${leases.label(lease)}${s}`);
  }

  // 3. Attempts: contiguous from 1, no duplicates, attempt_count == rows.
  const attemptsOf = new Map<string, AttemptRow[]>();
  for (const a of h.attempts) attemptsOf.set(a.intentId, [...(attemptsOf.get(a.intentId) ?? []), a]);
  const intentById = new Map(h.intents.map((i) => [i.intentId, i]));
  for (const [id, rows] of attemptsOf) if (!intentById.has(id)) fail('attempts', `attempts for unknown intent ${id}`);
  let openOfCancelled = 0;
  for (const i of h.intents) {
    const rows = (attemptsOf.get(i.intentId) ?? []).sort((a, b) => a.attemptNo - b.attemptNo);
    const nos = rows.map((r) => r.attemptNo);
    if (nos.some((n, k) => n !== k + 1)) fail('attempts', `intent ${i.intentId}: attempt numbers [${nos.join(',')}] are not 1..${nos.length}`);
    if (i.attemptCount !== rows.length) fail('attempts', `intent ${i.intentId}: attempt_count ${i.attemptCount} but ${rows.length} attempt rows`);
    const open = rows.filter((r) => r.outcome === 'started');
    if (i.status === 'cancelled') openOfCancelled += open.length;
    else if (TERMINAL.has(i.status) && open.length) fail('attempts', `intent ${i.intentId} is ${i.status} with attempt(s) ${open.map((r) => r.attemptNo).join(',')} still 'started'`);
    if (i.status === 'succeeded' && rows[rows.length - 1]?.outcome !== 'succeeded') {
      fail('attempts', `intent ${i.intentId} succeeded but its last attempt #${rows.length} is '${rows[rows.length - 1]?.outcome}'`);
    }
  }

  // 4. Nothing lost: every accepted intent exists and is terminal; nothing is left scheduled/in_flight.
  const byKey = new Map(h.intents.filter((i) => i.key).map((i) => [i.key!, i]));
  for (const a of h.accepted) {
    const i = intentById.get(a.intentId);
    if (!i) fail('lost', `key ${a.key} was answered ${a.status} with intent ${a.intentId}, which does not exist`);
    else if (i.key !== a.key) fail('lost', `intent ${a.intentId} answered for key ${a.key} carries key ${i.key}`);
    else if (!TERMINAL.has(i.status)) fail('lost', `accepted intent ${a.intentId} (key ${a.key}) is still ${i.status} after the drain`);
  }
  const acceptedIds = new Set(h.accepted.map((a) => a.intentId));
  for (const i of h.intents) if (!TERMINAL.has(i.status) && !acceptedIds.has(i.intentId)) {
    fail('lost', `intent ${i.intentId} (key ${i.key}, accepted with an unknown answer) is still ${i.status} after the drain`);
  }
  for (const r of h.replays) {
    if (r.answer === 201) fail('lost', `replay of key ${r.key} answered 201 (a second intent ${r.intentId}; the first was ${r.expectedId})`);
    if (r.answer === 200 && r.intentId !== r.expectedId) fail('lost', `replay of key ${r.key} answered intent ${r.intentId}, expected ${r.expectedId}`);
    if (typeof r.answer === 'number' && r.answer >= 400 && r.answer < 500) fail('lost', `replay of key ${r.key} answered ${r.answer}`);
    if (byKey.get(r.key) && byKey.get(r.key)!.intentId !== r.expectedId) fail('lost', `key ${r.key} maps to ${byKey.get(r.key)!.intentId}, answered ${r.expectedId}`);
  }
  for (const c of h.cancels) {
    const st = intentById.get(c.intentId)?.status;
    if (c.answer === 200 && st !== 'cancelled') fail('lost', `cancel of ${c.intentId} answered 200 but the intent ended ${st}`);
  }

  // 5. Provider effects.
  const attemptByNo = new Map(h.attempts.map((a) => [`${a.intentId}#${a.attemptNo}`, a]));
  const deliveries = new Map<string, ProviderRecord[]>();
  for (const p of h.provider) {
    const a = attemptByNo.get(`${p.key}#${p.attemptNo}`);
    if (!a) {
      fail('provider', `provider call ${p.key}#${p.attemptNo} (epoch ${p.epoch}) has no attempt row`);
      continue;
    }
    if (a.epoch !== p.epoch) fail('provider', `provider call ${p.key}#${p.attemptNo} carried epoch ${p.epoch}; its attempt row has epoch ${a.epoch}`);
    if (a.outcome === 'aborted') fail('provider', `attempt ${p.key}#${p.attemptNo} is 'aborted' (never sent) but reached the provider`);
    if (a.httpStatus !== null && a.httpStatus !== p.status) fail('provider', `attempt ${p.key}#${p.attemptNo} recorded HTTP ${a.httpStatus}; the provider answered ${p.status}`);
    if (p.status >= 200 && p.status < 300) deliveries.set(p.key, [...(deliveries.get(p.key) ?? []), p]);
  }
  for (const i of h.intents.filter((x) => x.status === 'succeeded')) {
    const ok = (deliveries.get(i.intentId) ?? []).some((p) => p.attemptNo === i.attemptCount && attemptByNo.get(`${p.key}#${p.attemptNo}`)?.epoch === p.epoch);
    if (!ok) fail('provider', `intent ${i.intentId} succeeded (attempt #${i.attemptCount}) but the provider never answered that attempt 2xx`);
  }
  // A call in flight while its process was SIGSTOPped: on SIGCONT the timeout timer can fire before the
  // answer that arrived meanwhile is read, so the attempt is recorded as a timeout and retried.
  const pausedDuring = (holderId: string, atMs: number) => h.faults.some((f) =>
    (f.kind === 'stop' || f.kind === 'pause') && f.victim === holderId && atMs >= f.startedAt - 1_000 && atMs <= f.endedAt);
  const duplicatesByReason: Record<string, number> = {};
  let duplicateDeliveries = 0;
  for (const [key, ds] of deliveries) {
    if (ds.length < 2) continue;
    duplicateDeliveries += ds.length - 1;
    const outcomes = ds.map((p) => attemptByNo.get(`${key}#${p.attemptNo}`)!);
    if (outcomes.filter((a) => a.outcome === 'succeeded').length > 1) fail('provider', `key ${key}: more than one attempt recorded 'succeeded'`);
    // The deliveries that did not end the intent need a reason; the one recorded 'succeeded' (if any) does not.
    const extra = outcomes.some((a) => a.outcome === 'succeeded') ? outcomes.filter((a) => a.outcome !== 'succeeded') : outcomes.slice(0, -1);
    for (const a of extra) {
      const p = ds.find((d) => d.attemptNo === a.attemptNo)!;
      const reason = a.outcome === 'abandoned' ? 'abandoned (lease lost / crash mid-attempt)'
        : answerLost(a)
          ? `answer lost (${(a.error ?? '').split(/[: ]/)[0]}${pausedDuring(a.holderId, p.arrivedAt) ? ' while its process was stopped' : ', no fault on its process'})`
          : a.outcome === 'started' && intentById.get(key)?.status === 'cancelled' ? 'attempt of a cancelled intent left open by a crash'
            : null;
      if (reason) inc(duplicatesByReason, reason);
      else fail('provider', `key ${key} delivered ${ds.length}× without a reason: attempt #${a.attemptNo} is '${a.outcome}' (${a.error ?? ''})`);
    }
  }

  // 6. Liveness: time from each fault until a fenced start committed (not by the killed/stopped victim); with
  // partitions, on every partition whose leader the fault hit (the slowest of them).
  const tickMs = h.tickMs ?? 1_000;
  const starts = h.audit.filter((a) => a.action === 'start_attempts').sort((a, b) => a.atMs - b.atMs);
  // A change of the partition count (issue 26) active meanwhile paused every partition: then from its completion.
  const resumes: RunStats['resumes'] = h.faults.map((f) => {
    const on = leases.hitBy(f);
    const byLength = h.faultLengthBound && f.victimWasLeader && h.faultLengthBound.kinds.includes(f.kind)
      ? (f.endedAt - f.measureFrom + tickMs + h.faultLengthBound.slackMs) / h.leaseMs : 0;
    const bound = Math.max(h.resumeBoundByKind?.[f.kind] ?? h.resumeBound, byLength);
    const { at, from, change } = resumeAcrossChanges(starts, leases, f, f.measureFrom, on, bound * h.leaseMs);
    const ms = at !== null ? Math.round(at - from) : null;
    const ratio = ms === null ? null : ms / h.leaseMs;
    // A resume measured from a change's completion (the change's own, or a fault's whose recovery it interrupted)
    // that another fault cut into (active at the completion or begun before the resume): that fault's rule judges it.
    // So is one a fault begun before the completion is still allowed to delay, by its own bound from its start
    // (Azure-like: a killed instance's listener locks move only once they expire, whatever the change).
    const interrupted = (f.kind === 'partition_change' || change !== null) && h.faults.some((g) => g !== f && g.kind !== 'partition_change' &&
      g.startedAt < (at ?? Number.POSITIVE_INFINITY) && (Math.max(g.endedAt, g.startedAt) > from ||
        (at !== null && at - g.measureFrom <= (h.resumeBoundByKind?.[g.kind] ?? h.resumeBound) * h.leaseMs)));
    if (!interrupted && (ratio === null || ratio > bound)) {
      fail('liveness', `${f.kind} (${f.detail}, victim leader: ${f.victimWasLeader}${on ? `, partitions ${f.partitions!.join(',')}` : ''}): ` +
        `${ms === null ? 'never resumed' : `resumed after ${ms} ms = ${ratio!.toFixed(2)} × lease`}${change ? ` (after ${change.what})` : ''} > bound ${bound.toFixed(2)}`);
    }
    return { kind: f.kind, ms, ratio, detail: f.detail };
  });

  // 7. Faults that left the lease valid in the database (lease_lock, a lost reply — also of an acquire —, a stalled
  // completion): execution resumes within one tick + 1 s of the fault's end (no leaderless interval longer).
  for (const [k, f] of h.faults.entries()) {
    if (!leftLeaseValid(f)) continue;
    // A fault on the leader of some partitions: each of them resumes (a fault on all of them: any start, as with one).
    const at = resumeAfter(starts, leases, { ...f, exclude: null }, f.endedAt, leases.hitAll(f) ? null : leases.hitBy(f));
    const ms = at !== null ? Math.round(at - f.endedAt) : null;
    // A change of the partition count before that resume released every lease: the liveness rule judges it then.
    if (leases.haltDuring(f.endedAt, at ?? Number.POSITIVE_INFINITY)) continue;
    // A later fault that began inside this one's window, before anything started, cuts it short: the resume of
    // that fault is judged by its own rule (the campaign draws faults one after another, ≈ 1 s apart at times).
    const next = h.faults.filter((x) => x.startedAt > f.endedAt).sort((a, b) => a.startedAt - b.startedAt)[0];
    const cut = next !== undefined && next.startedAt < f.endedAt + tickMs + 1_000 && (at === null || at > next.startedAt);
    if (!cut && (ms === null || ms > tickMs + 1_000)) {
      fail('lease_valid_resume', `${f.kind} (${f.detail}): ${ms === null ? 'never resumed' : `resumed ${ms} ms after the fault ended`} > one tick + 1 s (${tickMs + 1_000} ms)`);
    }
    resumes[k]!.afterEndMs = ms;
  }

  const effects = providerEffects(h, attemptByNo, fail, leases);
  const partitionStats = partitionChecks(h, leases, starts, fail);
  const operatorStats = operatorChecks(h, attemptByNo, (t) => (leases.multi ? leases.leasesAt(t) : (h.partitionLeases ?? []).slice(0, 1)), fail,
    leases.multi ? leases.timeline.final : 1);

  const { staleAccepted, staleRefused } = staleRequests(h.provider, fail); // consumer-side fencing (checkerStale.ts)
  for (const t of h.leaderless) fail('liveness', `no live leader for 10 s up to ${new Date(t).toISOString()} (between faults)`);

  const byStatus: Record<string, number> = {};
  for (const i of h.intents) inc(byStatus, i.status);
  const byOutcome: Record<string, number> = {};
  for (const a of h.attempts) inc(byOutcome, a.outcome);
  return {
    violations: v,
    stats: {
      epochs: acquired.length, intentsAccepted: h.accepted.length, intentsInDb: h.intents.length, byStatus,
      attempts: h.attempts.length, byOutcome, providerRequests: h.provider.length, duplicateDeliveries, duplicatesByReason,
      staleEpochArrivals: h.provider.filter((p) => p.staleEpoch).length, staleAccepted, staleRefused, openAttemptsOfCancelled: openOfCancelled, resumes, ...effects, ...partitionStats, ...operatorStats,
      replays: h.replays.length, cancelsAcknowledged: h.cancels.filter((c) => c.answer === 200).length,
      worstResumeRatio: Math.max(0, ...resumes.map((r) => r.ratio ?? Number.POSITIVE_INFINITY)),
    },
  };
}
