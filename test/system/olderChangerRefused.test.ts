// An earlier release's instance live during a count change this release requested takes no part in it
// (docs/reliability.md, "Mixed-version campaign"). On a fresh database of each server (PostgreSQL, MariaDB, SQL
// Server), migrated by this checkout: this release's store requests 1 → 2 with no instance live; a process of the previous release
// (test/support/previousRelease.json, built from git) then starts alone, and its changer's preparing batch is refused
// by the database at every step (the change stays preparing, nothing moved, no lease taken). This release's store then
// runs the preparing pass to its end, so the old changer takes partition 0's lease and claims — refused at every step
// too (its step fails and it keeps lease 0 while it lives: it takes the next leases only after a claim). A process of
// this release starts beside it and waits for it (an earlier release is live); the old process stops (SIGTERM, exit
// 0, having prepared, claimed and switched nothing), and this release's changer claims, switches (the layout
// generation raised: this release's switch) and completes the change; an intent accepted then succeeds.
// Without the migrations' constraints the old changer prepares, claims and switches the change with its own code.
// The previous release (0.2.0) logs each refused step as partition_change_step_failed (partition_change_stuck from
// PARTITION_CHANGE_STUCK_STEPS on) with the change's state and the error's class and SQL code only (a CHECK violation:
// 23514 on PostgreSQL, 4025 on MariaDB, 3819 on MySQL, 547 on SQL Server; never the message, so not the constraint's
// name), and counts it on the change row (failed_steps, last_step_error): the only CHECKs its statements can break on
// that row are the release guards.
import { readFileSync } from 'node:fs';
import { afterEach, beforeAll, describe, expect, it } from 'vitest';
import { startRecordingProvider, type RecordingProvider } from '../support/recordingProvider.js';
import { ensureBuilt, FAST_ENV, killAll, startHost, waitFor, type HostProcess, type PgTestDatabase } from '../support/localHostProcess.js';
import { serverDatabases } from '../support/dialects.js';
import { previousRelease, runMigrate, type PreviousRelease } from '../support/previousRelease.js';
import { partitionChangerHolderId } from '../../src/limits.js';
import { uuidv7 } from '../../src/intents/ids.js';
import { appVersion } from '../../src/version.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));

/** The host's log events named `event`, parsed. */
function events(h: HostProcess, event: string): Record<string, unknown>[] {
  let text = '';
  try { text = readFileSync(h.logFile, 'utf8'); } catch { return []; }
  return text.split('\n').filter((l) => l.includes(`"event":"${event}"`)).map((l) => JSON.parse(l) as Record<string, unknown>);
}

interface ChangeRow { state: string; changer: string | null; release_changer: string | null; switched_by: string | null; requested_release: string | null;
  prepared_at: Date | string | null }

/** A CHECK constraint violation, as the previous release reports a failed step (its error class and SQL code). */
const CHECK_VIOLATION = /StoreError data (23514|4025|3819|547)$/;

let release: PreviousRelease | undefined;

