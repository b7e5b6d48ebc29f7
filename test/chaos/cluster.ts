// One run's cluster: a fresh database (PostgreSQL, or MariaDB / SQL Server with `--db mariadb|mssql`), a recording provider
// process, and N instance slots. Each slot runs one local-host process (INSTANCES=1) that reaches the database
// through its own TCP proxy, so a network fault can hit exactly one instance; a killed slot is refilled by a new
// process (new holder id). The database server is chosen once per campaign (useChaosServer).
import { execFileSync, spawn, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import pg from 'pg';
import { killHosts, startChaosHost, type ChaosHost } from './hostProcess.js';
import { PG_ADMIN_URL } from '../support/pgServer.js';
import { MYSQL_TEST_URL } from '../support/mysqlServer.js';
import { createMariaChaosDb, createMssqlChaosDb, MSSQL_CHAOS_NEEDS, MSSQL_CHAOS_SQL } from './chaosDatabases.js';
import { TcpProxy } from './tcpProxy.js';
import type { Rng } from './rng.js';

export interface Timings { leaseMs: number; renewMs: number; refreshMs: number; tickMs: number }

/** `every-instance`: every process runs the timer (adversarial: contention at every tick). `azure`: as Azure runs it,
 *  one process at a time, the holder of the listener lock (blob leases on a shared Azurite; host.json 15 s / 15 s). */
export type TimerSetup = { mode: 'every-instance' } | { mode: 'azure'; storage: string; hostId: string };

/** Short lease; every relational rule of src/config.ts holds (budget 700 + provider 800 + margin 400 < 2000).
 *  `partitions` > 1 (issue 25): EXECUTOR_PARTITIONS, a pool of 3 connections per partition + 1 (config.ts refuses
 *  fewer than 3 per partition: one process may lead them all), and the instance heartbeat scaled down with the lease:
 *  the fair share counts a partition as held by the instance whose heartbeat reports it until that heartbeat leaves
 *  the live window, so a window longer than the lease (the defaults: 15 s against this 2-s lease; in production 15 s
 *  against 60 s) would hold a dead leader's partitions past their lease. One partition: the environment as before. */
export function hostEnv(t: Timings, timers: TimerSetup = { mode: 'every-instance' }, partitions = 1, limits: ProviderLimits = NO_LIMITS): Record<string, string> {
  return {
    PROVIDER_MAX_IN_FLIGHT: String(limits.maxInFlight), PROVIDER_RATE_LIMIT_PER_SEC: String(limits.ratePerSec),
    ...(partitions > 1 ? { EXECUTOR_PARTITIONS: String(partitions), ...PARTITIONED_HEARTBEAT } : {}),
    ...(timers.mode === 'azure'
      ? { TIMER_MODE: 'singleton', AzureWebJobsStorage: timers.storage, AzureFunctionsWebHost__hostid: timers.hostId }
      : { TIMER_MODE: 'every-instance' }),
    EXECUTOR_SCHEDULE: `*/${t.tickMs / 1000} * * * * *`, LEASE_DURATION_MS: String(t.leaseMs),
    LEASE_RENEW_INTERVAL_MS: String(t.renewMs), LEASE_SAFETY_MARGIN_MS: '400', EXECUTOR_TICK_BUDGET_MS: '700',
    PROVIDER_TIMEOUT_MS: '800', SCHEDULE_REFRESH_INTERVAL_MS: String(t.refreshMs), SCHEDULE_RECONCILE_INTERVAL_MS: '5000',
    COMMIT_GRACE_MS: '1500', DB_STATEMENT_TIMEOUT_MS: '1000', RETRY_BASE_DELAY_MS: '100', RETRY_MAX_DELAY_MS: '500',
    DB_POOL_MAX: partitions > 1 ? String(3 * partitions + 1) : '5', RETENTION_DAYS: '0', LOG_LEVEL: 'info', PORT: '0', INSTANCES: '1', DEMO_PROVIDER_VERBOSE: 'false',
  };
}

/** PROVIDER_MAX_IN_FLIGHT and PROVIDER_RATE_LIMIT_PER_SEC of the hosts, cluster-wide (0: none). */
export interface ProviderLimits { maxInFlight: number; ratePerSec: number }
export const NO_LIMITS: ProviderLimits = { maxInFlight: 0, ratePerSec: 0 };

/** The smallest live window config.ts allows with the campaign's 1-s statement timeout: 2 × 250 + 1 000 ms. */
const PARTITIONED_HEARTBEAT = { INSTANCE_HEARTBEAT_MS: '250', INSTANCE_LIVE_WINDOW_MS: '1500' };

/** libfaketime (Debian: `apt-get install faketime`), for `--skew`; null when not installed. */
export const FAKETIME_LIB = ['/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1', '/usr/lib/aarch64-linux-gnu/faketime/libfaketimeMT.so.1',
  '/usr/lib/faketime/libfaketimeMT.so.1', '/usr/local/lib/faketime/libfaketimeMT.so.1'].find((f) => existsSync(f)) ?? null;

/** A process whose wall clock (Date.now) is off by `offsetS` seconds; monotonic time (timers,
 *  performance.now — all the product's local decisions) is left alone, as on a real skewed machine. */
export function skewEnv(offsetS: number): Record<string, string> {
  if (!FAKETIME_LIB) throw new Error('--skew needs libfaketime (Debian: apt-get install faketime)');
  return { LD_PRELOAD: FAKETIME_LIB, FAKETIME: `${offsetS >= 0 ? '+' : ''}${offsetS}`, FAKETIME_DONT_FAKE_MONOTONIC: '1' };
}

export interface ChaosDb {
  name: string;
  url: string;
  sql<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
  drop(): Promise<void>;
  /** Wall ms of the first fenced start committed after `fromMs`, not by `exclude.holderId` before `exclude.untilMs`
   *  (of lease `leaseName` only, when given: issue 25). */
  firstStartAfter(fromMs: number, exclude: { holderId: string; untilMs: number }, leaseName?: string): Promise<number | null>;
}

/** The database server of the campaign. */
export type ChaosServer = 'postgres' | 'mariadb' | 'mssql';
let server: ChaosServer = 'postgres';
export const useChaosServer = (s: ChaosServer): void => {
  server = s;
};
export const chaosServer = (): ChaosServer => server;

/** The SQL the runner itself needs, per server: database now, a time column as epoch milliseconds (a double). */
const SERVER_SQL: Record<ChaosServer, { now: string; epochMs: (col: string) => string }> = {
  postgres: { now: 'clock_timestamp()', epochMs: (col) => `(extract(epoch FROM ${col}) * 1000)::float8` },
  mariadb: { now: 'UTC_TIMESTAMP(6)', epochMs: (col) => `(UNIX_TIMESTAMP(${col}) * 1000)` },
  mssql: MSSQL_CHAOS_SQL,
};
export const chaosSql = {
  now: () => SERVER_SQL[server].now,
  epochMs: (col: string) => SERVER_SQL[server].epochMs(col),
};

const FIRST_START_AFTER = {
  postgres: `SELECT (extract(epoch FROM min(at)) * 1000)::float8 AS t FROM submission_execution_audit
        WHERE action = 'start_attempts' AND at > to_timestamp($1 / 1000.0)
          AND NOT (holder_id = $2 AND at < to_timestamp($3 / 1000.0))`,
  mariadb: `SELECT UNIX_TIMESTAMP(MIN(at)) * 1000 AS t FROM submission_execution_audit
        WHERE action = 'start_attempts' AND at > FROM_UNIXTIME($1 / 1000.0)
          AND NOT (holder_id = $2 AND at < FROM_UNIXTIME(LEAST($3, 253402300799000) / 1000.0))`,
  mssql: MSSQL_CHAOS_SQL.firstStartAfter,
};

const firstStartAfter = (sql: ChaosDb['sql']) => async (fromMs: number, exclude: { holderId: string; untilMs: number }, leaseName?: string) => {
  const r = await sql<{ t: string | number | null }>(FIRST_START_AFTER[server] + (leaseName === undefined ? '' : ' AND lease_name = $4'), [fromMs, exclude.holderId,
    Number.isFinite(exclude.untilMs) ? exclude.untilMs : 253_402_300_799_000, ...(leaseName === undefined ? [] : [leaseName])]);
  return r[0]?.t == null ? null : Number(r[0].t);
};

/** The server's address for the instances' proxies, and its port when the URL names none. */
const serverUrl = () => {
  if (server === 'mssql' && !process.env.MSSQL_TEST_URL) throw new Error(MSSQL_CHAOS_NEEDS);
  return new URL({ postgres: PG_ADMIN_URL, mariadb: MYSQL_TEST_URL, mssql: process.env.MSSQL_TEST_URL ?? '' }[server]);
};
const DEFAULT_PORT: Record<ChaosServer, number> = { postgres: 5432, mariadb: 3306, mssql: 1433 };

const adminClient = async () => {
  const c = new pg.Client({ connectionString: PG_ADMIN_URL, connectionTimeoutMillis: 5_000 });
  c.on('error', () => {});
  await c.connect();
  return c;
};

/** A fresh database; its pool survives killed sessions and server restarts (errors are per query). */
export async function createChaosDb(): Promise<ChaosDb> {
  if (server === 'mariadb') return createMariaChaosDb(firstStartAfter);
  if (server === 'mssql') return createMssqlChaosDb(firstStartAfter);
  const name = `sm_chaos_${randomBytes(5).toString('hex')}`;
  const admin = await adminClient();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end().catch(() => {});
  }
  const u = new URL(PG_ADMIN_URL);
  u.pathname = `/${name}`;
  const pool = new pg.Pool({ connectionString: u.toString(), max: 3, connectionTimeoutMillis: 5_000, application_name: 'chaos-runner' });
  pool.on('error', () => {}); // idle client killed (pg restart): the pool drops it
  // Several statements in one text (one implicit transaction, e.g. a lock held while reading): their rows in order.
  const sql: ChaosDb['sql'] = async (text, params) => {
    const r: pg.QueryResult | pg.QueryResult[] = await pool.query(text, params);
    return (Array.isArray(r) ? r.flatMap((x) => x.rows) : r.rows) as never[];
  };
  return {
    name, url: u.toString(), sql, firstStartAfter: firstStartAfter(sql),
    async drop() {
      await pool.end().catch(() => {});
      for (let i = 0; ; i++) {
        try {
          const c = await adminClient();
          try {
            await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
          } finally {
            await c.end().catch(() => {});
          }
          return;
        } catch (e) {
          if (i >= 10) throw e; // the server may be restarting
          await new Promise((r) => setTimeout(r, 1_000));
        }
      }
    },
  };
}

