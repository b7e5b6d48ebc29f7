// Shared benchmark plumbing: a fresh schema on the PostgreSQL server, a counting database wrapper, a
// no-op/latency provider in a child process, and table printing. Benchmarks never assert speed.
import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync } from 'node:fs';
import { spawn, type ChildProcess } from 'node:child_process';
import os from 'node:os';
import { openPgPool, type PgDatabase, type PgQueryable } from '../src/store/postgres/db.js';
import { createPostgresStores } from '../src/store/postgres/index.js';
import type { Stores } from '../src/store/stores.js';
import { systemClock } from '../src/lease/clock.js';
import { readyAhead, type ExecutorSettings } from '../src/executor/tickSummary.js';
import { ProviderGuard } from '../src/provider/guard.js';
import type { Provider } from '../src/provider/provider.js';

export const PG_URL = process.env.BENCH_PG_URL ?? process.env.PG_TEST_URL ?? 'postgres://postgres@127.0.0.1:5432/submission_manager_test';

export interface BenchSchema {
  schema: string;
  open(max: number): PgDatabase;
  /** A pool with its own statement timeout (the product's, where a benchmark runs the stores as the product does). */
  openWith(o: { max: number; statementTimeoutMs: number }): PgDatabase;
  drop(): Promise<void>;
}

export async function freshSchema(): Promise<BenchSchema> {
  const schema = `bench_${randomBytes(4).toString('hex')}`;
  const admin = openPgPool({ url: PG_URL, max: 1, statementTimeoutMs: 600_000 });
  await admin.query(`CREATE SCHEMA ${schema}`);
  await admin.close();
  // application_name = the schema, so a benchmark can find its own backends (backendCpuMs).
  const open = (max: number) => openPgPool({ url: PG_URL, max, statementTimeoutMs: 600_000, schema, applicationName: schema });
  const m = open(1);
  await createPostgresStores(m, 'postgres').migrate();
  await m.close();
  return {
    schema,
    open,
    openWith: (o) => openPgPool({ url: PG_URL, max: o.max, statementTimeoutMs: o.statementTimeoutMs, schema, applicationName: schema }),
    async drop() {
      const a = openPgPool({ url: PG_URL, max: 1, statementTimeoutMs: 600_000 });
      await a.query(`DROP SCHEMA ${schema} CASCADE`);
      await a.close();
    },
  };
}

/** Counts statements sent through a PgDatabase (transactions count BEGIN/COMMIT too). */
export function counting(db: PgDatabase): PgDatabase & { count: number } {
  const c = { count: 0 };
  const wrap = (q: PgQueryable): PgQueryable => ({
    query: (t, p) => {
      c.count++;
      return q.query(t, p);
    },
  });
  return Object.assign(c, {
    query: wrap(db).query,
    transaction: <T>(fn: (tx: PgQueryable) => Promise<T>) => {
      c.count += 2;
      return db.transaction((tx) => fn(wrap(tx)));
    },
    exec: (s: string) => db.exec(s),
    close: () => db.close(),
  }) as PgDatabase & { count: number };
}

export function stores(db: PgDatabase): Stores {
  return createPostgresStores(db, 'postgres');
}

/** Insert `n` due intents with one statement. */
export async function seedIntents(db: PgQueryable, n: number, opts: { status?: string; dueInMs?: number } = {}): Promise<void> {
  const contract = JSON.stringify({ provider: { url: null }, payload: { bench: true }, retry: { maxAttempts: 3, baseDelayMs: 10, maxDelayMs: 50 } });
  await db.query(`INSERT INTO submission_intents (intent_id, request_hash, contract, status, attempt_count, max_attempts,
      next_attempt_at, created_at, last_modified_at)
    SELECT gen_random_uuid(), repeat('0', 64), $2::jsonb, $3, 0, 3, clock_timestamp() + $4 * interval '1 ms', now(), clock_timestamp()
      FROM generate_series(1, $1)`, [n, contract, opts.status ?? 'scheduled', opts.dueInMs ?? -1000]);
}

/** The no-op provider's HTTP server: `node` = node:http; `raw` = a minimal HTTP/1.1 responder on node:net
 *  (reads each request's headers and Content-Length body, answers 200 `{}` in order, keep-alive), so a
 *  benchmark on a shared box spends less of its CPU on the harness's server. */
export type ProviderKind = 'node' | 'raw';

const NODE_PROVIDER = (latencyMs: number) => `const http=require('http');const s=http.createServer((q,r)=>{q.resume();q.on('end',()=>{const f=()=>{r.writeHead(200,{'content-type':'application/json'});r.end('{}')};${latencyMs}>0?setTimeout(f,${latencyMs}):f()})});s.keepAliveTimeout=60000;s.listen(0,'127.0.0.1',()=>console.log(s.address().port));`;

const RAW_PROVIDER = (latencyMs: number) => `const net=require('net');const OK=Buffer.from('HTTP/1.1 200 OK\\r\\ncontent-type: application/json\\r\\ncontent-length: 2\\r\\n\\r\\n{}');
const s=net.createServer((c)=>{c.setNoDelay(true);let b=Buffer.alloc(0);c.on('error',()=>{});c.on('data',(d)=>{b=b.length?Buffer.concat([b,d]):d;let n=0;
for(;;){const h=b.indexOf('\\r\\n\\r\\n');if(h<0)break;const m=/content-length: *(\\d+)/i.exec(b.toString('latin1',0,h));const end=h+4+(m?Number(m[1]):0);if(b.length<end)break;b=b.subarray(end);n++;}
if(n>0){const f=()=>{for(let i=0;i<n;i++)c.write(OK)};${latencyMs}>0?setTimeout(f,${latencyMs}):f()}})});
s.listen(0,'127.0.0.1',()=>console.log(s.address().port));`;

