// What a workload cost the PostgreSQL server, read from the server itself and attributed to the workload's own
// relations and backends, so other sessions on a shared server do not count: WAL from pg_waldump over the LSN range
// (records that touch one of the schema's relations, plus the commit records of their transactions), tuples from
// pg_stat_user_tables, buffer accesses from pg_statio_user_tables, CPU and bytes written from /proc of the backends
// (found by application_name). pg_waldump needs the server's pg_wal readable (same machine, as root or postgres);
// without it only the server-wide LSN difference is given (`walAttributed: false`). BENCH_PROFILE_WALDUMP=0 skips it.
import { spawn } from 'node:child_process';
import { readFileSync } from 'node:fs';
import { createInterface } from 'node:readline';
import pg from 'pg';
import type { PgQueryable } from '../src/store/postgres/db.js';
import { procCpuMs } from './support.js';

export interface ServerMark {
  lsn: string;
  tuples: Map<string, { ins: number; upd: number; hot: number; del: number; hit: number; read: number }>;
  procs: Map<number, { cpuMs: number; writeBytes: number }>;
}

export interface WalCost {
  bytes: number; fpiBytes: number; records: number; commits: number; blocks: number;
  byKind: Map<string, { records: number; bytes: number }>;
}

export interface ServerCost {
  walAttributed: boolean; wal: WalCost;
  ins: number; upd: number; hot: number; del: number; bufferHits: number; bufferReads: number;
  cpuMs: number; writeBytes: number; backends: number;
}

function procWriteBytes(pid: number): number {
  try {
    return Number(/write_bytes: (\d+)/.exec(readFileSync(`/proc/${pid}/io`, 'utf8'))?.[1] ?? 0);
  } catch {
    return 0;
  }
}

/** The workload's relations: every table, index and sequence of `schema`, with their TOAST tables and indexes. */
async function relations(db: PgQueryable, schema: string): Promise<Map<string, string>> {
  const r = await db.query<{ node: string; name: string }>(`
    SELECT pg_relation_filenode(c.oid)::text AS node, c.relname AS name FROM pg_class c
     WHERE c.relnamespace = $1::regnamespace AND pg_relation_filenode(c.oid) IS NOT NULL
    UNION ALL
    SELECT pg_relation_filenode(t.oid)::text, c.relname || ' (toast)' FROM pg_class c JOIN pg_class t ON t.oid = c.reltoastrelid
     WHERE c.relnamespace = $1::regnamespace
    UNION ALL
    SELECT pg_relation_filenode(x.indexrelid)::text, c.relname || ' (toast index)' FROM pg_class c JOIN pg_index x ON x.indrelid = c.reltoastrelid
     WHERE c.relnamespace = $1::regnamespace`, [schema]);
  return new Map(r.rows.map((x) => [x.node, x.name]));
}

/** Before a measured run: autovacuum off on the schema's tables (its WAL would be counted as the workload's);
 *  BENCH_PROFILE_ANALYZE=1 analyzes them first (statistics as after autovacuum's first pass; default: none, as after a burst). */
export async function quietSchema(db: PgQueryable, schema: string): Promise<void> {
  const r = await db.query<{ t: string }>(
    `SELECT format('%I.%I', $1::text, relname) AS t FROM pg_class WHERE relnamespace = $1::regnamespace AND relkind = 'r'`, [schema]);
  for (const { t } of r.rows) {
    if (process.env.BENCH_PROFILE_ANALYZE === '1') await db.query(`ANALYZE ${t}`);
    await db.query(`ALTER TABLE ${t} SET (autovacuum_enabled = false)`);
  }
}

/** Server counters for `schema` and the backends named `appName`. Before a run the table statistics are read first
 *  (after the wait), after a run the backends first: an idle pooled backend may exit during the wait (its statistics
 *  are flushed at exit, its /proc entry is gone). A backend that appears meanwhile counts from 0 (its startup included). */
export async function mark(db: PgQueryable, schema: string, appName: string, phase: 'before' | 'after'): Promise<ServerMark> {
  // A backend flushes its table statistics at most once a second, and when idle only after 10 s: wait them out.
  const settle = () => new Promise((r) => setTimeout(r, 11_000));
  const tuples = async () => {
    await db.query('SELECT pg_stat_clear_snapshot()');
    const t = await db.query<{ rel: string; ins: string; upd: string; hot: string; del: string; hit: string; read: string }>(`
      SELECT s.relname AS rel, n_tup_ins AS ins, n_tup_upd AS upd, n_tup_hot_upd AS hot, n_tup_del AS del,
             coalesce(heap_blks_hit, 0) + coalesce(idx_blks_hit, 0) + coalesce(toast_blks_hit, 0) + coalesce(tidx_blks_hit, 0) AS hit,
             coalesce(heap_blks_read, 0) + coalesce(idx_blks_read, 0) + coalesce(toast_blks_read, 0) + coalesce(tidx_blks_read, 0) AS read
        FROM pg_stat_user_tables s JOIN pg_statio_user_tables io USING (relid) WHERE s.schemaname = $1`, [schema]);
    return new Map(t.rows.map((x) => [x.rel, { ins: +x.ins, upd: +x.upd, hot: +x.hot, del: +x.del, hit: +x.hit, read: +x.read }]));
  };
  const procs = async () => {
    const pids = await db.query<{ pid: number }>('SELECT pid FROM pg_stat_activity WHERE application_name = $1', [appName]);
    const lsn = await db.query<{ lsn: string }>('SELECT pg_current_wal_lsn()::text AS lsn');
    return { lsn: lsn.rows[0]!.lsn, procs: new Map(pids.rows.map((x) => [x.pid, { cpuMs: procCpuMs(x.pid), writeBytes: procWriteBytes(x.pid) }])) };
  };
  if (phase === 'before') {
    await settle();
    const t = await tuples();
    return { ...(await procs()), tuples: t };
  }
  const p = await procs();
  await settle();
  return { ...p, tuples: await tuples() };
}

