// Changing the partition count (issue 26) with separate OS processes: local-host processes with EXECUTOR_PARTITIONS=6
// in every-instance mode on a fresh database of a server dialect, a recording provider failing 20 % with 503 (seeded,
// as the campaign's provider), a steady stream of intents (some sharing partitionKeys, each key submitted only after
// its previous submit was answered), POST /api/ops/partitions over real HTTP, and the run read back as the chaos
// checker's history, so the system tests judge it by the campaign's rules (test/chaos/checker.ts: lease, fencing,
// contiguous attempts, nothing lost, no 2xx re-sent, key_order, partition at the count of the time, every change
// completed one at a time, no start while reassigning). Shared by partitionChange.test.ts and partitionChangeKill.test.ts.
import { afterEach, beforeAll, beforeEach, expect } from 'vitest';
import { check, type History } from '../chaos/checker.js';
import type { Accepted } from '../chaos/load.js';
import type { ProviderRecord } from '../chaos/providerProcess.js';
import type { PartitionChangeRow } from '../chaos/history.js';
import type { FaultRecord } from '../chaos/faults.js';
import { createRng, sleep, type Rng } from '../chaos/rng.js';
import { settingsSchema } from '../../src/configSchema.js';
import { partitionLeaseNames, settleWindowMs, shortestPeriodMs } from '../../src/limits.js';
import type { ServerDatabase } from './dialects.js';
import { ensureBuilt, FAST_ENV, killAll, startHost, waitFor, type HostProcess, type PgTestDatabase } from './localHostProcess.js';
import { startRecordingProvider, type RecordingProvider } from './recordingProvider.js';

/** EXECUTOR_PARTITIONS of every process: the most partitions a change may ask for. */
export const C = 6;
export const ADMIN_KEY = 'change-admin-key';
export const FUNCTION_KEY = 'change-function-key';

/** The hosts' settings: the process tests' short timings, six timer functions, every-instance mode (every process
 *  contends for every partition: the fair share), the heartbeat scaled to the lease, no breaker (a 503 share would
 *  otherwise pause the provider and blur the pause measured around a change). */
export const CHANGE_ENV: Record<string, string> = {
  ...FAST_ENV, INSTANCES: '1', EXECUTOR_PARTITIONS: String(C), TIMER_MODE: 'every-instance', INSTANCE_HEARTBEAT_MS: '300',
  INSTANCE_LIVE_WINDOW_MS: '2000', PROVIDER_BREAKER_THRESHOLD: '0', ADMIN_KEY, FUNCTION_KEY,
};
export const LEASE_NAMES = partitionLeaseNames(settingsSchema.shape.LEASE_NAME.parse(undefined), C);

/**
 * The longest execution may pause around a change, from the settings (no other wall-clock speed is asserted):
 * the drain — leaders see the change (refresh), hand back at a tick, their calls in flight end (provider timeout)
 * and are written (settle window) — then one tick (partition 0's timer runs the changer: it takes the released leases,
 * switches, moves the rows and completes; the switch itself waits for inserts in flight, so no commit grace), then
 * refresh + one tick (the leaders see the completion and acquire at their next tick).
 */
export function pauseBoundMs(env: Record<string, string> = CHANGE_ENV): { drainMs: number; boundMs: number } {
  const tick = shortestPeriodMs(env.EXECUTOR_SCHEDULE!);
  const refresh = Number(env.SCHEDULE_REFRESH_INTERVAL_MS);
  const drainMs = refresh + tick + Number(env.PROVIDER_TIMEOUT_MS) + settleWindowMs(Number(env.DB_STATEMENT_TIMEOUT_MS));
  return { drainMs, boundMs: drainMs + tick + refresh + tick };
}

/** The longest from a change's switch (the drain's end) to the first provider call after it: the leaders' next tick,
 *  their layout poll (refresh) and 500 ms for a loaded machine's acquire and rebuild. The changer switches and
 *  completes in the invocation the drain ends in (the provider answers in 30 ms here, so no hand-back outlasts it). */
export function resumeBoundMs(env: Record<string, string> = CHANGE_ENV): number {
  return shortestPeriodMs(env.EXECUTOR_SCHEDULE!) + Number(env.SCHEDULE_REFRESH_INTERVAL_MS) + 500;
}

/** A provider failing 20 % with 503 (seeded), answering after 5–30 ms; its record as the campaign provider's. */
export async function startFlakyProvider(seed: number): Promise<{ provider: RecordingProvider; records: ProviderRecord[] }> {
  const rng = createRng(seed);
  const records: ProviderRecord[] = [];
  const provider = await startRecordingProvider((call) => {
    const status = rng.chance(0.2) ? 503 : 200;
    const delayMs = rng.int(5, 30);
    records.push({ key: call.intentId, attemptNo: call.attemptNo, epoch: call.leaseEpoch, arrivedAt: call.arrivedAt, status, delayMs,
      staleEpoch: false, partition: call.partition });
    return { status, delayMs };
  });
  return { provider, records };
}

