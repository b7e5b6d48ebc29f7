// One chaos run: fresh database, provider process, N instance processes behind their own TCP proxies,
// load, seeded faults until the duration is up, drain, stop everything, check the recorded history.
// Everything it started is stopped and the database dropped, also when something fails; the run's
// directory (host logs, provider record, history.json) is kept only when the run failed (or --keep).
import { mkdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { check, type History, type RunStats, type Violation } from './checker.js';
import {
  ChaosCluster, chaosSql, createChaosDb, hostEnv, NO_LIMITS, othersTesting, type ChaosDb, type ProviderLimits, type Slot,
  type TimerSetup, type Timings,
} from './cluster.js';
import { FaultInjector, type FaultKind, type FaultRecord } from './faults.js';
import { DEFAULT_LOAD, LoadGenerator, type LoadOptions } from './load.js';
import type { ProviderRecord } from './providerProcess.js';
import { readProviderRecord } from './history.js';
import { createRng, sleep } from './rng.js';
import { settingsSchema } from '../../src/configSchema.js';
import { partitionLeaseNames } from '../../src/limits.js';
import { partitionLeaders } from './partitionTargets.js';
import { PartitionChangeSchedule, readChanges, recordedCount } from './partitionChanges.js';
import { OperatorSchedule } from './operatorActions.js';
import { startProviderProcess, type ProviderProcess } from './providerLauncher.js';
import { MixedVersionPhases, pausesEachPartition, type MixedSummary } from './mixedVersion.js';

export interface RunOptions {
  index: number;
  seed: number;
  durationMs: number;
  instances: number;
  pgRestart: boolean;
  /** Restart PostgreSQL even while other test processes run. */
  forcePgRestart: boolean;
  timings: Timings;
  resumeBound: number;
  /** Per fault kind, where it differs from resumeBound. */
  resumeBoundByKind?: Record<string, number>;
  /** Faults of these kinds on the leader are judged by their length + tick + slack when that is more (Azure-like). */
  faultLengthBound?: { kinds: string[]; slackMs: number };
  /** Timer mode; `azure` needs the Azurite connection string (one Azurite per campaign, a host id per run). */
  timers: { mode: 'every-instance' } | { mode: 'azure'; storage: string };
  failureRate: number;
  /** The provider's typical answer time (±50 %); 3 % of calls answer after 300 ms regardless. */
  latencyMs: number;
  /** Only these fault kinds (null: every kind). */
  faultKinds: readonly FaultKind[] | null;
  /** Chance (0–1) that a second, network-level fault hits another instance while a fault runs (default 0). */
  overlap: number;
  /** Each host process's wall clock is off by up to ± this many seconds (libfaketime; 0 = none). */
  skewS: number;
  load: LoadOptions;
  campaignDir: string;
  keep: boolean;
  drainTimeoutMs: number;
  log: (line: string) => void;
  /** EXECUTOR_PARTITIONS of the hosts (issue 25; default 1: everything as before partitions). */
  partitions?: number;
  /** Issue 26 (needs partitions > 1): changes of the partition count on a schedule of their own (partitionChanges.ts). */
  partitionChanges?: boolean;
  /** Pause, resume, drain and slow-provider phases on a schedule of their own (operatorActions.ts). */
  operatorActions?: boolean;
  /** The hosts' PROVIDER_MAX_IN_FLIGHT and PROVIDER_RATE_LIMIT_PER_SEC (default none). */
  providerLimits?: ProviderLimits;
  /** With partitions > 1, the instance with the smaller EXECUTOR_PARTITIONS: runs its timer like the others
   *  (`timers`, the default), serves HTTP only (`http`: TIMER_MODE=off), or is left out (`none`). */
  smallerInstance?: SmallerInstance;
  /** The mixed-version campaign (mixedVersion.ts): the previous release's build runs first, this one joins. */
  mixedVersion?: { release: string; version: string };
}

export type SmallerInstance = 'timers' | 'http' | 'none';

/** With partitions > 1 the cluster has one more instance with this EXECUTOR_PARTITIONS (below the recorded count:
 *  it runs partition 0's timer only, and the operator's actions are sent through it too). */
export const SMALLER_INSTANCE_PARTITIONS = 1;

export interface RunResult {
  index: number;
  seed: number;
  faults: FaultRecord[];
  stats: RunStats | null;
  violations: Violation[];
  error: string | null;
  dir: string;
  wallMs: number;
  drainMs: number | null;
  /** Wall-clock offsets (s) the host processes ran with (`--skew`), by holder id. */
  clockOffsets: Record<string, number>;
  /** PostgreSQL restarts drawn but replaced by a kill because other test processes were running. */
  pgRestartsSkipped: number;
  /** The mixed-version campaign's phases and count-change answers. */
  mixed?: MixedSummary;
}

const num = (x: unknown) => Number(x);

/** The provider's typical answer time in a slow phase: calls in flight for 225–675 ms (its ±50 %), within the hosts'
 *  800 ms PROVIDER_TIMEOUT_MS, so a hand-back meanwhile waits for them. */
const SLOW_LATENCY_MS = 450;

/** The hosts' lease name of each partition (they run with the default LEASE_NAME). */
export const chaosLeaseNames = (partitions: number) => partitionLeaseNames(settingsSchema.shape.LEASE_NAME.parse(undefined), partitions);

/** Cleanups of the run in progress, for a campaign interrupted by a signal. */
export const activeCleanups = new Set<() => Promise<void>>();

async function loadHistory(db: ChaosDb, o: RunOptions, providerFile: string, load: LoadGenerator, injector: FaultInjector,
  operator: OperatorSchedule | null, olderRelease: string[]): Promise<History> {
  const [events, audit, intents, attempts] = await Promise.all([
    db.sql('SELECT seq, lease_name, lease_epoch, holder_id, event FROM submission_manager_lease_events ORDER BY seq'),
    db.sql(`SELECT seq, lease_name, lease_epoch, holder_id, action, ${chaosSql.epochMs('at')} AS at_ms
              FROM submission_execution_audit ORDER BY seq`),
    db.sql(`SELECT intent_id, idempotency_key, status, attempt_count, partition_no, partition_key, ${chaosSql.epochMs('created_at')} AS created_ms
              FROM submission_intents`),
    db.sql(`SELECT intent_id, attempt_no, lease_epoch, holder_id, outcome, http_status, error,
                   ${chaosSql.epochMs('started_at')} AS started_ms, ${chaosSql.epochMs('finished_at')} AS finished_ms
              FROM submission_attempts`),
  ]);
  const provider = readProviderRecord(readFileSync(providerFile, 'utf8').split('\n').filter(Boolean));
  return {
    leaseMs: o.timings.leaseMs, tickMs: o.timings.tickMs, refreshMs: o.timings.refreshMs, providerLimits: o.providerLimits ?? NO_LIMITS,
    ...(operator ? { operatorActions: operator.actions } : {}), resumeBound: o.resumeBound, ...(o.resumeBoundByKind ? { resumeBoundByKind: o.resumeBoundByKind } : {}),
    ...(o.faultLengthBound ? { faultLengthBound: o.faultLengthBound } : {}), partitionLeases: chaosLeaseNames(o.partitions ?? 1),
    events: events.map((e) => ({ seq: num(e.seq), epoch: num(e.lease_epoch), holderId: String(e.holder_id), event: String(e.event), leaseName: String(e.lease_name) })),
    audit: audit.map((a) => ({
      seq: num(a.seq), epoch: num(a.lease_epoch), holderId: String(a.holder_id), action: String(a.action), atMs: num(a.at_ms), leaseName: String(a.lease_name),
    })),
    intents: intents.map((i) => ({
      intentId: String(i.intent_id), key: (i.idempotency_key as string | null) ?? null, status: String(i.status), attemptCount: num(i.attempt_count),
      partition: num(i.partition_no), partitionKey: (i.partition_key as string | null) ?? null, createdAtMs: num(i.created_ms),
    })),
    attempts: attempts.map((a) => ({
      intentId: String(a.intent_id), attemptNo: num(a.attempt_no), epoch: num(a.lease_epoch), holderId: String(a.holder_id),
      outcome: String(a.outcome), httpStatus: a.http_status == null ? null : num(a.http_status), error: (a.error as string | null) ?? null,
      startedAtMs: num(a.started_ms), finishedAtMs: a.finished_ms == null ? null : num(a.finished_ms),
    })),
    ...((o.partitions ?? 1) > 1 ? { partitionChanges: await readChanges(db) } : {}),
    provider, accepted: [...load.accepted.values()], replays: load.replays, cancels: load.cancels,
    faults: injector.faults, leaderless: injector.leaderless,
    ...(olderRelease.length > 0 ? { olderReleaseHolders: olderRelease } : {}),
  };
}

async function waitUntil(what: string, probe: () => Promise<boolean>, timeoutMs: number): Promise<number> {
  const t0 = Date.now();
  for (;;) {
    if (await probe().catch(() => false)) return Date.now() - t0;
    if (Date.now() - t0 > timeoutMs) throw new Error(`${what}: not within ${timeoutMs} ms`);
    await sleep(250);
  }
}

export async function runOne(o: RunOptions): Promise<RunResult> {
  const t0 = Date.now();
  const tag = `c${o.seed}r${o.index}`;
  const dir = path.join(o.campaignDir, `run-${o.index}-seed-${o.seed}`);
  mkdirSync(dir, { recursive: true });
  const providerFile = path.join(dir, 'provider.jsonl');
  const result: RunResult = { index: o.index, seed: o.seed, faults: [], stats: null, violations: [], error: null, dir, wallMs: 0, drainMs: null, clockOffsets: {}, pgRestartsSkipped: 0 };
  const rng = createRng(o.seed);
  let db: ChaosDb | null = null;
  let provider: ProviderProcess | null = null;
  let cluster: ChaosCluster | null = null;
  let load: LoadGenerator | null = null;
  let faultLog: FaultInjector | null = null;
  let changes: PartitionChangeSchedule | null = null;
  let operator: OperatorSchedule | null = null;
  let mixed: MixedVersionPhases | null = null;
  const cleanup = async () => {
    await changes?.stop(false);
    await operator?.stop();
    await load?.stop().catch(() => {});
    await cluster?.stopAll().catch(() => {});
    await provider?.stop().catch(() => {});
    await db?.drop().catch((e: unknown) => o.log(`    could not drop database ${db?.name}: ${(e as Error).message}`));
  };
  activeCleanups.add(cleanup);
  try {
    db = await createChaosDb();
    provider = await startProviderProcess(providerFile, o.seed, o.failureRate, o.latencyMs);
    const timers: TimerSetup = o.timers.mode === 'azure' ? { mode: 'azure', storage: o.timers.storage, hostId: tag.toLowerCase() } : o.timers;
    const P = o.partitions ?? 1;
    const env = hostEnv(o.timings, timers, P, o.providerLimits);
    cluster = new ChaosCluster(db, { ...env, PROVIDER_URL: provider.url }, tag, dir,
      o.skewS > 0 ? { maxS: o.skewS, rng: createRng(o.seed ^ 0x3c6ef372) } : null);
    if (o.mixedVersion) cluster.release = o.mixedVersion.release; // the old release first
    await cluster.start(o.instances);
    if (P > 1 && o.smallerInstance !== 'none') {
      // Started once the count is recorded (the first process to start records its own EXECUTOR_PARTITIONS).
      const d = db;
      await waitUntil('partition count recorded', async () => (await recordedCount(d)) === P, 20_000);
      await cluster.add({ EXECUTOR_PARTITIONS: String(SMALLER_INSTANCE_PARTITIONS), ...(o.smallerInstance === 'http' ? { TIMER_MODE: 'off' } : {}) });
    }
    if (P === 1 && !(await cluster.leaderSlot(20_000))) throw new Error('no leader within 20 s of start');
    if (P > 1 && !(await partitionLeaders(cluster, chaosLeaseNames(P), 20_000, P))) throw new Error(`not every one of the ${P} partitions led within 20 s of start`);
    // P > 1: 2 P partitionKeys, drawn from a stream of their own (the other draws stay those of P = 1).
    load = new LoadGenerator(cluster, createRng(o.seed ^ 0x5bd1e995), tag, { ...o.load, ...(P > 1 ? { partitionKeys: 2 * P } : {}) },
      P > 1 ? createRng(o.seed ^ 0x2545f491) : null);
    load.start();
    const loadFrom = Date.now(); // the duration counts from here: a slow start on a loaded machine does not eat it
    const d = db;
    await waitUntil('first execution', async () => Number((await d.sql<{ n: number | string }>('SELECT COUNT(*) AS n FROM submission_execution_audit WHERE action = $1', ['start_attempts']))[0]?.n) > 0, 20_000);
    const injector = new FaultInjector(cluster, db, createRng(o.seed ^ 0x27d4eb2f), {
      leaseMs: o.timings.leaseMs, statementTimeoutMs: Number(hostEnv(o.timings).DB_STATEMENT_TIMEOUT_MS), pgRestart: o.pgRestart, resumeWaitMs: Math.ceil(Math.max(o.resumeBound, ...Object.values(o.resumeBoundByKind ?? {})) * o.timings.leaseMs) + 5_000,
      mayRestartPg: () => o.forcePgRestart || othersTesting().length === 0, ...(o.faultKinds ? { kinds: o.faultKinds } : {}),
      ...(P > 1 ? { partitionLeases: chaosLeaseNames(P) } : {}), ...(o.partitionChanges ? { recordedCount: () => recordedCount(d) } : {}),
    }, createRng(o.seed ^ 0x165667b1));
    result.faults = injector.faults;
    faultLog = injector;
    const smaller = P > 1 && o.smallerInstance !== 'none' ? [cluster.slots.at(-1)!] : [];
    mixed = o.mixedVersion ? new MixedVersionPhases(cluster, db, injector, {
      ...o.mixedVersion, durationMs: o.durationMs, liveWindowMs: Number(env.INSTANCE_LIVE_WINDOW_MS ?? 15_000), log: o.log,
      joinAt: o.seed % 2 === 0 ? 'request' : 'claimed',
      slotEnvs: [...Array.from({ length: o.instances }, () => ({})), ...smaller.map(() => ({ EXECUTOR_PARTITIONS: String(SMALLER_INSTANCE_PARTITIONS),
        ...(o.smallerInstance === 'http' ? { TIMER_MODE: 'off' } : {}) }))],
    }) : null;
    if (mixed) result.mixed = mixed.summary;
    // Issue 26: changes of the count, drawn from a stream of their own (the other draws stay as without them).
    changes = o.partitionChanges && P > 1 ? new PartitionChangeSchedule(cluster, db, createRng(o.seed ^ 0x7f4a7c15), injector, {
      maxCount: P, gapMs: [2_000, 6_000], completeWaitMs: 60_000, log: o.log,
      ...(mixed ? { answers: mixed.answers, via: (s: Slot) => !s.release } : {}), // through this release's instances only
    }) : null;
    mixed?.useChanges(changes);
    changes?.start();
    mixed?.start(loadFrom);
    // Operator actions, drawn from a stream of their own.
    operator = o.operatorActions ? new OperatorSchedule(cluster, provider, createRng(o.seed ^ 0x6a09e667), {
      gapMs: [2_000, 5_000], pauseMs: [1_500, 4_000], slowMs: [3_000, 6_000], slowLatencyMs: SLOW_LATENCY_MS, latencyMs: o.latencyMs, log: o.log,
      ...(changes ? { changeNow: () => changes!.now() } : {}), ...(mixed && pausesEachPartition(o.mixedVersion!.version)
        ? { perPartition: { count: () => recordedCount(d), max: P, when: () => mixed!.oldLive() } } : {}),
    }) : null;
    mixed?.useOperator(operator);
    operator?.start();
    const faultsEnd = loadFrom + o.durationMs - 3 * o.timings.leaseMs; // the last fault still sees load resume
    while (Date.now() < faultsEnd || mixed?.running) {
      await mixed?.gate();
      const target = await injector.target(injector.pickKind()); // victim reserved before any fault alongside
      const faults = target ? [injector.run(target), injector.maybeInjectAlongside(o.overlap)] : [];
      const settled = await Promise.allSettled(faults); // a failed fault still lets the one alongside finish
      for (const s of settled) if (s.status === 'rejected') throw s.reason;
      for (const f of settled.map((s) => (s as PromiseFulfilledResult<FaultRecord | null>).value)) {
        if (f) o.log(`    ${(f.alongside ? `+ ${f.kind}` : f.kind).padEnd(17)} ${f.detail}${f.partitions ? ` [partitions ${f.partitions.join(',') || 'none'}]` : ''}; resumed ${f.resumedAt === null ? 'not yet' : `after ${Math.round(f.resumedAt - f.measureFrom)} ms`}`);
      }
      await sleep(rng.int(500, 2_500));
    }
    await mixed?.finish();
    await operator?.stop(); // a pause in progress is resumed, the provider's latency restored
    await changes?.stop(); // the change in progress completes while the load still runs
    if (injector.pgRestartsSkipped) o.log(`    ${injector.pgRestartsSkipped} PostgreSQL restart(s) replaced by a kill: other tests were running`);
    await sleep(Math.max(0, loadFrom + o.durationMs - Date.now()));
    await load.stop();
    result.drainMs = await waitUntil('drain (every intent terminal)', async () =>
      Number((await d.sql<{ n: number | string }>(`SELECT COUNT(*) AS n FROM submission_intents WHERE status IN ('scheduled', 'in_flight')`))[0]!.n) === 0,
    o.drainTimeoutMs).catch(() => null);
    await cluster.stopAll(); // quiescent database and provider record before checking
    if (cluster.clockOffsets.size) o.log(`    wall-clock offsets: ${[...cluster.clockOffsets].map(([h, s]) => `${h} ${s >= 0 ? '+' : ''}${s} s`).join(', ')}`);
    await provider.stop();
    const history = await loadHistory(db, o, providerFile, load, injector, operator, cluster.olderReleaseHolders());
    const { violations, stats } = check(history);
    if (mixed) violations.push(...await mixed.judge());
    result.violations = violations;
    result.stats = stats;
    if (violations.length > 0 || o.keep) writeFileSync(path.join(dir, 'history.json'), JSON.stringify(history, null, 1));
  } catch (e) {
    result.error = (e as Error).stack ?? String(e);
  } finally {
    result.pgRestartsSkipped = faultLog?.pgRestartsSkipped ?? 0; // also for a run that failed midway
    result.clockOffsets = Object.fromEntries(cluster?.clockOffsets ?? []);
    activeCleanups.delete(cleanup);
    await cleanup();
    result.wallMs = Date.now() - t0;
    if (!o.keep && !result.error && result.violations.length === 0) rmSync(dir, { recursive: true, force: true });
  }
  return result;
}

export { DEFAULT_LOAD };
