// Issue 20's rules on provider effects: a write may commit with its reply lost, and that must cost nothing.
//  - resend_after_2xx: no provider arrival for an intent after a 2xx the executor received for it, unless the
//    fence refused that leader's write: its epoch ended by expiry, never by its own release (a leader hands the row
//    back only with its results written), while it could not keep the lease — it was killed or stopped, or cut off
//    from the database (FENCE_EXCUSES) between a lease before the 2xx and the re-send. A leader that can reach the
//    database (a lost reply, a locked lease table: the lease stays valid) keeps its results, unless the lock outlasted
//    its lease (the injector reads the expiry under the lock: leaseValid false; its renew waited behind the lock).
//    A completion stalled on locked intent rows holds the fence's share lock on the lease row, so the leader's renewals wait behind it: with
//    the campaign's 2-s lease a stall past the settle window can cost the lease; counted apart (by excusing kind).
//  - charged_not_sent: no intent fails with fewer provider arrivals than the attempts charged to it (every
//    outcome but `aborted`), unless a process was killed or stopped while that attempt was out, or the attempt was
//    abandoned after its epoch expired while a fault cut its leader off (the fence refused its `aborted`).
import { answerLost, type AttemptRow, type History } from './history.js';
import type { ProviderRecord } from './providerProcess.js';
import type { FaultRecord } from './faults.js';
import { Leases } from './checkerPartitions.js';

export interface EffectStats {
  resendsAfter2xx: number;
  resendsAfterFenceRefusal: number;
  /** The same, by the kind of the fault that cut the leader off. */
  resendsExcusedBy: Record<string, number>;
  chargedNotSent: number;
  chargedNotSentKilled: number;
}

const ok2xx = (p: ProviderRecord) => p.status >= 200 && p.status < 300;

/** Faults that can cost their victim (null: everyone) its lease whatever it does: dead, stopped, or no database. */
const FENCE_EXCUSES = new Set(['kill', 'stop', 'pause', 'terminate', 'proxy_drop', 'proxy_blackhole', 'blackhole_long', 'renew_late', 'pg_restart',
  'complete_stall']);

/** Did this fault cost its victim the lease? A lease table lock only when it outlasted the lease (see faults.ts). */
const cutsOff = (f: FaultRecord) => FENCE_EXCUSES.has(f.kind) || (f.kind === 'lease_lock' && f.leaseValid === false);

/** Faults on the database itself: with partitions (issue 25) they reach every partition's leader they hit, not only
 *  the instance drawn as their victim (a stall locks every intent in flight, a lock holds every lease row). */
const DATABASE_WIDE = new Set(['lease_lock', 'complete_stall', 'pg_restart']);

/** Did the fault reach the leader that wrote this attempt? */
const reaches = (f: FaultRecord, a: AttemptRow, leases: Leases) => f.victim === null || f.victim === a.holderId
  || (DATABASE_WIDE.has(f.kind) && f.partitions !== undefined && f.partitions.includes(leases.partitionOf(a) ?? -1));