/** What a change test works on; read the fields inside a test (each test gets its own database and provider). */
export interface ChangeFixture {
  db: PgTestDatabase;
  provider: RecordingProvider;
  records: ProviderRecord[];
  /** The processes the test still counts as running. */
  hosts: HostProcess[];
  /** Every process the test started, killed ones too. */
  all: HostProcess[];
}

/** Registers the hooks every change system test shares: the build, a fresh database of `server` and a flaky provider
 *  (seeded) per test, the test skipped with the server's one line when it is missing; after each test every process
 *  started is stopped, the provider closed and the database dropped. */
export function useChangeFixture(server: ServerDatabase, seed: number): ChangeFixture {
  const f = { hosts: [], all: [] } as unknown as ChangeFixture;
  const skip = server.unavailable();
  beforeAll(() => ensureBuilt(), 120_000);
  beforeEach(async (t) => {
    if (skip) return t.skip(skip);
    f.db = await server.create();
    ({ provider: f.provider, records: f.records } = await startFlakyProvider(seed));
  });
  afterEach(async () => {
    await killAll([...new Set([...f.hosts.splice(0), ...f.all.splice(0)])]);
    await f.provider?.close();
    await f.db?.drop();
  });
  return f;
}

export const startChangeHost = (db: PgTestDatabase, providerUrl: string, holder: string, extra: Record<string, string> = {}) =>
  startHost({ ...CHANGE_ENV, DATABASE_URL: db.url, PROVIDER_URL: providerUrl, HOLDER_ID: holder, ...extra });

/** POST /api/ops/partitions {count}: the status and the change (absent for 200 unchanged). */
export async function requestCount(api: string, count: number): Promise<{ status: number; created?: boolean; change?: { changeId: string; fromCount: number; toCount: number } }> {
  const r = await fetch(`${api}/ops/partitions`, {
    method: 'POST', body: JSON.stringify({ count }), signal: AbortSignal.timeout(10_000),
    headers: { 'content-type': 'application/json', 'x-functions-key': ADMIN_KEY },
  });
  return { status: r.status, ...((await r.json()) as object) };
}

export async function partitionsView(api: string): Promise<{ count: number; active: unknown; changes: { toCount: number; state: string }[];
  leases: { partition: number; held: boolean; heldByChanger: boolean }[] }> {
  const r = await fetch(`${api}/ops/partitions`, { headers: { 'x-functions-key': ADMIN_KEY }, signal: AbortSignal.timeout(5_000) });
  expect(r.status).toBe(200);
  return (await r.json()) as never;
}

/** Every change as the database records it (database times as epoch ms). */
export async function readChanges(db: PgTestDatabase): Promise<(PartitionChangeRow & { scanCursor: string | null; scanDoneAtMs: number | null })[]> {
  const rows = await db.sql<Record<string, unknown>>(`SELECT change_id, from_count, to_count, state, changer, rows_moved, requested_at,
      switched_at, completed_at, scan_cursor, scan_done_at FROM submission_manager_partition_changes ORDER BY requested_at, change_id`);
  const ms = (x: unknown) => (x == null ? null : new Date(x as Date).getTime());
  return rows.map((r) => ({
    changeId: String(r.change_id), fromCount: Number(r.from_count), toCount: Number(r.to_count), state: String(r.state),
    changer: (r.changer as string | null) ?? null, rowsMoved: Number(r.rows_moved), requestedAtMs: ms(r.requested_at)!,
    switchedAtMs: ms(r.switched_at), completedAtMs: ms(r.completed_at), scanCursor: (r.scan_cursor as string | null) ?? null,
    scanDoneAtMs: ms(r.scan_done_at),
  }));
}

export type ChangeRow = Awaited<ReturnType<typeof readChanges>>[number];

export const changeRow = async (db: PgTestDatabase, changeId: string) => (await readChanges(db)).find((c) => c.changeId === changeId);

/** Waits until the change completed (SQL); returns its row. */
export const completed = (db: PgTestDatabase, changeId: string, timeoutMs = 60_000) =>
  waitFor(`change ${changeId} completed`, async () => {
    const c = await changeRow(db, changeId);
    return c?.state === 'completed' ? c : null;
  }, timeoutMs, 100);

/** Every intent run to its end (the ones a test seeded, request_hash 'seed', aside): the stream's intents are all
 *  terminal in SQL, completions written. */
