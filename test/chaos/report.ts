// The campaign table: runs, faults by kind, intents, attempts, duplicate deliveries (and why), worst
// resume ÷ lease, violations — as markdown, so it can go into docs/reliability.md as printed.
import type { RunResult } from './runOne.js';

const add = (into: Record<string, number>, from: Record<string, number>) => {
  for (const [k, n] of Object.entries(from)) into[k] = (into[k] ?? 0) + n;
};
const list = (m: Record<string, number>) => Object.entries(m).sort((a, b) => b[1] - a[1]).map(([k, n]) => `${k} ${n}`).join(', ') || '—';
const inc = (m: Record<string, number>, k: string) => (m[k] = (m[k] ?? 0) + 1);
const signed = (n: number) => `${n >= 0 ? '+' : ''}${n}`;
const quantile = (xs: number[], q: number) => {
  const s = [...xs].sort((a, b) => a - b);
  return s.length ? s[Math.min(s.length - 1, Math.floor(q * s.length))]! : NaN;
};

/** `[1, 2, 3, 7, 9, 10]` → `1–3, 7, 9–10`: a 200-run campaign's seeds fit on one line. */
export function seedRanges(seeds: number[]): string {
  const parts: string[] = [];
  for (let i = 0; i < seeds.length; ) {
    let j = i;
    while (j + 1 < seeds.length && seeds[j + 1] === seeds[j]! + 1) j++;
    parts.push(j > i ? `${seeds[i]}–${seeds[j]}` : String(seeds[i]));
    i = j + 1;
  }
  return parts.join(', ') || '—';
}

export interface CampaignInfo { title: string; leaseMs: number; resumeBound: number; resumeBoundByKind?: Record<string, number>; wallMs: number }