/** A provider in its own process (so it does not share our event loop): 200 after `latencyMs`. */
export async function startProviderProcess(latencyMs: number, kind: ProviderKind = 'node'): Promise<{ url: string; pid: number; stop(): void }> {
  const code = kind === 'raw' ? RAW_PROVIDER(latencyMs) : NODE_PROVIDER(latencyMs);
  const child: ChildProcess = spawn(process.execPath, ['-e', code], { stdio: ['ignore', 'pipe', 'inherit'] });
  const port = await new Promise<number>((resolve) => child.stdout!.once('data', (d) => resolve(Number(String(d).trim()))));
  return { url: `http://127.0.0.1:${port}/submit`, pid: child.pid!, stop: () => child.kill('SIGKILL') };
}

/** The provider guard production builds for one partition with no limits set: its in-flight cap at the concurrency
 *  (PROVIDER_MAX_IN_FLIGHT's default). BENCH_EXEC_GUARD=0: none (null). */
export function productionGuard(settings: ExecutorSettings): ProviderGuard | null {
  if (process.env.BENCH_EXEC_GUARD === '0') return null;
  return new ProviderGuard({ ratePerSec: 0, maxInFlight: settings.concurrency, breakerThreshold: 0, breakerCooldownMs: 30_000,
    retryAfterMaxMs: 60_000 }, systemClock, () => {}, { aheadPerPartition: readyAhead(settings) });
}

/** The executor settings every execution bench runs with: production's batch rule (start c ÷ 4, completion c ÷ 2),
 *  a 2 s tick, a 1 s refresh; `over` replaces any of them. */
export function benchExecutorSettings(concurrency: number, over: Partial<ExecutorSettings> = {}): ExecutorSettings {
  return {
    tickBudgetMs: 2_000, concurrency, providerTimeoutMs: 10_000, reconcileIntervalMs: 3_600_000,
    refresh: { intervalMs: 1_000, pageSize: 500, commitGraceMs: 1_000 },
    startBatch: Math.max(1, Math.floor(concurrency / 4)), completionBatch: Math.max(1, Math.floor(concurrency / 2)), minLeaderWorkMs: 100,
    ...over,
  };
}

/** A provider answering every call at once, in process (no HTTP): the executor's own and its database's cost alone. */
export const NO_HTTP: Provider = { submit: () => Promise.resolve({ kind: 'success', httpStatus: 200 }) };

/** The pid of the database server `url` names, when it runs on this machine (a loopback host) as a process named one
 *  of `comms` (mariadbd, mysqld; from /proc); else null (remote, or no /proc: its CPU is not measured). */
export function localServerPid(url: string, ...comms: string[]): number | null {
  if (!['127.0.0.1', 'localhost', '[::1]'].includes(new URL(url).hostname)) return null;
  try {
    for (const d of readdirSync('/proc')) {
      if (/^\d+$/.test(d) && comms.includes(readFileSync(`/proc/${d}/comm`, 'utf8').trim())) return Number(d);
    }
  } catch { /* no /proc, or a process gone meanwhile */ }
  return null;
}

/** CPU time (user + system, ms) this process has used so far. */
export function selfCpuMs(): number {
  const u = process.cpuUsage();
  return (u.user + u.system) / 1000;
}

export async function pool<T>(items: T[], concurrency: number, fn: (x: T) => Promise<void>): Promise<void> {
  let i = 0;
  await Promise.all(Array.from({ length: concurrency }, async () => {
    while (i < items.length) await fn(items[i++]!);
  }));
}

/** CPU time (user + system, ms) a process has used so far, from /proc (Linux; 0 if unreadable). */
export function procCpuMs(pid: number): number {
  try {
    const stat = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const f = stat.slice(stat.lastIndexOf(')') + 2).split(' ');
    return (Number(f[11]) + Number(f[12])) * 10; // utime, stime in clock ticks (USER_HZ = 100)
  } catch {
    return 0;
  }
}

/** CPU (ms) used so far by the PostgreSQL backends of a BenchSchema's pools (same machine only), by pid. */
export async function backendCpuMs(db: PgQueryable, schema: string): Promise<Map<number, number>> {
  const r = await db.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [schema]);
  return new Map(r.rows.map((x) => [x.pid, procCpuMs(x.pid)]));
}

/** CPU used between two backendCpuMs readings (backends that appeared meanwhile count from 0). */
export function cpuDeltaMs(before: Map<number, number>, after: Map<number, number>): number {
  let ms = 0;
  for (const [pid, v] of after) ms += v - (before.get(pid) ?? 0);
  return ms;
}

export function machine(): string {
  return `${os.cpus().length} × ${os.cpus()[0]?.model ?? 'cpu'}, ${Math.round(os.totalmem() / 2 ** 30)} GiB, Node ${process.version}`;
}

export function printTable(title: string, rows: Record<string, string | number>[]): void {
  console.log(`\n## ${title}`);
  if (rows.length === 0) return;
  const cols = Object.keys(rows[0]!);
  console.log(`| ${cols.join(' | ')} |\n|${cols.map(() => '---').join('|')}|`);
  for (const r of rows) console.log(`| ${cols.map((c) => r[c]).join(' | ')} |`);
}

export const fmt = (n: number, d = 0) => n.toFixed(d);