export const drained = (db: PgTestDatabase, timeoutMs = 60_000) => waitFor('every intent terminal', async () =>
  Number((await db.sql<{ n: number | string }>(`SELECT COUNT(*) AS n FROM submission_intents
    WHERE status IN ('scheduled', 'in_flight') AND request_hash <> 'seed'`))[0]!.n) === 0, timeoutMs, 200);

/** Every partition of the recorded count led by an instance (live lease rows, database time). */
export const allLed = (db: PgTestDatabase, count: number, nowSql: string) => waitFor(`every one of ${count} partitions led`, async () => {
  const rows = await db.sql<{ lease_name: string; live: unknown }>(
    `SELECT lease_name, CASE WHEN expires_at > ${nowSql} THEN 1 ELSE 0 END AS live FROM submission_manager_leases`);
  return LEASE_NAMES.slice(0, count).every((n) => rows.some((r) => r.lease_name === n && Number(r.live) === 1));
}, 30_000, 100);

/**
 * A steady stream of intents to the live hosts: `ratePerSec`, a share `keyedRate` carrying one of `keys`
 * partitionKeys (a key only when its previous submit was answered, so the order of a key's intents is known), each
 * submit with its own idempotency key, retried on another host when the answer is lost (the same intent).
 */
export class IntentStream {
  readonly accepted: Accepted[] = [];
  private readonly busy = new Set<string>();
  private readonly inFlight = new Set<Promise<void>>();
  private timer: NodeJS.Timeout | null = null;
  private n = 0;
  private readonly rng: Rng;

  constructor(private readonly hosts: () => HostProcess[], seed: number, private readonly o = { ratePerSec: 15, keyedRate: 0.35, keys: 6, tag: 's' }) {
    this.rng = createRng(seed);
  }

  start(): void {
    this.timer = setInterval(() => this.fire(), Math.round(1000 / this.o.ratePerSec));
  }

  async stop(): Promise<void> {
    if (this.timer) clearInterval(this.timer);
    this.timer = null;
    while (this.inFlight.size > 0) await Promise.all([...this.inFlight]);
  }

  private fire(): void {
    if (this.inFlight.size >= 16) return;
    const n = ++this.n;
    const key = this.rng.chance(this.o.keyedRate) ? `${this.o.tag}-pk${this.rng.int(0, this.o.keys - 1)}` : undefined;
    const partitionKey = key !== undefined && !this.busy.has(key) ? key : undefined;
    if (partitionKey !== undefined) this.busy.add(partitionKey);
    const p = this.submit(`${this.o.tag}-k${n}`, n, partitionKey).finally(() => {
      if (partitionKey !== undefined) this.busy.delete(partitionKey);
      this.inFlight.delete(p);
    });
    this.inFlight.add(p);
  }

  private async submit(key: string, n: number, partitionKey: string | undefined): Promise<void> {
    const sentAt = Date.now();
    for (let attempt = 0; attempt < 6; attempt++) {
      const live = this.hosts();
      const host = live[(n + attempt) % Math.max(1, live.length)];
      if (!host) return;
      try {
        const r = await fetch(`${host.api}/intents`, {
          method: 'POST', signal: AbortSignal.timeout(5_000),
          body: JSON.stringify({ payload: { n }, maxAttempts: 25, ...(partitionKey === undefined ? {} : { partitionKey }) }),
          headers: { 'content-type': 'application/json', 'x-functions-key': FUNCTION_KEY, 'idempotency-key': key },
        });
        const body = (await r.json().catch(() => ({}))) as { intentId?: string };
        if ((r.status === 201 || r.status === 200) && body.intentId) {
          this.accepted.push({ key, n, mode: 'ok', intentId: body.intentId, status: r.status, at: Date.now(), maxAttempts: 25,
            ...(partitionKey === undefined ? {} : { partitionKey, sentAt }) });
          return;
        }
      } catch { /* the answer is lost: the same key again, elsewhere */ }
      await sleep(200);
    }
  }
}

/** The run as the chaos checker's history, read from the database (quiescent: the hosts stopped), with the provider's
 *  record and the stream's answers. `exclude`: intents the test inserted itself (not submitted by the stream). */