export function campaignTable(results: RunResult[], info: CampaignInfo): string {
  const failed = results.filter((r) => r.error || r.violations.length > 0);
  const faults: Record<string, number> = {};
  const leaderHit: Record<string, number> = {};
  const alongside: Record<string, number> = {};
  const status: Record<string, number> = {};
  const outcome: Record<string, number> = {};
  const dupWhy: Record<string, number> = {};
  const checks: Record<string, number> = {};
  const ratios: Record<string, number[]> = {};
  const afterEnd: Record<string, number[]> = {};
  let resends = 0, resendsRefused = 0, unsent = 0, unsentKilled = 0;
  const excusedBy: Record<string, number> = {};
  let accepted = 0, attempts = 0, requests = 0, dups = 0, stale = 0, staleAccepted = 0, staleRefused = 0, epochs = 0, openCancelled = 0, replays = 0, cancels = 0;
  let worst = { ratio: 0, what: '—' };
  // Issue 25 (P > 1 only: a one-partition table is as before partitions).
  const partitions = Math.max(1, ...results.map((r) => r.stats?.partitions ?? 1));
  const hitCount: Record<string, number> = {};
  let keyPairs = 0, keySameBatch = 0, keyInversions = 0;
  const changes = results.flatMap((r) => r.stats?.changes ?? []); // issue 26
  const drains: number[] = [];
  const skipped = results.reduce((n, r) => n + (r.pgRestartsSkipped ?? 0), 0);
  const offsets = results.flatMap((r) => Object.values(r.clockOffsets ?? {}));
  for (const r of results) {
    for (const f of r.faults) {
      faults[f.kind] = (faults[f.kind] ?? 0) + 1;
      if (f.victimWasLeader) leaderHit[f.kind] = (leaderHit[f.kind] ?? 0) + 1;
      if (f.alongside) alongside[f.kind] = (alongside[f.kind] ?? 0) + 1;
      if (f.partitions && f.kind !== 'partition_change') inc(hitCount, f.partitions.length >= partitions ? `all ${partitions}` : f.partitions.length === 0 ? 'none (a follower)' : `${f.partitions.length} of ${partitions}`);
    }
    for (const v of r.violations) checks[v.check] = (checks[v.check] ?? 0) + 1;
    if (r.drainMs !== null) drains.push(r.drainMs);
    const s = r.stats;
    if (!s) continue;
    accepted += s.intentsAccepted; attempts += s.attempts; requests += s.providerRequests; dups += s.duplicateDeliveries;
    stale += s.staleEpochArrivals; staleAccepted += s.staleAccepted ?? 0; staleRefused += s.staleRefused ?? 0; replays += s.replays; cancels += s.cancelsAcknowledged; epochs += s.epochs; openCancelled += s.openAttemptsOfCancelled;
    add(status, s.byStatus); add(outcome, s.byOutcome); add(dupWhy, s.duplicatesByReason);
    resends += s.resendsAfter2xx ?? 0; resendsRefused += s.resendsAfterFenceRefusal ?? 0; add(excusedBy, s.resendsExcusedBy ?? {});
    unsent += s.chargedNotSent ?? 0; unsentKilled += s.chargedNotSentKilled ?? 0;
    keyPairs += s.keyOrderPairs ?? 0; keySameBatch += s.keySameBatch ?? 0; keyInversions += s.keyArrivalInversions ?? 0;
    for (const x of s.resumes) {
      if (x.ratio !== null) (ratios[x.kind] ??= []).push(x.ratio);
      if (x.afterEndMs !== undefined) (afterEnd[x.kind] ??= []).push(x.afterEndMs ?? Number.POSITIVE_INFINITY);
      const ratio = x.ratio ?? Number.POSITIVE_INFINITY;
      if (ratio > worst.ratio) worst = { ratio, what: `${x.kind}: ${x.detail} (run seed ${r.seed})` };
    }
  }
  const totalFaults = Object.values(faults).reduce((a, b) => a + b, 0);
  const byKind = Object.entries(ratios).map(([k, xs]) => `${k} ${quantile(xs, 0.5).toFixed(2)} / ${Math.max(...xs).toFixed(2)}`).join(', ');
  const afterEndByKind = Object.entries(afterEnd).map(([k, xs]) => `${k} ${quantile(xs, 0.5)} / ${Math.max(...xs)}`).join(', ');
  const violations = results.reduce((n, r) => n + r.violations.length + (r.error ? 1 : 0), 0);
  const rows: [string, string][] = [
    ['runs (passed / failed)', `${results.length} (${results.length - failed.length} / ${failed.length}); seeds ${seedRanges(results.map((r) => r.seed))}`],
    ['wall time', `${(info.wallMs / 60_000).toFixed(1)} min`],
    ['faults injected', `${totalFaults}: ${list(faults)}`],
    ['… of which hit the leader', list(leaderHit)],
    ...(Object.keys(alongside).length ? [['… of which ran alongside another fault', list(alongside)] as [string, string]] : []),
    ...(partitions > 1 ? [
      ['partitions', `${partitions} (a lease, epochs and fence each); faults by the partitions whose leader they hit: ${Object.entries(hitCount)
        .sort((a, b) => b[1] - a[1]).map(([k, n]) => `${n} × ${k}`).join(', ') || '—'}`],
      ['same-partitionKey intents (submitted one after the other)', `${keyPairs} pairs checked: each first started in submission order (otherwise a key_order violation); ` +
        `${keySameBatch} of them started by one batch (sent side by side); of the others, ${keyInversions} whose first attempts reached the provider the other way round`],
    ] as [string, string][] : []),
    ...(changes.length ? [changeRow(changes)] : []),
    ...operatorRows(results),
    ...(skipped ? [['PostgreSQL restarts replaced by a kill (other tests were running)', String(skipped)] as [string, string]] : []),
    ['intents accepted (201/200)', `${accepted} (plus ${replays} key replays, ${cancels} cancels answered 200)`],
    ['intents at the end', list(status)],
    ['attempts', `${attempts}: ${list(outcome)}`],
    ['provider requests', String(requests)],
    ['duplicate deliveries (2xx for a key already delivered)', `${dups}${dups ? `: ${list(dupWhy)}` : ''}`],
    ['provider requests stale on arrival (an older layout generation, or an older epoch of their partition)', String(stale)],
    ['stale requests accepted (the fencing provider: must be 0)', `${staleAccepted} (${staleRefused} refused with 409 stale-epoch)`],
    ['re-sends after a 2xx the executor received', `${resends} (besides ${resendsRefused} after the fence refused the result: its lease expired while ` +
      `a fault cut its leader off${resendsRefused ? `: ${list(excusedBy)}` : ''})`],
    ['attempts charged but never sent', `${unsent} (besides ${unsentKilled} whose process was killed or stopped while they were out)`],
    ['attempts left `started` on cancelled intents', String(openCancelled)],
    ['lease epochs', String(epochs)],
    ['resume ÷ lease, median / max by fault', byKind || '—'],
    ...(afterEndByKind ? [['lease left valid: resume after the fault ended, ms, median / max by fault', afterEndByKind] as [string, string]] : []),
    ['worst resume ÷ lease', `${Number.isFinite(worst.ratio) ? worst.ratio.toFixed(2) : 'never resumed'} (${worst.what}); bound ${info.resumeBound.toFixed(2)}${info.resumeBoundByKind ? `, ${Object.entries(info.resumeBoundByKind).map(([k, x]) => `${k} ${x.toFixed(2)}`).join(', ')}` : ''}`],
    ...(offsets.length ? [['host wall-clock offsets', `${offsets.length} processes, ${signed(Math.min(...offsets))} s … ${signed(Math.max(...offsets))} s`] as [string, string]] : []),
    ['drain time, max', drains.length ? `${(Math.max(...drains) / 1000).toFixed(1)} s` : '—'],
    ['violations', `**${violations}**${violations ? ` (${list(checks)}${results.some((r) => r.error) ? ', harness errors' : ''})` : ''}`],
  ];
  return [`### ${info.title}`, '', '| | |', '|---|---|', ...rows.map(([k, v]) => `| ${k} | ${v} |`)].join('\n');
}