export interface Slot {
  index: number;
  proxy: TcpProxy;
  host: ChaosHost | null;
  /** HOLDER_ID given to the process (its pool's application_name); the instance's holder id is `${base}-1`. */
  base: string;
  holderId: string;
  generation: number;
  stopped: boolean;
  /** EXECUTOR_PARTITIONS of the slot's processes. */
  partitions: number;
  /** The built release the slot's processes run (undefined: this checkout; mixedVersion.ts starts the previous one). */
  release?: string;
}

export class ChaosCluster {
  readonly slots: Slot[] = [];
  /** Every process ever started (for cleanup and holder → slot history). */
  readonly all: ChaosHost[] = [];
  readonly holders = new Map<string, number>();
  /** Wall-clock offset (s) of every process started, by holder id (only with `skew`). */
  readonly clockOffsets = new Map<string, number>();
  /** Each slot's own settings over the cluster's. */
  private readonly slotEnv = new Map<number, Record<string, string>>();

  /** `skew`: every process gets its own wall-clock offset, uniform in ±maxS seconds. */
  constructor(private readonly db: ChaosDb, private readonly env: Record<string, string>, private readonly runTag: string,
    private readonly logDir: string, private readonly skew: { maxS: number; rng: Rng } | null = null) {}

  /** The release new slots run (mixed-version campaign: the previous release's build until the upgrade). */
  release: string | null = null;