export function providerEffects(h: History, attemptByNo: Map<string, AttemptRow>, fail: (check: string, message: string) => void,
  leases: Leases = new Leases(h)): EffectStats {
  const stats: EffectStats = { resendsAfter2xx: 0, resendsAfterFenceRefusal: 0, resendsExcusedBy: {}, chargedNotSent: 0, chargedNotSentKilled: 0 };
  // Epochs released by their holders, per lease (issue 25: epochs of different partitions are unrelated numbers).
  const releasedSet = new Set(h.events.filter((e) => e.event === 'released').map((e) => `${leases.of(e)}|${e.epoch}`));
  const released = { has: (a: AttemptRow) => releasedSet.has(`${leases.ofAttempt(a)}|${a.epoch}`) };
  const byKey = new Map<string, ProviderRecord[]>();
  for (const p of h.provider) byKey.set(p.key, [...(byKey.get(p.key) ?? []), p]);

  for (const [key, ps] of byKey) {
    // A 2xx the executor never read (its attempt closed as a client-side timeout or connection error: the answer
    // came after the call's deadline, e.g. on a starved process) was not returned to it; its retry is by design.
    const got = ps.filter((p) => ok2xx(p) && !answerLost(attemptByNo.get(`${key}#${p.attemptNo}`))).sort((a, b) => a.attemptNo - b.attemptNo)[0];
    const again = got && ps.filter((p) => p.attemptNo > got.attemptNo).sort((a, b) => a.attemptNo - b.attemptNo)[0];
    if (!got || !again) continue;
    const a = attemptByNo.get(`${key}#${got.attemptNo}`);
    const b = attemptByNo.get(`${key}#${again.attemptNo}`);
    const cutOff = a === undefined ? undefined : h.faults.find((f) => cutsOff(f) && reaches(f, a, leases)
      && f.startedAt <= again.arrivedAt && f.endedAt >= got.arrivedAt - h.leaseMs);
    // A later lease tenure: a newer epoch of the same partition's lease, or another partition's (the intent moved at a
    // change of the count, issue 26, which came after every lease of the old count had ended).
    const later = b !== undefined && (leases.ofAttempt(b) !== leases.ofAttempt(a!) || b.epoch > a!.epoch);
    if (cutOff && later && a!.outcome !== 'succeeded' && !released.has(a!)) {
      stats.resendsAfterFenceRefusal++;
      stats.resendsExcusedBy[cutOff.kind] = (stats.resendsExcusedBy[cutOff.kind] ?? 0) + 1;
      continue;
    }
    stats.resendsAfter2xx++;
    fail('resend_after_2xx', `key ${key}: attempt #${got.attemptNo} (epoch ${a?.epoch ?? '?'}, ${a?.outcome ?? 'no row'}) was answered ${got.status}, ` +
      `then attempt #${again.attemptNo} (epoch ${b?.epoch ?? '?'}) was sent; ${a && released.has(a) ? `epoch ${a.epoch} was released by its holder`
        : `no fault cut ${a?.holderId ?? '?'} off from its lease meanwhile`}: the fence did not refuse its result`);
  }

  const arrived = new Set(h.provider.map((p) => `${p.key}#${p.attemptNo}`));
  // Killed or stopped while the attempt was out; or the attempt was abandoned by orphan recovery after its epoch
  // expired (never released) while a fault cut its leader off: its `aborted` could not pass that epoch's fence, and
  // orphan recovery charges what it cannot know about (the rule allows both, as resend_after_2xx allows a refusal).
  const outWhileStopped = (a: AttemptRow) => h.faults.some((f) => (a.startedAtMs ?? Number.NEGATIVE_INFINITY) <= f.endedAt
    && (a.finishedAtMs ?? Number.POSITIVE_INFINITY) >= f.startedAt
    && (((f.kind === 'kill' || f.kind === 'stop' || f.kind === 'pause') && f.victim === a.holderId)
      || (a.outcome === 'abandoned' && !released.has(a) && cutsOff(f) && reaches(f, a, leases))));
  const unsent = new Map<string, AttemptRow[]>();
  for (const a of h.attempts) {
    if (a.outcome === 'aborted' || arrived.has(`${a.intentId}#${a.attemptNo}`)) continue;
    if (outWhileStopped(a)) {
      stats.chargedNotSentKilled++;
      continue;
    }
    stats.chargedNotSent++;
    unsent.set(a.intentId, [...(unsent.get(a.intentId) ?? []), a]);
  }
  for (const i of h.intents.filter((x) => x.status === 'failed')) {
    const never = unsent.get(i.intentId);
    if (!never) continue;
    const charged = h.attempts.filter((a) => a.intentId === i.intentId && a.outcome !== 'aborted').length;
    fail('charged_not_sent', `intent ${i.intentId} failed with ${charged} attempt(s) charged but ${charged - never.length} sent: ` +
      never.map((a) => `#${a.attemptNo} (epoch ${a.epoch}, ${a.outcome}${a.error ? `: ${a.error}` : ''})`).join(', ') +
      ' never reached the provider, and no process was killed, stopped or cut off from its lease while it was out');
  }
  return stats;
}