type ChangeStat = NonNullable<RunResult['stats']>['changes'][number];
const ms = (xs: (number | null)[]) => {
  const v = xs.filter((x): x is number => x !== null);
  return v.length ? `${quantile(v, 0.5)} / ${Math.max(...v)}` : '—';
};

/** Issue 26: the changes of the partition count, how long each took and how long execution paused around it. */
function changeRow(changes: ChangeStat[]): [string, string] {
  const kinds: Record<string, number> = {};
  for (const c of changes) inc(kinds, `${c.from}→${c.to}`);
  const open = changes.filter((c) => c.ms === null).length;
  return ['partition changes', `${changes.length}${open ? ` (${open} never completed)` : ''}: ${list(kinds)}; request → completion ms, median / max ${ms(changes.map((c) => c.ms))}; ` +
    `switch → completion ${ms(changes.map((c) => c.reassignMs))}; pause (provider arrivals) ${ms(changes.map((c) => c.pauseMs))}; ` +
    `rows moved ${changes.reduce((n, c) => n + c.rowsMoved, 0)}`];
}

/** The operator's actions and the provider's limits, as measured at the provider (rows only when they apply). */
function operatorRows(results: RunResult[]): [string, string][] {
  const stats = results.flatMap((r) => (r.stats ? [r.stats] : []));
  const sum = (f: (s: (typeof stats)[number]) => number | undefined) => stats.reduce((n, s) => n + (f(s) ?? 0), 0);
  const max = (f: (s: (typeof stats)[number]) => number | null | undefined) => Math.max(0, ...stats.map((s) => f(s) ?? 0));
  const rows: [string, string][] = [];
  if (sum((s) => s.pauses) + sum((s) => s.drains) + sum((s) => s.slowPhases) > 0) {
    rows.push(['operator actions (cluster-wide, through random instances)', `${sum((s) => s.pauses)} pauses (${sum((s) => s.pausesViaSmaller)} through the instance with ` +
      `the smaller EXECUTOR_PARTITIONS), ${sum((s) => s.drains)} drains (${sum((s) => s.drainsViaSmaller)} through it), ${sum((s) => s.slowPhases)} slow-provider phases; ` +
      `latest arrival after a pause was answered ${max((s) => s.lastArrivalAfterPauseMs)} ms; sent late by a process stopped meanwhile ${sum((s) => s.pausedSendsAfterStop)}`]);
  }
  const cap = max((s) => s.inFlightCap), bound = max((s) => s.busiestSecondBound);
  if (cap > 0) {
    rows.push(['provider requests in flight at once, max (PROVIDER_MAX_IN_FLIGHT)', `${max((s) => s.maxInFlight)} (${cap}); ` +
      `excursions above it only by requests written late by a process stopped meanwhile: ${sum((s) => s.inFlightLateExcursions)}; ` +
      `within the slack of a lease lost under its leader: ${sum((s) => s.inFlightSlackExcursions)}`]);
  }
  if (bound > 0) rows.push(['provider arrivals in the busiest second (bound)', `${max((s) => s.busiestSecond)} (${bound})`]);
  return rows;
}