  /** `count` slots with the cluster's environment. */
  async start(count: number): Promise<void> {
    for (let i = 0; i < count; i++) await this.add({}, false);
    await Promise.all(this.slots.map((s) => this.spawn(s)));
  }

  /** One more slot, its settings over the cluster's (e.g. a smaller EXECUTOR_PARTITIONS), its process started. */
  async add(env: Record<string, string>, spawn = true, release: string | null = this.release): Promise<Slot> {
    const target = serverUrl();
    // MySQL's and SQL Server's (TDS) wire is forwarded unread (the lost-reply traps speak PostgreSQL's only).
    const proxy = new TcpProxy(target.hostname, Number(target.port || DEFAULT_PORT[server]), server === 'postgres' ? 'postgres' : 'raw');
    const slot: Slot = { index: this.slots.length, proxy, host: null, base: '', holderId: '', generation: 0, stopped: false,
      partitions: Number({ ...this.env, ...env }.EXECUTOR_PARTITIONS ?? 1), ...(release ? { release } : {}) };
    this.slots.push(slot); // before any await: concurrent adds get distinct indexes
    this.slotEnv.set(slot.index, env);
    await proxy.listen();
    if (spawn) await this.spawn(slot);
    return slot;
  }

  /** (Re)fill a slot with a fresh process. */
  async spawn(slot: Slot): Promise<void> {
    slot.generation++;
    slot.base = `${this.runTag}-s${slot.index}-g${slot.generation}`;
    const u = new URL(this.db.url);
    u.hostname = '127.0.0.1';
    u.port = String(slot.proxy.port);
    const offsetS = this.skew && this.skew.maxS > 0 ? this.skew.rng.int(-this.skew.maxS, this.skew.maxS) : null;
    const host = await startChaosHost({
      ...this.env, ...this.slotEnv.get(slot.index), DATABASE_URL: u.toString(), HOLDER_ID: slot.base, LOG_FILE: path.join(this.logDir, `${slot.base}.log`),
      ...(offsetS === null ? {} : skewEnv(offsetS)),
    }, path.join(this.logDir, `${slot.base}.out`), undefined, slot.release);
    if (offsetS !== null) this.clockOffsets.set(host.holderIds[0]!, offsetS);
    if (slot.release) host.release = slot.release;
    this.all.push(host);
    slot.host = host;
    slot.holderId = host.holderIds[0]!;
    slot.stopped = false;
    this.holders.set(slot.holderId, slot.index);
  }

