// Every migration is additive for the previous release (docs/operations.md, Upgrades): the release named in
// test/support/previousRelease.json, built from git history by this test, runs unchanged on this release's schema.
// On a fresh database of each server (PostgreSQL, MariaDB, SQL Server): two processes of the previous release serve and execute
// a stream of intents (every tenth answered 503 once); this checkout's `npm run migrate` runs while they do; a third
// process of the previous release starts on the new schema and its leader hands over to another one of it; then a
// process of this release joins and the old ones stop one by one (SIGTERM), the stream going on throughout. A count
// change asked of this release while the previous one is live is refused (409 naming its processes); once only this
// release is live it starts and completes. Then the rollback: a process of the previous release starts on what this
// release left (its schema and the count it changed) and carries on alone.
// Judged by counts and order: every intent accepted (201; a post refused while a migration holds a lock is sent again
// with its idempotency key, as clients do, and counted) and succeeded once, none sent again after a 2xx, attempt
// numbers contiguous, no stale-epoch write; intents accepted and executed by the previous release after the migrate
// exited, and an epoch of it acquired after that.
import { readFileSync } from 'node:fs';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startRecordingProvider, type RecordingProvider } from '../support/recordingProvider.js';
import { staleWrites } from '../support/fenceChecker.js';
import {
  ensureBuilt, FAST_ENV, findLeader, killAll, startHost, waitFor, type HostProcess, type PgTestDatabase,
} from '../support/localHostProcess.js';
import { serverDatabases } from '../support/dialects.js';
import { previousRelease, runMigrate, type PreviousRelease } from '../support/previousRelease.js';
import { COUNT_CHANGE_MIN_VERSION } from '../../src/version.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** A stream of intents, one at a time, round-robin over the current targets, sent as a client sends them: each with
 *  its own idempotency key, and again (same key, same host) after a 5xx or a failed connection until accepted (201,
 *  or 200 for a replay). A migration that locks a table can make intake answer 503 meanwhile (a statement timeout);
 *  those answers are kept in `refused`. Any other answer, or no acceptance within 30 s, stops the stream (`error`). */
class IntentStream {
  readonly accepted: { id: string; by: string; seq: number }[] = [];
  readonly refused: { seq: number; by: string; status: string; migrating: boolean }[] = [];
  /** Set by the test around `npm run migrate`, so each refusal says whether a migration was running. */
  migrating = false;
  private targets: HostProcess[] = [];
  private posted: (() => void)[] = [];
  private running = false;
  private done: Promise<void> = Promise.resolve();
  error: Error | null = null;

  start(targets: HostProcess[]): void {
    this.targets = targets;
    this.running = true;
    this.done = (async () => {
      for (let k = 0; this.running; k++) {
        const h = this.targets[k % this.targets.length]!;
        const by = h.holderIds[0]!;
        for (const end = Date.now() + 30_000; ;) {
          const r = await submit(h, k);
          if (r.status === 201 || r.status === 200) {
            this.accepted.push({ id: r.intentId, by, seq: k });
            break;
          }
          this.refused.push({ seq: k, by, status: String(r.status), migrating: this.migrating });
          if ((typeof r.status === 'number' && r.status < 500) || Date.now() > end) {
            this.error = new Error(`intent ${k} to ${by}: ${r.status}; its stderr: ${h.stderr().slice(-1500)}${problems(h)}`);
            this.running = false;
            break;
          }
          await sleep(100);
        }
        for (const w of this.posted.splice(0)) w();
        await sleep(20);
      }
    })();
  }

  /** New targets; resolves once no post to a former target can still be under way (the one in flight finished). */
  async retarget(targets: HostProcess[]): Promise<void> {
    this.targets = targets;
    if (this.running) await new Promise<void>((r) => this.posted.push(r));
  }

  async stop(): Promise<void> {
    this.running = false;
    await this.done;
    if (this.error) throw this.error;
  }
}

/** POST /api/intents with the idempotency key of intent k: the status (or the connection error) and the intent id. */
async function submit(h: HostProcess, k: number): Promise<{ status: number | string; intentId: string }> {
  try {
    const r = await fetch(`${h.api}/intents`, {
      method: 'POST', body: JSON.stringify({ payload: { k } }), signal: AbortSignal.timeout(10_000),
      headers: { 'content-type': 'application/json', 'idempotency-key': `upgrade-${k}` },
    });
    return { status: r.status, intentId: ((await r.json()) as { intentId?: string }).intentId ?? '' };
  } catch (e) {
    return { status: (e as Error).message, intentId: '' };
  }
}

