// Real local-host processes for system tests: spawn `node dist/src/local/main.js`, read its readable
// stdout (listening line, holder ids, leadership lines), talk to it over real HTTP, signal it. Also a fresh
// PostgreSQL database per test (dropped afterwards) for multi-process clusters.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { mkdtempSync, rmSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import pg from 'pg';
import { settingsSchema } from '../../src/configSchema.js';
import { LOCAL_SETTING_NAMES } from '../../src/local/localSettings.js';
import { PG_ADMIN_URL } from './pgServer.js';
import { projectRoot } from './projectRoot.js';

export const ROOT = projectRoot(import.meta.url);
const MAIN = path.join(ROOT, 'dist/src/local/main.js');

/** Short timings so failover and takeover happen in seconds. */
export const FAST_ENV: Record<string, string> = {
  EXECUTOR_SCHEDULE: '*/1 * * * * *', LEASE_DURATION_MS: '3000', LEASE_RENEW_INTERVAL_MS: '1000',
  EXECUTOR_TICK_BUDGET_MS: '800', PROVIDER_TIMEOUT_MS: '1000', SCHEDULE_REFRESH_INTERVAL_MS: '200',
  COMMIT_GRACE_MS: '1500', DB_STATEMENT_TIMEOUT_MS: '1000', DEMO_PROVIDER_FAILURE_RATE: '0',
  DEMO_PROVIDER_LATENCY_MS: '10', RETRY_BASE_DELAY_MS: '100', RETRY_MAX_DELAY_MS: '500', PORT: '0',
};

/** `npm test` builds first; a bare `vitest run` builds here when dist/ is older than the sources (scripts/build.mjs:
 *  one build at a time per checkout, whole files only, so test files and `npm start` may call it concurrently). */
export function ensureBuilt(): void {
  const r = spawnSync(process.execPath, [path.join(ROOT, 'scripts/build.mjs'), '--if-stale'], { cwd: ROOT, encoding: 'utf8' });
  if (r.status !== 0) console.warn(`[localHostProcess] tsc reported errors (dist emitted anyway):\n${(r.stdout + r.stderr).slice(0, 2000)}`);
}

export interface HostProcess {
  child: ChildProcess;
  pid: number;
  /** `http://127.0.0.1:<port>/api` */
  api: string;
  holderIds: string[];
  lines: string[];
  stderr(): string;
  waitForLine(re: RegExp, timeoutMs?: number, from?: number): Promise<RegExpMatchArray>;
  exited: Promise<{ code: number | null; signal: NodeJS.Signals | null }>;
  signal(sig: NodeJS.Signals): void;
  logFile: string;
}

export const tmpDir = (prefix: string) => mkdtempSync(path.join(os.tmpdir(), `sm-${prefix}-`));

/** Spawn a host; resolves once it prints where it listens (rejects with its stderr if it exits first). The start
 *  timeout is generous: a new embedded database (PGlite initdb) takes over 30 s on a loaded 2-core runner. `root`: the
 *  built release to run (this checkout by default; test/support/previousRelease.ts builds an earlier one). */