  /** Holder ids of every process of the previous release started so far (a slot's release never changes). */
  olderReleaseHolders(): string[] {
    return [...this.holders].filter(([, i]) => this.slots[i]!.release).map(([h]) => h);
  }

  live(): Slot[] {
    return this.slots.filter((s) => s.host && !s.stopped);
  }

  /** The lease rows as the database holds them, by lease name (null when unreachable). */
  async leases(): Promise<Map<string, { holderId: string; epoch: number; live: boolean }> | null> {
    try {
      const r = await this.db.sql<{ lease_name: string; holder_id: string; lease_epoch: string; live: boolean }>(
        `SELECT lease_name, holder_id, lease_epoch, CASE WHEN expires_at > ${chaosSql.now()} THEN 1 ELSE 0 END AS live FROM submission_manager_leases`);
      return new Map(r.map((x) => [x.lease_name, { holderId: x.holder_id, epoch: Number(x.lease_epoch), live: Boolean(Number(x.live)) }]));
    } catch {
      return null;
    }
  }

  /** The lease row as the database holds it (null when unreachable); with one partition, the only row. */
  async lease(): Promise<{ holderId: string; epoch: number; live: boolean } | null> {
    const all = await this.leases();
    return all ? [...all.values()][0] ?? null : null;
  }

  /** The slot whose instance holds a live lease, waiting up to `timeoutMs` for one. */
  async leaderSlot(timeoutMs: number): Promise<{ slot: Slot; epoch: number } | null> {
    const end = Date.now() + timeoutMs;
    do {
      const l = await this.lease();
      const slot = l?.live ? this.slots.find((s) => s.holderId === l.holderId && s.host && !s.stopped) : undefined;
      if (slot) return { slot, epoch: l!.epoch };
      await new Promise((r) => setTimeout(r, 100));
    } while (Date.now() < end);
    return null;
  }