/** The host's last warnings and errors from its log file (pino levels 40 and above), for a failure's message. */
function problems(h: HostProcess): string {
  let text = '';
  try { text = readFileSync(h.logFile, 'utf8'); } catch { return ''; }
  return text.split('\n').filter((l) => /"level":(40|50|60)/.test(l)).slice(-3).map((l) => `\n  ${l.slice(0, 500)}`).join('');
}

/** POST /api/ops/partitions {count} (no keys: the hosts run without FUNCTION_KEY and ADMIN_KEY). */
async function requestCount(h: HostProcess, count: number): Promise<{ status: number; body: Record<string, any> }> {
  const r = await fetch(`${h.api}/ops/partitions`, { method: 'POST', body: JSON.stringify({ count }), headers: { 'content-type': 'application/json' },
    signal: AbortSignal.timeout(10_000) });
  return { status: r.status, body: (await r.json()) as Record<string, any> };
}
const layoutOf = async (h: HostProcess) =>
  (await (await fetch(`${h.api}/ops/partitions`, { signal: AbortSignal.timeout(5_000) })).json()) as { count: number; active: unknown; changes: unknown[] };

let release: PreviousRelease | undefined;

describe.each(serverDatabases)('upgrade from the previous release ($name server)', (server) => {
  const skip = server.unavailable();
  let db: PgTestDatabase;
  let provider: RecordingProvider;
  const hosts: HostProcess[] = [];
  /** Per provider call, in arrival order: which intent, which attempt, what it was answered. */
  const answers: { intentId: string; attemptNo: number; status: number }[] = [];

  beforeAll(() => {
    ensureBuilt();
    if (!skip) release ??= previousRelease(); // built once per commit, cached outside the checkout
  }, 600_000);
  let stream: IntentStream | undefined;
  afterEach(async () => {
    await stream?.stop().catch(() => {});
    await killAll(hosts.splice(0));
    await provider?.close();
    await db?.drop();
  });

  const succeeded = async (ids: string[]) => {
    if (ids.length === 0) return 0;
    const rows = await db.sql<{ intent_id: string; status: string }>('SELECT intent_id, status FROM submission_intents');
    const done = new Set(rows.filter((r) => r.status === 'succeeded').map((r) => r.intent_id));
    return ids.filter((id) => done.has(id)).length;
  };
  /** Waits (a liveness guard, not a measure) until `n` intents accepted from index `from` on have succeeded; fails at
   *  once when the stream stopped, and names what the hosts wrote to stderr when the wait runs out. */
  const succeedFrom = async (stream: IntentStream, from: number, n: number, what: string) => {
    for (const end = Date.now() + 60_000; ;) {
      if (stream.error) throw stream.error;
      if ((await succeeded(stream.accepted.slice(from).map((a) => a.id))) >= n) return;
      if (Date.now() > end) {
        throw new Error(`${what}: fewer than ${n} of the intents accepted since #${from} succeeded within 60 s; stderr:\n` +
          hosts.map((h) => `${h.holderIds[0]}: ${h.stderr().slice(-400)}${problems(h)}`).join('\n'));
      }
      await sleep(200);
    }
  };
  const epochs = async () => (await db.sql<{ seq: string; lease_name: string; lease_epoch: string; holder_id: string; event: string }>(
    'SELECT seq, lease_name, lease_epoch, holder_id, event FROM submission_manager_lease_events ORDER BY seq'))
    .map((e) => ({ seq: Number(e.seq), leaseName: e.lease_name, epoch: Number(e.lease_epoch), holderId: e.holder_id, event: e.event }));
  const ledger = async () => (await db.sql<{ id: number | string }>('SELECT id FROM submission_manager_migrations ORDER BY id')).map((r) => Number(r.id));

  it('the previous release accepts and executes intents while this release migrates, then hands over to it', async (t) => {
    if (skip) return t.skip(skip);
    const prev = release!;
    db = await server.create();
    provider = await startRecordingProvider((c) => {
      const status = (c.payload as { k: number }).k % 10 === 0 && c.attemptNo === 1 ? 503 : 200;
      answers.push({ intentId: c.intentId, attemptNo: c.attemptNo, status });
      return { status };
    });
    // A live window well above the beat: a starved process's late heartbeat does not drop it from the registry (a
    // graceful stop deletes its row at once, so the window never delays what the test waits for).
    const env = (holder: string) => ({ ...FAST_ENV, DATABASE_URL: db.url, INSTANCES: '1', PROVIDER_URL: provider.url, HOLDER_ID: holder,
      INSTANCE_LIVE_WINDOW_MS: '30000' });
    const startOld = async (holder: string) => { const h = await startHost(env(holder), 60_000, prev.root); hosts.push(h); return h; };
    const stop = async (stream: IntentStream, h: HostProcess, rest: HostProcess[]) => {
      await stream.retarget(rest);
      h.signal('SIGTERM');
      expect((await h.exited).code, `${h.holderIds[0]} stops cleanly: ${h.stderr().slice(0, 800)}`).toBe(0);
    };

    // The previous release alone, on its own schema (its processes migrate at start).
    const [old1, old2] = await Promise.all([startOld('old1'), startOld('old2')]);
    const schemaBefore = await ledger();
    stream = new IntentStream();
    stream.start([old1!, old2!]);
    await succeedFrom(stream, 0, 8, 'the previous release executes');

    // This release's migrations under the running processes.
    stream.migrating = true;
    const migrated = await runMigrate(db.url);
    stream.migrating = false;
    const acceptedBeforeMigrateExit = stream.accepted.length;
    const epochAtMigrate = Math.max(...(await epochs()).map((e) => e.epoch)); // partition 0's: one partition so far
    expect(migrated.code, migrated.out).toBe(0);
    const schemaAfter = await ledger();
    const added = schemaAfter.filter((id) => !schemaBefore.includes(id));
    expect(migrated.out).toContain(added.length ? `applied migrations: ${added.join(', ')}` : 'database is up to date');
    expect(schemaAfter.slice(0, schemaBefore.length)).toEqual(schemaBefore);

    // The previous release on the new schema: one more of its processes starts (its cold start finds a newer schema),
    // and its leader hands over to another of its processes.
    const old3 = await startOld('old3');
    await stream.retarget([old1!, old2!, old3]);
    await succeedFrom(stream, acceptedBeforeMigrateExit, 8, 'the previous release executes on the new schema');
    const oldLeader = await findLeader([old1!, old2!, old3], 60_000);
    const oldRest = [old1!, old2!, old3].filter((h) => h !== oldLeader.host);
    await stop(stream, oldLeader.host, oldRest);
    const afterHandover = stream.accepted.length;
    await succeedFrom(stream, afterHandover, 8, 'the previous release executes after a handover on the new schema');

    // This release joins (ready for two partitions). While a process of the previous release is live, a count change
    // does not start: 409 naming those processes, nothing recorded. Then they stop one by one.
    const current = await startHost({ ...env('new1'), EXECUTOR_PARTITIONS: '2' });
    hosts.push(current);
    await stream.retarget([...oldRest, current]);
    await succeedFrom(stream, stream.accepted.length, 5, 'both releases side by side');
    const refused = await requestCount(current, 2);
    expect([refused.status, refused.body.type, refused.body.minimumVersion]).toEqual([409, 'urn:submission-manager:problem:older-release-live', COUNT_CHANGE_MIN_VERSION]);
    expect(refused.body.olderInstances).toEqual(oldRest.map((h) => ({ holderId: h.holderIds[0], version: prev.version }))
      .sort((a, b) => a.holderId!.localeCompare(b.holderId!)));
    expect(await layoutOf(current)).toMatchObject({ count: 1, active: null, changes: [] });
    for (let i = 0; i < oldRest.length; i++) {
      await stop(stream, oldRest[i]!, [...oldRest.slice(i + 1), current]);
      await succeedFrom(stream, stream.accepted.length, 5, `after ${oldRest[i]!.holderIds[0]} stopped`);
    }
    // Only this release is live (a graceful stop deletes the registry row): the change starts and completes.
    const started = await requestCount(current, 2);
    expect([started.status, started.body.created], JSON.stringify(started.body)).toEqual([202, true]);
    await waitFor('the count change completed', async () => {
      const l = await layoutOf(current);
      return l.count === 2 && l.active === null;
    }, 120_000, 500);
    await succeedFrom(stream, stream.accepted.length, 5, 'after the count change');

    // Rolled back: a process of the previous release starts on what this release left (its schema, a count it
    // changed), this release's process stops, and the previous release carries the stream on its own.
    const back = await startHost({ ...env('back1'), EXECUTOR_PARTITIONS: '2' }, 60_000, prev.root);
    hosts.push(back);
    await stream.retarget([current, back]);
    await stop(stream, current, [back]);
    const afterRollback = stream.accepted.length;
    await succeedFrom(stream, afterRollback, 8, 'the previous release after the rollback');
    await stream.stop();
    const ids = stream.accepted.map((a) => a.id);
    await waitFor('every intent succeeded', async () => (await succeeded(ids)) === ids.length, 60_000, 200);

    // Every intent accepted once and succeeded; no call after a 2xx; attempt rows numbered 1..n, and the calls are
    // exactly the rows not aborted (an aborted attempt was started, never sent: a drain or handover took it back).
    expect(new Set(ids).size).toBe(ids.length);
    const calls = new Map<string, { attemptNo: number; status: number }[]>();
    for (const a of answers) calls.set(a.intentId, [...(calls.get(a.intentId) ?? []), a]);
    for (const id of ids) {
      const c = calls.get(id) ?? [];
      expect(c.map((x) => x.status).filter((s) => s === 200), `${id}: one 2xx`).toEqual([200]);
      expect(c[c.length - 1]!.status, `${id}: nothing sent after its 2xx`).toBe(200);
    }
    const attempts = await db.sql<{ intent_id: string; attempt_no: number | string; holder_id: string; lease_epoch: number | string; outcome: string | null }>(
      'SELECT intent_id, attempt_no, holder_id, lease_epoch, outcome FROM submission_attempts ORDER BY intent_id, attempt_no');
    const byIntent = new Map<string, { no: number; sent: boolean }[]>();
    for (const a of attempts) byIntent.set(a.intent_id, [...(byIntent.get(a.intent_id) ?? []), { no: Number(a.attempt_no), sent: a.outcome !== 'aborted' }]);
    for (const id of ids) {
      const rows = byIntent.get(id) ?? [];
      expect(rows.map((r) => r.no), `${id}: attempt rows`).toEqual(rows.map((_, i) => i + 1));
      expect(rows.filter((r) => r.sent).map((r) => r.no), `${id}: the calls`).toEqual((calls.get(id) ?? []).map((x) => x.attemptNo));
    }
    const sentRows = attempts.filter((a) => a.outcome !== 'aborted');
    const events = await epochs();
    const audit = await db.sql<{ seq: string; lease_name: string; lease_epoch: string; action: string }>(
      'SELECT seq, lease_name, lease_epoch, action FROM submission_execution_audit ORDER BY seq');
    for (const name of new Set(events.map((e) => e.leaseName))) {
      expect(staleWrites(audit.filter((a) => a.lease_name === name).map((a) => ({ seq: Number(a.seq), leaseEpoch: Number(a.lease_epoch), action: a.action })),
        events.filter((e) => e.leaseName === name).map((e) => ({ seq: e.seq, leaseEpoch: e.epoch, event: e.event }))), name).toEqual([]);
    }

    // The previous release worked on the new schema: it accepted intents after the migrate exited, executed some of
    // them, and acquired an epoch after it; this release executed the last ones.
    const oldHolders = new Set([old1!, old2!, old3].map((h) => h.holderIds[0]!));
    const acceptedByOldAfter = stream.accepted.slice(acceptedBeforeMigrateExit).filter((a) => oldHolders.has(a.by)).map((a) => a.id);
    const executor = new Map(sentRows.map((a) => [a.intent_id, a.holder_id]));
    expect(acceptedByOldAfter.length).toBeGreaterThanOrEqual(8);
    expect(acceptedByOldAfter.filter((id) => oldHolders.has(executor.get(id)!)).length).toBeGreaterThanOrEqual(8);
    expect(events.filter((e) => e.event === 'acquired' && e.epoch > epochAtMigrate && oldHolders.has(e.holderId))).not.toEqual([]);
    expect(events.some((e) => e.event === 'acquired' && e.leaseName.endsWith('#1'))).toBe(true); // the second partition ran
    expect(sentRows.some((a) => a.holder_id === current.holderIds[0])).toBe(true);
    const rolledBack = stream.accepted.slice(afterRollback).map((a) => a.id);
    expect(rolledBack.filter((id) => executor.get(id) === back.holderIds[0]).length).toBe(rolledBack.length); // on both partitions
    console.log(`[upgrade, ${server.name}] ${prev.version} (${prev.commit.slice(0, 7)}) → this checkout: migrations ${added.join(', ') || 'none'} ` +
      `applied under it; ${ids.length} intents, ${acceptedByOldAfter.length} accepted by ${prev.version} after the migrate, ` +
      `${answers.filter((a) => a.status !== 200).length} answered 503 once by the provider; intake refused ` +
      `${stream.refused.filter((r) => r.migrating).length} posts while migrating, ${stream.refused.filter((r) => !r.migrating).length} otherwise; epochs ${events.filter((e) => e.event === 'acquired').map((e) => `${e.leaseName.split('#')[1] ?? 0}/${e.epoch}:${e.holderId}`).join(' ')}`);
  }, 240_000);
});