export async function startHost(env: Record<string, string>, startTimeoutMs = 60_000, root = ROOT): Promise<HostProcess> {
  const clean: Record<string, string | undefined> = { ...process.env };
  for (const k of [...Object.keys(settingsSchema.shape), ...LOCAL_SETTING_NAMES]) delete clean[k];
  const logFile = path.join(tmpDir('log'), 'host.log');
  const main = root === ROOT ? MAIN : path.join(root, 'dist/src/local/main.js');
  const child = spawn(process.execPath, [main], { cwd: root, env: { ...clean, LOG_FILE: logFile, ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  const lines: string[] = [];
  let err = '';
  let partial = '';
  const waiters = new Set<() => void>();
  child.stdout!.setEncoding('utf8').on('data', (d: string) => {
    const parts = (partial + d).split('\n');
    partial = parts.pop()!;
    lines.push(...parts);
    for (const w of waiters) w();
  });
  child.stderr!.setEncoding('utf8').on('data', (d: string) => (err += d));
  const exited = new Promise<{ code: number | null; signal: NodeJS.Signals | null }>((r) =>
    child.on('exit', (code, signal) => {
      r({ code, signal });
      for (const w of waiters) w();
    }));
  const waitForLine = (re: RegExp, timeoutMs = 15_000, from = 0) => new Promise<RegExpMatchArray>((resolve, reject) => {
    const check = () => {
      for (const l of lines.slice(from)) {
        const m = re.exec(l);
        if (m) return done(() => resolve(m));
      }
      if (child.exitCode !== null || child.signalCode !== null) {
        done(() => reject(new Error(`host exited (${child.exitCode ?? child.signalCode}) before printing ${re}: ${err.trim()}`)));
      }
    };
    const timer = setTimeout(() => done(() => reject(new Error(`no line ${re} within ${timeoutMs} ms; stdout:\n${lines.join('\n')}\nstderr: ${err}`))), timeoutMs);
    const done = (f: () => void) => {
      clearTimeout(timer);
      waiters.delete(check);
      f();
    };
    waiters.add(check);
    check();
  });
  let listening: RegExpMatchArray;
  let holders: RegExpMatchArray;
  try {
    listening = await waitForLine(/listening on (http:\/\/127\.0\.0\.1:\d+\/api)/, startTimeoutMs);
    holders = await waitForLine(/holder ids: ([^;]+);/, 2_000);
  } catch (e) {
    child.kill('SIGKILL');
    await exited;
    removeLogs(logFile);
    throw e;
  }
  return {
    child, pid: child.pid!, api: listening[1]!, lines, logFile, exited, waitForLine,
    holderIds: holders[1]!.split(', ').map((x) => x.split('=')[1]!),
    stderr: () => err,
    signal: (sig) => void child.kill(sig),
  };
}

/** Host logs are kept only with KEEP_HOST_LOGS=1 (for debugging a failure). */
function removeLogs(logFile: string): void {
  if (!process.env.KEEP_HOST_LOGS) rmSync(path.dirname(logFile), { recursive: true, force: true });
}

/** Stop every host still running (SIGCONT first for stopped ones), without waiting for graceful exit. */
export async function killAll(hosts: HostProcess[]): Promise<void> {
  for (const h of hosts) {
    if (h.child.exitCode === null && h.child.signalCode === null) {
      h.child.kill('SIGCONT');
      h.child.kill('SIGKILL');
    }
  }
  await Promise.all(hosts.map((h) => h.exited));
  for (const h of hosts) removeLogs(h.logFile);
}

export interface ReadyView { mode: 'leader' | 'follower'; holderId: string; leaseEpoch: number | null; leaseExpiresAt: string | null }

export async function readyz(api: string, timeoutMs = 1_000): Promise<ReadyView> {
  const r = await fetch(`${api}/readyz`, { headers: { accept: 'application/json' }, signal: AbortSignal.timeout(timeoutMs) });
  return (await r.json()) as ReadyView;
}

export async function waitFor<T>(what: string, probe: () => Promise<T | null | undefined | false>, timeoutMs = 15_000, everyMs = 100): Promise<T> {
  const end = Date.now() + timeoutMs;
  let last: unknown;
  for (;;) {
    try {
      const v = await probe();
      if (v) return v;
    } catch (e) {
      last = e;
    }
    if (Date.now() > end) throw new Error(`${what}: not within ${timeoutMs} ms${last ? ` (last error: ${(last as Error).message})` : ''}`);
    await new Promise((r) => setTimeout(r, everyMs));
  }
}

/** The one leader among single-instance hosts, by their own /readyz (ignores unreachable ones). */
export async function findLeader(hosts: HostProcess[], timeoutMs = 15_000): Promise<{ host: HostProcess; view: ReadyView }> {
  return waitFor('a single leader', async () => {
    const views = await Promise.all(hosts.map((h) => readyz(h.api).then((v) => ({ host: h, view: v }), () => null)));
    const leaders = views.filter((v) => v?.view.mode === 'leader');
    return leaders.length === 1 ? leaders[0]! : null;
  }, timeoutMs);
}

export async function postIntent(api: string, payload: Record<string, unknown>, key?: string): Promise<{ status: number; intentId: string }> {
  const r = await fetch(`${api}/intents`, {
    method: 'POST', body: JSON.stringify({ payload }), signal: AbortSignal.timeout(5_000),
    headers: { 'content-type': 'application/json', ...(key ? { 'x-functions-key': key } : {}) },
  });
  const body = (await r.json()) as { intentId?: string };
  return { status: r.status, intentId: body.intentId ?? '' };
}

export async function intentStatus(api: string, id: string, key?: string): Promise<string> {
  const r = await fetch(`${api}/intents/${id}`, { headers: key ? { 'x-functions-key': key } : {}, signal: AbortSignal.timeout(2_000) });
  return ((await r.json()) as { status: string }).status;
}

export interface PgTestDatabase {
  url: string;
  sql<R = Record<string, unknown>>(text: string, params?: unknown[]): Promise<R[]>;
  drop(): Promise<void>;
}

/** A fresh PostgreSQL database on the test server (the hosts migrate it concurrently at start). */
export async function createPgDatabase(): Promise<PgTestDatabase> {
  const name = `sm_proc_${randomBytes(5).toString('hex')}`;
  const admin = new pg.Client({ connectionString: PG_ADMIN_URL });
  await admin.connect();
  try {
    await admin.query(`CREATE DATABASE ${name}`);
  } finally {
    await admin.end();
  }
  const url = PG_ADMIN_URL.replace(/\/[^/?]*(\?|$)/, `/${name}$1`);
  const pool = new pg.Pool({ connectionString: url, max: 2 });
  // An idle client whose session ends (DROP DATABASE … WITH (FORCE) while pool.end() is still closing it) emits
  // 'error' on the pool; without a listener that is an uncaught exception in the test run.
  pool.on('error', () => {});
  return {
    url,
    sql: async (text, params) => (await pool.query(text, params)).rows as never[],
    async drop() {
      await pool.end().catch(() => {});
      const c = new pg.Client({ connectionString: PG_ADMIN_URL });
      await c.connect();
      try {
        await c.query(`DROP DATABASE IF EXISTS ${name} WITH (FORCE)`);
      } finally {
        await c.end();
      }
    },
  };
}
