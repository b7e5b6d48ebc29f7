// An earlier release's instance live during a count change this release requested takes no part in it
// (docs/reliability.md, "An earlier release's changer during a change"). On a fresh database of each server
// (PostgreSQL, MariaDB, SQL Server), migrated by this checkout: this release's store requests 1 → 2 with no instance live; a
// process of the previous release (test/support/previousRelease.json, built from git) then starts alone, so its
// changer runs the preparing pass to its end, takes partition 0's lease and claims — refused by the database at every
// step (its step fails and it keeps lease 0 while it lives: it takes the next leases only after a claim). A process of
// this release starts beside it and waits for it (an earlier release is live); the old process stops (SIGTERM, exit
// 0, having claimed and switched nothing), and this release's changer claims, switches (the layout generation
// raised: this release's switch) and completes the change; an intent accepted then succeeds.
// Without the migration's constraint the old changer claims and switches the change with its own code (generation 0).
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

interface ChangeRow { state: string; changer: string | null; release_changer: string | null; switched_by: string | null; requested_release: string | null }

let release: PreviousRelease | undefined;

describe.each(serverDatabases)('an earlier release live as the preparing pass ends ($name server)', (server) => {
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

  it('its changer is refused the claim at every step and switches nothing; this release\'s changer claims and switches the change once it stopped', async (t) => {
    if (skip) return t.skip(skip);
    const prev = release!;
    db = await server.create();
    provider = await startRecordingProvider(() => ({ status: 200 }));
    const migrated = await runMigrate(db.url);
    expect(migrated.code, migrated.out).toBe(0);
    const env = (holder: string) => ({ ...FAST_ENV, DATABASE_URL: db!.url, INSTANCES: '1', PROVIDER_URL: provider!.url, HOLDER_ID: holder,
      EXECUTOR_PARTITIONS: '2', INSTANCE_LIVE_WINDOW_MS: '30000' });
    const change = (id: string) => db!.sql<ChangeRow>(
      'SELECT state, changer, release_changer, switched_by, requested_release FROM submission_manager_partition_changes WHERE change_id = $1', [id]);
    const count = async () => (await db!.sql<{ partition_count: number | string; layout_generation: number | string; recorded_by: string }>(
      'SELECT partition_count, layout_generation, recorded_by FROM submission_manager_partition_count WHERE id = 1'))[0]!;

    // This release requests the change (as POST /api/ops/partitions does), no instance live.
    const stores = await server.openStores(db.url, 10_000);
    const changeId = uuidv7();
    try {
      expect((await stores.partitions.requestChange(2, 'ops-test', changeId)).kind).toBe('created');
    } finally {
      await stores.close();
    }

    // The previous release alone: its changer ends the preparing pass, takes lease 0, and its claim is refused.
    const old = await startHost(env('old1'), 60_000, prev.root);
    hosts.push(old);
    const oldChanger = partitionChangerHolderId(old.holderIds[0]!);
    await waitFor('the old changer\'s claim refused at two steps', async () => {
      const row = (await change(changeId))[0]!;
      if (row.changer !== null) throw new Error(`the change was claimed by ${row.changer} (state ${row.state}): the earlier release took part in it`);
      return events(old, 'partition_change_step_failed').length >= 2;
    }, 30_000, 200);
    const refusals = events(old, 'partition_change_step_failed').map((e) => JSON.stringify(e.sql_error ?? e));
    expect(refusals.every((r) => r.includes('ck_partition_changes_release_guard')), refusals.join('\n')).toBe(true);
    expect((await change(changeId))[0]).toMatchObject({ state: 'pending', changer: null, requested_release: appVersion() });
    const held = await db.sql<{ lease_name: string }>('SELECT lease_name FROM submission_manager_leases WHERE holder_id = $1', [oldChanger]);
    expect(held.map((l) => l.lease_name), 'the old changer took lease 0 only').toHaveLength(1);

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
    expect(events(old, 'partition_change_claimed')).toEqual([]);
    expect(events(old, 'partition_change_switched')).toEqual([]);
    await waitFor('the change completed', async () => (await change(changeId))[0]!.state === 'completed', 60_000, 200);
    const newChanger = partitionChangerHolderId(current.holderIds[0]!);
    expect((await change(changeId))[0]).toEqual({ state: 'completed', changer: newChanger, release_changer: newChanger, switched_by: newChanger,
      requested_release: appVersion() });
    expect(await count()).toMatchObject({ recorded_by: newChanger });
    expect([Number((await count()).partition_count), Number((await count()).layout_generation)]).toEqual([2, 1]);

    // Execution goes on under the new count.
    const r = await fetch(`${current.api}/intents`, { method: 'POST', body: JSON.stringify({ payload: { k: 1 } }),
      headers: { 'content-type': 'application/json' }, signal: AbortSignal.timeout(10_000) });
    expect(r.status).toBe(201);
    const { intentId } = (await r.json()) as { intentId: string };
    await waitFor('the intent succeeded', async () => (await db!.sql<{ status: string }>(
      'SELECT status FROM submission_intents WHERE intent_id = $1', [intentId]))[0]?.status === 'succeeded', 30_000, 200);
    const failedSteps = events(old, 'partition_change_step_failed').length;
    console.log(`[older changer, ${server.name}] ${prev.version}'s changer refused at ${failedSteps} step(s), held ${held.map((l) => l.lease_name).join(', ')}; ` +
      `${newChanger} claimed and switched after it stopped`);
  }, 240_000);
});