  /** pg_terminate_backend of every session of one instance (application_name = its HOLDER_ID). */
  async terminateSessions(slot: Slot): Promise<number> {
    if (server !== 'postgres') throw new Error('terminate: PostgreSQL only (written with pg_terminate_backend)');
    const r = await this.db.sql<{ n: number }>(
      `SELECT count(*) FILTER (WHERE pg_terminate_backend(pid))::int AS n FROM pg_stat_activity WHERE application_name = $1`, [slot.base]);
    return r[0]?.n ?? 0;
  }

  async stopAll(): Promise<void> {
    await killHosts(this.all);
    await Promise.all(this.slots.map((s) => s.proxy.close().catch(() => {})));
  }
}

/** Restart the campaign's database server (disrupts every database on it). Resolves when the command finished. */
export function restartPostgres(): Promise<void> {
  if (server === 'mariadb') return restartMariadb();
  if (server === 'mssql') return Promise.reject(new Error('pg_restart: not on SQL Server (a server the campaign does not run)'));
  const version = readdirSync('/etc/postgresql')[0];
  if (!version) return Promise.reject(new Error('no cluster under /etc/postgresql'));
  return new Promise((resolve, reject) => {
    const c = spawn('pg_ctlcluster', ['--skip-systemctl-redirect', version, 'main', 'restart'], { stdio: ['ignore', 'ignore', 'pipe'] });
    let err = '';
    c.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
    c.on('error', reject);
    c.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`pg_ctlcluster restart exited ${code}: ${err.trim()}`))));
  });
}

const run = (cmd: string, args: string[]) => new Promise<void>((resolve, reject) => {
  const c = spawn(cmd, args, { stdio: ['ignore', 'ignore', 'pipe'] });
  let err = '';
  c.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  c.on('error', reject);
  c.on('exit', (code) => (code === 0 ? resolve() : reject(new Error(`${cmd} exited ${code}: ${err.trim()}`))));
});

/** Shut the campaign's MariaDB down (mysqladmin waits until it is down), start it again (CHAOS_MARIADB_START, a
 *  shell command, for a server of the campaign's own; default the machine's server), wait until it answers. */
async function restartMariadb(): Promise<void> {
  const u = new URL(MYSQL_TEST_URL);
  const admin = [`-h${u.hostname}`, `-P${u.port || '3306'}`, `-u${decodeURIComponent(u.username) || 'root'}`,
    ...(u.password ? [`-p${decodeURIComponent(u.password)}`] : [])];
  await run('mysqladmin', [...admin, 'shutdown']);
  // Over TCP mysqladmin returns before the server is gone: a start meanwhile would find it still running.
  for (let i = 0; i < 120; i++) {
    if (!(await run('mysqladmin', [...admin, 'ping']).then(() => true, () => false))) break;
    await new Promise((r) => setTimeout(r, 250));
  }
  const start = process.env.CHAOS_MARIADB_START;
  const up = () => run('mysqladmin', [...admin, 'ping']).then(() => true, () => false);
  // The old process may still be exiting (start-stop-daemon then finds it "already running"): start again until up.
  for (let attempt = 0; attempt < 10; attempt++) {
    if (start) await run('sh', ['-c', start]);
    else await run('start-stop-daemon', ['--start', '--oknodo', '--background', '--exec', '/usr/sbin/mariadbd']);
    for (let i = 0; i < 12; i++) {
      if (await up()) return;
      await new Promise((r) => setTimeout(r, 250));
    }
  }
  throw new Error('MariaDB did not come back within 30 s of its restart');
}

/** Other test processes on this machine (vitest, another campaign): a PostgreSQL restart would break them.
 *  This process and its ancestors (`npm run chaos` → sh → node) do not count. */
export function othersTesting(): string[] {
  const mine = new Set<number>();
  for (let pid = process.pid; pid > 1 && !mine.has(pid);) {
    mine.add(pid);
    try {
      pid = Number(readFileSync(`/proc/${pid}/stat`, 'utf8').replace(/^.*\) /s, '').split(' ')[1]);
    } catch {
      break;
    }
  }
  try {
    return execFileSync('pgrep', ['-fa', 'vitest|dist/test/chaos/run.js'], { encoding: 'utf8' }).split('\n')
      .filter((l) => l.trim() && !mine.has(Number(l.split(' ')[0])) && !l.includes('pgrep'));
  } catch {
    return []; // pgrep exits 1 when nothing matches
  }
}