describe.each(serverDatabases)('an earlier release live during the preparing pass and as it ends ($name server)', (server) => {
  const skip = server.unavailable();
  let db: PgTestDatabase | undefined;
  let provider: RecordingProvider | undefined;
  const hosts: HostProcess[] = [];

  beforeAll(() => {
    ensureBuilt();
    if (!skip) release ??= previousRelease();
  }, 600_000);
  afterEach(async () => {
    await killAll(hosts.splice(0));
    await provider?.close();
    await db?.drop();
  });

  it('its changer is refused the preparing batch, then the claim, at every step, and prepares and switches nothing; this release\'s changer claims and switches the change once it stopped', async (t) => {
    if (skip) return t.skip(skip);
    const prev = release!;
    db = await server.create();
    provider = await startRecordingProvider(() => ({ status: 200 }));
    const migrated = await runMigrate(db.url);
    expect(migrated.code, migrated.out).toBe(0);
    const env = (holder: string) => ({ ...FAST_ENV, DATABASE_URL: db!.url, INSTANCES: '1', PROVIDER_URL: provider!.url, HOLDER_ID: holder,
      EXECUTOR_PARTITIONS: '2', INSTANCE_LIVE_WINDOW_MS: '30000' });
    const change = (id: string) => db!.sql<ChangeRow>(
      `SELECT state, changer, release_changer, switched_by, requested_release, prepared_at FROM submission_manager_partition_changes
        WHERE change_id = $1`, [id]);
    const count = async () => (await db!.sql<{ partition_count: number | string; layout_generation: number | string; recorded_by: string }>(
      'SELECT partition_count, layout_generation, recorded_by FROM submission_manager_partition_count WHERE id = 1'))[0]!;

    // This release requests the change (as POST /api/ops/partitions does), no instance live.
    const stores = await server.openStores(db.url, 10_000);
    const changeId = uuidv7();
    try {
      expect((await stores.partitions.requestChange(2, 'ops-test', changeId)).kind).toBe('created');
    } catch (e) {
      await stores.close();
      throw e;
    }
    // Its failed steps of the change, in log order: the change's state as it read it, and the reason.
    const failedSteps = (h: HostProcess) => [...events(h, 'partition_change_step_failed'), ...events(h, 'partition_change_stuck')]
      .filter((e) => e.change_id === changeId).sort((a, b) => String(a.time).localeCompare(String(b.time)))
      .map((e) => ({ state: String(e.state), reason: String(e.reason) }));
    const refusals = (h: HostProcess, state: string) => failedSteps(h).filter((f) => f.state === state).map((f) => f.reason);
    const stepReport = async () => (await db!.sql<{ failed_steps: number | string; last_step_error: string | null }>(
      'SELECT failed_steps, last_step_error FROM submission_manager_partition_changes WHERE change_id = $1', [changeId]))[0]!;
    const heldBy = async (holder: string) =>
      (await db!.sql<{ lease_name: string }>('SELECT lease_name FROM submission_manager_leases WHERE holder_id = $1', [holder])).map((l) => l.lease_name);

    // The previous release alone: its changer's preparing batch is refused at every step, and it takes no lease.
    const old = await startHost(env('old1'), 60_000, prev.root);
    hosts.push(old);
    const oldChanger = partitionChangerHolderId(old.holderIds[0]!);
    await waitFor('the old changer\'s preparing batch refused at two steps', async () => {
      const row = (await change(changeId))[0]!;
      if (row.state !== 'preparing') throw new Error(`the change is ${row.state}: the earlier release took part in its preparing pass`);
      return refusals(old, 'preparing').length >= 2;
    }, 30_000, 200);
    const prepareRefusals = refusals(old, 'preparing').length;
    expect(failedSteps(old).every((f) => f.state === 'preparing' && CHECK_VIOLATION.test(f.reason)), JSON.stringify(failedSteps(old))).toBe(true);
    expect(Number((await stepReport()).failed_steps)).toBeGreaterThanOrEqual(2); // its refusals counted on the change row
    expect((await stepReport()).last_step_error).toMatch(CHECK_VIOLATION);
    expect((await change(changeId))[0]).toMatchObject({ state: 'preparing', changer: null, prepared_at: null, requested_release: appVersion() });
    expect(await heldBy(oldChanger), 'the old changer took no lease').toEqual([]);

    // This release's preparing pass ends the step (as its changer does): the old changer takes lease 0, and its claim
    // is refused.
    try {
      let c = await stores.partitions.getChange(changeId);
      while (c?.state === 'preparing') c = await stores.partitions.prepareBatch(changeId, { limit: 1000, horizon: new Date() });
      expect(c?.state).toBe('pending');
    } finally {
      await stores.close();
    }
    await waitFor('the old changer\'s claim refused at two steps', async () => {
      const row = (await change(changeId))[0]!;
      if (row.changer !== null) throw new Error(`the change was claimed by ${row.changer} (state ${row.state}): the earlier release took part in it`);
      return refusals(old, 'pending').length >= 2;
    }, 30_000, 200);
    expect(failedSteps(old).every((f) => CHECK_VIOLATION.test(f.reason)), JSON.stringify(failedSteps(old))).toBe(true);
    expect((await change(changeId))[0]).toMatchObject({ state: 'pending', changer: null, requested_release: appVersion() });
    const held = await heldBy(oldChanger);
    expect(held, 'the old changer took lease 0 only').toHaveLength(1);

    // This release beside it: it waits while the old process is live, and nothing is claimed meanwhile.
    const current = await startHost(env('new1'));
    hosts.push(current);
    await waitFor('this release\'s changer waits for the earlier release', async () => events(current, 'partition_change_waiting_release').length > 0, 30_000, 200);
    await sleep(2_000);
    expect((await change(changeId))[0]).toMatchObject({ state: 'pending', changer: null });
    expect(Number((await count()).partition_count)).toBe(1);

    // The old process stops cleanly, having claimed and switched nothing; this release's changer drives the change.
    old.signal('SIGTERM');
    expect((await old.exited).code, old.stderr().slice(0, 800)).toBe(0);
    expect(events(old, 'partition_change_prepared')).toEqual([]);
    expect(events(old, 'partition_change_claimed')).toEqual([]);
    expect(events(old, 'partition_change_switched')).toEqual([]);
    await waitFor('the change completed', async () => (await change(changeId))[0]!.state === 'completed', 60_000, 200);
    const newChanger = partitionChangerHolderId(current.holderIds[0]!);
    expect((await change(changeId))[0]).toEqual({ state: 'completed', changer: newChanger, release_changer: newChanger, switched_by: newChanger,
      requested_release: appVersion(), prepared_at: expect.anything() });
    expect(await count()).toMatchObject({ recorded_by: newChanger });
    expect([Number((await count()).partition_count), Number((await count()).layout_generation)]).toEqual([2, 1]);

    // Execution goes on under the new count.
    const r = await fetch(`${current.api}/intents`, { method: 'POST', body: JSON.stringify({ payload: { k: 1 } }),
      headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(10_000) });
    expect(r.status).toBe(201);
    const { intentId } = (await r.json()) as { intentId: string };
    await waitFor('the intent succeeded', async () => (await db!.sql<{ status: string }>(
      'SELECT status FROM submission_intents WHERE intent_id = $1', [intentId]))[0]?.status === 'succeeded', 30_000, 200);
    console.log(`[older changer, ${server.name}] ${prev.version}'s changer refused at ${failedSteps(old).length} step(s) (${prepareRefusals} preparing; ` +
      `${[...new Set(failedSteps(old).map((f) => f.reason))].join(', ')}), ` +
      `held ${held.join(', ')}; ` +
      `${newChanger} claimed and switched after it stopped`);
  }, 240_000);
});