/** Holds the server's WAL from now until released (a temporary physical replication slot, dropped with its session
 *  even if this process dies): a checkpoint meanwhile (another session's DROP DATABASE forces one) would otherwise
 *  remove the segments pg_waldump has yet to read. */
export async function holdWal(url: string): Promise<{ release(): Promise<void> }> {
  const c = new pg.Client({ connectionString: url, application_name: 'bench-profile-wal' });
  await c.connect();
  await c.query(`SELECT pg_create_physical_replication_slot('bench_profile_' || pg_backend_pid(), true, true)`);
  return { release: () => c.end() };
}

/** WAL of the workload between two LSNs: records naming one of `nodes`, and the commits of their transactions. */
async function walOf(db: PgQueryable, from: string, to: string, nodes: Map<string, string>): Promise<WalCost | null> {
  if (process.env.BENCH_PROFILE_WALDUMP === '0') return null;
  const s = await db.query<{ bin: string; dir: string }>(
    `SELECT (SELECT setting FROM pg_config WHERE name = 'BINDIR') AS bin, current_setting('data_directory') || '/pg_wal' AS dir`).catch(() => null);
  if (!s) return null;
  const { bin, dir } = s.rows[0]!;
  const child = spawn(`${bin}/pg_waldump`, ['-p', dir, '-s', from, '-e', to], { stdio: ['ignore', 'pipe', 'ignore'] });
  const out: WalCost = { bytes: 0, fpiBytes: 0, records: 0, commits: 0, blocks: 0, byKind: new Map() };
  const ours = new Set<string>();
  const commits = new Map<string, number>();
  const blocks = new Set<string>();
  const add = (kind: string, bytes: number) => {
    const k = out.byKind.get(kind) ?? { records: 0, bytes: 0 };
    k.records++;
    k.bytes += bytes;
    out.byKind.set(kind, k);
  };
  const head = /^rmgr: (\S+)\s+len \(rec\/tot\):\s*(\d+)\/\s*(\d+), tx:\s*(\d+), lsn: \S+, prev \S+, desc: (\S+)/;
  const blk = /rel \d+\/\d+\/(\d+) (?:fork \S+ )?blk (\d+)( FPW)?/g;
  for await (const line of createInterface({ input: child.stdout! })) {
    const m = head.exec(line);
    if (!m) continue;
    const [, rmgr, rec, tot, tx, desc] = m;
    if (rmgr === 'Transaction' && desc!.startsWith('COMMIT')) {
      commits.set(tx!, Number(tot));
      continue;
    }
    let rel: string | undefined;
    for (const b of line.matchAll(blk)) {
      if (!nodes.has(b[1]!)) continue;
      rel ??= nodes.get(b[1]!);
      blocks.add(`${b[1]}/${b[2]}`);
    }
    if (!rel) continue;
    if (tx !== '0') ours.add(tx!);
    out.records++;
    out.bytes += Number(rec);
    out.fpiBytes += Number(tot) - Number(rec);
    add(`${rmgr} ${desc} · ${rel}`, Number(rec));
  }
  const code = await new Promise<number | null>((r) => child.on('close', r));
  if (out.records === 0 && code !== 0) return null;
  for (const [tx, bytes] of commits) {
    if (!ours.has(tx)) continue;
    out.commits++;
    out.records++;
    out.bytes += bytes;
    add('Transaction COMMIT', bytes);
  }
  out.blocks = blocks.size;
  return out;
}

/** The cost between `before` and now (`after` is taken here). */
export async function costSince(db: PgQueryable, schema: string, appName: string, before: ServerMark): Promise<ServerCost> {
  const after = await mark(db, schema, appName, 'after');
  const nodes = await relations(db, schema);
  const wal = await walOf(db, before.lsn, after.lsn, nodes);
  const global = await db.query<{ d: string }>('SELECT pg_wal_lsn_diff($1, $2)::text AS d', [after.lsn, before.lsn]);
  const c: ServerCost = {
    walAttributed: wal !== null,
    wal: wal ?? { bytes: Number(global.rows[0]!.d), fpiBytes: NaN, records: NaN, commits: NaN, blocks: NaN, byKind: new Map() },
    ins: 0, upd: 0, hot: 0, del: 0, bufferHits: 0, bufferReads: 0, cpuMs: 0, writeBytes: 0, backends: after.procs.size,
  };
  for (const [rel, a] of after.tuples) {
    const b = before.tuples.get(rel) ?? { ins: 0, upd: 0, hot: 0, del: 0, hit: 0, read: 0 };
    c.ins += a.ins - b.ins;
    c.upd += a.upd - b.upd;
    c.hot += a.hot - b.hot;
    c.del += a.del - b.del;
    c.bufferHits += a.hit - b.hit;
    c.bufferReads += a.read - b.read;
  }
  for (const [pid, a] of after.procs) {
    const b = before.procs.get(pid) ?? { cpuMs: 0, writeBytes: 0 };
    c.cpuMs += a.cpuMs - b.cpuMs;
    c.writeBytes += a.writeBytes - b.writeBytes;
  }
  return c;
}

/** Hooks a profiled run calls: `begin` after seeding (the schema's name), `done` instead of polling the table
 *  (a poll would count as the workload's), `end` after the last job, while the schema still exists. */
export interface RunProbe {
  begin(schema: string): Promise<void>;
  done(): boolean;
  end(schema: string): Promise<void>;
}