export async function readHistory(db: PgTestDatabase, records: ProviderRecord[], accepted: Accepted[], exclude: ReadonlySet<string> = new Set(),
  faults: FaultRecord[] = []): Promise<History> {
  const t = (x: unknown) => new Date(x as Date).getTime();
  const [events, audit, intents, attempts, changes] = await Promise.all([
    db.sql<Record<string, unknown>>('SELECT seq, lease_name, lease_epoch, holder_id, event FROM submission_manager_lease_events ORDER BY seq'),
    db.sql<Record<string, unknown>>('SELECT seq, lease_name, lease_epoch, holder_id, action, at FROM submission_execution_audit ORDER BY seq'),
    db.sql<Record<string, unknown>>('SELECT intent_id, idempotency_key, status, attempt_count, partition_no, partition_key, created_at FROM submission_intents'),
    db.sql<Record<string, unknown>>(`SELECT intent_id, attempt_no, lease_epoch, holder_id, outcome, http_status, error, started_at, finished_at
      FROM submission_attempts`),
    readChanges(db),
  ]);
  return {
    leaseMs: Number(CHANGE_ENV.LEASE_DURATION_MS), tickMs: shortestPeriodMs(CHANGE_ENV.EXECUTOR_SCHEDULE!), resumeBound: 3, partitionLeases: LEASE_NAMES,
    partitionChanges: changes.map(({ scanCursor: _c, scanDoneAtMs: _d, ...c }) => c),
    events: events.map((e) => ({ seq: Number(e.seq), epoch: Number(e.lease_epoch), holderId: String(e.holder_id), event: String(e.event), leaseName: String(e.lease_name) })),
    audit: audit.map((a) => ({ seq: Number(a.seq), epoch: Number(a.lease_epoch), holderId: String(a.holder_id), action: String(a.action), atMs: t(a.at), leaseName: String(a.lease_name) })),
    intents: intents.filter((i) => !exclude.has(String(i.intent_id))).map((i) => ({
      intentId: String(i.intent_id), key: (i.idempotency_key as string | null) ?? null, status: String(i.status), attemptCount: Number(i.attempt_count),
      partition: Number(i.partition_no), partitionKey: (i.partition_key as string | null) ?? null, createdAtMs: t(i.created_at),
    })),
    attempts: attempts.map((a) => ({
      intentId: String(a.intent_id), attemptNo: Number(a.attempt_no), epoch: Number(a.lease_epoch), holderId: String(a.holder_id), outcome: String(a.outcome),
      httpStatus: a.http_status == null ? null : Number(a.http_status), error: (a.error as string | null) ?? null, startedAtMs: t(a.started_at),
      finishedAtMs: a.finished_at == null ? null : t(a.finished_at),
    })),
    provider: [...records], accepted: [...accepted], replays: [], cancels: [], faults, leaderless: [],
  };
}

/** A SIGKILL of `holderId`'s process as the chaos checker's fault record: it excuses what a killed leader leaves
 *  behind (a 2xx received but not written is sent again by the next leader), and nothing else. */
export function killRecord(holderId: string, atMs: number, restartedAtMs: number, detail: string): FaultRecord {
  return { kind: 'kill', slot: null, victim: holderId, victimWasLeader: false, epochAtFault: null, startedAt: atMs, endedAt: atMs, measureFrom: atMs,
    exclude: { holderId, until: restartedAtMs }, detail, resumedAt: null };
}

/**
 * The rules on a finished run: every accepted intent succeeded; none executed twice (with no fault: exactly one 2xx
 * received by the executor per intent, any other 2xx one whose answer it never read, and no call after it; with killed leaders, the checker's
 * resend_after_2xx rule: only after a 2xx the killed leader never wrote); attempt numbers contiguous (the checker's
 * attempts rule); per-key order (key_order); and every rule of the campaign's checker (no violation at all).
 */
export function expectCleanRun(h: History): ReturnType<typeof check>['stats'] {
  const byId = new Map(h.intents.map((i) => [i.intentId, i]));
  for (const a of h.accepted) expect(byId.get(a.intentId)?.status, `intent ${a.intentId} (key ${a.key})`).toBe('succeeded');
  for (const i of h.faults.length ? [] : h.intents) {
    const calls = h.provider.filter((p) => p.key === i.intentId).sort((a, b) => a.arrivedAt - b.arrivedAt);
    const mine = h.attempts.filter((a) => a.intentId === i.intentId);
    // The 2xx the executor received: its attempt recorded succeeded. Any other 2xx was one whose answer it never read
    // (its attempt closed as a timeout on a loaded machine, httpStatus null), so sending again was right.
    const received = calls.filter((p) => p.status >= 200 && p.status < 300
      && mine.find((a) => a.attemptNo === p.attemptNo)?.outcome === 'succeeded');
    expect(received.length, `2xx answers received for intent ${i.intentId}`).toBe(1);
    for (const p of calls.filter((c) => c.status >= 200 && c.status < 300 && c !== received[0])) {
      expect(mine.find((a) => a.attemptNo === p.attemptNo)?.httpStatus, `a 2xx of ${i.intentId} sent again was never read`).toBeNull();
    }
    expect(calls.filter((p) => p.arrivedAt > received[0]!.arrivedAt), `calls after the 2xx of ${i.intentId}`).toEqual([]);
  }
  const { violations, stats } = check(h);
  expect(violations).toEqual([]);
  return stats;
}
