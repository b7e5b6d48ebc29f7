// The dashboard with EXECUTOR_PARTITIONS=4 in a real browser (the style of dashboard.test.ts: headless Chromium
// driven by playwright-core, a local host process of 3 instances with ADMIN_KEY set, on each database server).
// The Partitions card shows every partition's holder, epoch, expiry, backlog and state as SQL holds them (compared
// with GET /api/leases and the intents' own partitions); a per-partition pause stops that partition alone, and a
// per-partition drain hands that partition over (a new epoch leads it) and asks nothing of the others; a partition's
// failing maintenance shows on its row. A change of the partition count (issue 26) shows step by step.
// Screenshots: docs/img/ with UPDATE_SCREENSHOTS=1 (first server only), else the temporary folder.
import { afterAll, beforeAll, describe, expect, inject, it as vitestIt } from 'vitest';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { launchDashboardPage } from '../support/browser.js';
import {
  FAST_ENV, ROOT, ensureBuilt, killAll, startHost, waitFor, type HostProcess, type PgTestDatabase,
} from '../support/localHostProcess.js';
import { startRecordingProvider, type RecordingProvider } from '../support/recordingProvider.js';
import { serverDatabases } from '../support/dialects.js';
import { assignPartition } from '../../src/intents/partition.js';
import { partitionLeaseName } from '../../src/limits.js';
import type { Fenced, LeaseToken } from '../../src/store/ports.js';
import type { Stores } from '../../src/store/stores.js';
import { openStores } from '../../src/store/open.js';
import { loadConfig } from '../../src/config.js';
import { silentLogger } from '../../src/observability/logger.js';

const BROWSER = inject('browserPath');
const KEY = 'dash-admin-key';
const P = 4;
const LEASE = 'dash-partitions';
const DOCS_IMG = process.env.UPDATE_SCREENSHOTS === '1' ? path.join(ROOT, 'docs/img') : os.tmpdir();
let IMG = os.tmpdir();

let db: PgTestDatabase;
let provider: RecordingProvider;
let host: HostProcess;
let browser: Browser;
let page: Page;
/** Scheduled (future) intents per partition, from the submit responses. */
const backlog = Array.from({ length: P }, () => 0);

interface LeaseView { partition: number; held: boolean; holderId: string | null; leaseEpoch: number }
const get = async <T>(p: string): Promise<T> => {
  const r = await fetch(`${host.api}/${p}${p.includes('?') ? '&' : '?'}code=${KEY}`);
  expect(r.status, p).toBe(200);
  return await r.json() as T;
};
const leases = async () => (await get<{ leases: LeaseView[] }>('leases')).leases;
const cells = async (k: number) => page.locator(`#partitions-table tr[data-partition="${k}"] td`).allTextContents();
/** The browser, the host, `other` (the provider, the test's stores) and the database, in that order. */
const stopAll = async (other: { close(): Promise<unknown> } | undefined) => {
  await browser?.close();
  if (host) await killAll([host]);
  await other?.close();
  await db?.drop();
};
/** The page reads everything again (its 5 s refresh, now): `data-loaded` is set again once it has rendered. */
const refresh = async () => {
  await page.evaluate(() => {
    delete document.body.dataset.loaded;
    window.dispatchEvent(new HashChangeEvent('hashchange'));
  });
  await page.waitForSelector('body[data-loaded="true"]', { state: 'attached' });
};

describe.each(serverDatabases)('dashboard with 4 partitions in Chromium ($name server)', (server) => {
  const skip = !BROWSER || server.unavailable() !== null;
  const it = vitestIt.skipIf(skip);
  beforeAll(async () => {
    if (skip) return;
    ensureBuilt();
    IMG = server === serverDatabases[0] ? DOCS_IMG : os.tmpdir();
    backlog.fill(0);
    db = await server.create();
    provider = await startRecordingProvider(() => ({ status: 200, delayMs: 20 }));
    host = await startHost({
      ...FAST_ENV, DATABASE_URL: db.url, PROVIDER_URL: provider.url, INSTANCES: '3', ADMIN_KEY: KEY, FUNCTION_KEY: KEY,
      EXECUTOR_PARTITIONS: String(P), LEASE_NAME: LEASE,
    });
    for (let i = 0; i < 12; i++) {
      const r = await fetch(`${host.api}/intents`, {
        method: 'POST', body: JSON.stringify({ payload: { order: i }, notBefore: '2099-01-01T00:00:00Z' }),
        headers: { 'content-type': 'application/json', 'x-functions-key': KEY, 'idempotency-key': `dash-p-${i}` },
      });
      expect(r.status).toBe(201);
      backlog[((await r.json()) as { partition: number }).partition]! += 1;
    }
    await waitFor('every partition led', async () => (await leases()).every((l) => l.held), 30_000, 200);
    ({ browser, page } = await launchDashboardPage(BROWSER));
  }, 120_000);

  afterAll(async () => {
    if (!skip) await stopAll(provider);
  });

  it('the Partitions card: four holders, their epochs and expiry, each partition\'s backlog, all running', async () => {
    await page.goto(`${host.api}/dashboard?code=${KEY}`);
    await page.waitForSelector('#partitions-table');
    expect(await page.isVisible('#partitions-card')).toBe(true);
    expect(await page.locator('#partitions-table tr[data-partition]').count()).toBe(P);
    await page.waitForFunction(() => [...document.querySelectorAll('#partitions-table td.expires')].every((c) => /^in \d+\.\d s$/.test(c.textContent ?? '')));
    const api = await leases();
    for (let k = 0; k < P; k++) {
      const [partition, holder, epoch, , back, last, state] = await cells(k);
      expect(partition).toBe(String(k));
      expect(host.holderIds).toContain(holder);
      expect(holder).toBe(api[k]!.holderId);
      expect(Number(epoch)).toBe(api[k]!.leaseEpoch);
      expect(back).toBe(`${backlog[k]} / 0`);
      expect([last, state]).toEqual(['—', 'running']);
    }
    expect(await page.textContent('#leader-title')).toBe('Leaders');
    expect(await page.textContent('#leader-summary')).toBe('4 of 4 partitions led');
    expect(await page.textContent('#paused-flag')).toBe('running');
    expect(await page.innerText('body')).not.toMatch(/\b(null|undefined)\b/); // no optional part shown as a word
    expect(await page.textContent('#partitions-summary')).toBe('4 of 4 led · 12 scheduled, 0 due');
    expect(await page.textContent('#timeline-title')).toBe('Leadership timeline (partition 0)');
    await page.screenshot({ path: path.join(IMG, 'dashboard-partitions.png'), fullPage: true });
  });

  it('a failing maintenance task of one partition shows on its row and in the Execution card', async () => {
    // The row partition 3's leader writes when its retention fails (OpsStore.recordMaintenance), arranged in SQL.
    const now = server.dbTimeSql();
    await db.sql(`INSERT INTO submission_manager_maintenance_state (lease_name, task, failures, last_error, changed_at, holder_id)
      VALUES ('${LEASE}#3', 'retention', 2, 'permission denied for table submission_attempts', ${now}, 'dash-leader-3')`);
    await refresh();
    await page.waitForSelector('#partitions-table tr[data-partition="3"] .maint');
    expect(await page.textContent('#partitions-table tr[data-partition="3"] .maint')).toBe('retention failing (2)');
    expect(await page.locator('#partitions-table .maint').count()).toBe(1);
    expect(await page.textContent('#maintenance')).toMatch(/^partition 3: retention FAILING \(2 in a row, last .* on dash-leader-3\): permission denied/);
    await db.sql(`DELETE FROM submission_manager_maintenance_state WHERE holder_id = 'dash-leader-3'`);
  });

  it('pause partition 2 alone (with a reason), then resume it; each confirmed', async () => {
    await page.click('#btn-pause-p2');
    expect(await page.textContent('#confirm-title')).toBe('Pause partition 2');
    await page.fill('#confirm-input', 'browser test');
    await page.click('#confirm-ok');
    await page.waitForFunction(() => (document.querySelector('#partitions-table tr[data-partition="2"] td.state') as HTMLElement | null)?.innerText === 'PAUSED\nbrowser test');
    expect(await page.textContent('#result')).toMatch(/^Pause partition 2: HTTP 200 — paused$/);
    expect(await get<{ paused: boolean }>('ops/execution?partition=2')).toMatchObject({ paused: true, reason: 'browser test' });
    for (const k of [0, 1, 3]) expect((await get<{ paused: boolean }>(`ops/execution?partition=${k}`)).paused).toBe(false);
    expect(await page.textContent('#paused-flag')).toBe('PAUSED 1 of 4');
    expect(await page.locator('#btn-resume-p2').count()).toBe(1);
    expect(await page.locator('#btn-pause').textContent()).toBe('Pause all');
    expect(await page.locator('#btn-resume').textContent()).toBe('Resume all'); // offered wherever a flag holds
    await page.locator('#partitions').screenshot({ path: path.join(IMG, 'dashboard-partitions-paused.png') });
    await page.click('#btn-resume-p2');
    await page.click('#confirm-ok');
    await page.waitForFunction(() => document.querySelector('#partitions-table tr[data-partition="2"] td.state')?.textContent === 'running');
    expect((await get<{ paused: boolean }>('ops/execution?partition=2')).paused).toBe(false);
    expect(await page.textContent('#paused-flag')).toBe('running');
  });

  it('drain partition 1: a new epoch leads it; no other partition was asked to hand over', async () => {
    const before = Number((await cells(1))[2]);
    await page.click('#btn-drain-p1');
    expect(await page.textContent('#confirm-title')).toBe('Drain partition 1');
    await page.click('#confirm-ok');
    await page.waitForFunction(() => /^Drain partition 1: HTTP 202 — status pending$/.test(document.querySelector('#result')?.textContent ?? ''));
    await waitFor('partition 1 led by a new epoch', async () => {
      await refresh();
      const [, holder, epoch] = await cells(1);
      return Number(epoch) > before && host.holderIds.includes(holder!);
    }, 30_000, 300);
    const asked = await db.sql<{ lease_name: string; status: string }>('SELECT lease_name, status FROM submission_manager_handover_requests');
    expect(asked).toEqual([{ lease_name: `${LEASE}#1`, status: 'completed' }]);
    expect(await page.textContent('#handovers')).toBe('no pending drain');
  });

  it('pause all and resume all from the Execution card act on the cluster (every partition): the API says the same', async () => {
    await page.click('#btn-pause');
    expect(await page.textContent('#confirm-title')).toBe('Pause the cluster');
    await page.click('#confirm-ok');
    await page.waitForFunction(() => document.querySelector('#paused-flag')?.textContent === 'PAUSED');
    expect(await page.textContent('#result')).toMatch(/HTTP 200 — cluster paused \(4 partitions\)$/);
    expect(await page.locator('#partitions-table td.state', { hasText: 'PAUSED (cluster)' }).count()).toBe(P);
    const paused = await get<{ scope: string; paused: boolean; partitions: { paused: boolean; heldBy: string | null }[] }>('ops/execution');
    expect(paused).toMatchObject({ scope: 'cluster', paused: true });
    expect(paused.partitions.map((c) => [c.paused, c.heldBy])).toEqual(Array.from({ length: P }, () => [false, 'cluster']));
    await page.click('#btn-resume');
    await page.click('#confirm-ok');
    await page.waitForFunction(() => document.querySelector('#paused-flag')?.textContent === 'running');
    const all = await get<{ partitions: { paused: boolean }[] }>('ops/execution');
    expect(all.partitions.map((c) => c.paused)).toEqual([false, false, false, false]);
  });

  // Issue 26, end to end: the running cluster's changer (partition 0's timer) executes what the card's form asks.
  /** Changes the count to `n` through the card; `succeeded`: intents succeeded once it is done (3 submitted during each). */
  const changeTo = async (n: number, succeeded: number) => {
    await refresh();
    await page.fill('#partition-count', String(n));
    await page.click('#btn-partition-count');
    await page.click('#confirm-ok');
    await page.waitForFunction((t) => document.querySelector('#result')?.textContent?.startsWith(t), `Change the partition count to ${n}: HTTP 202 — change recorded:`);
    // Intents accepted while it runs: executed once it completes.
    for (let i = 0; i < 3; i++) {
      const r = await fetch(`${host.api}/intents?code=${KEY}`, { method: 'POST', body: JSON.stringify({ payload: { during: n, i } }), headers: { 'content-type': 'application/json' } });
      expect(r.status).toBe(201);
    }
    await waitFor(`the change to ${n} completed`, async () => {
      const layout = await get<{ active: unknown; count: number }>('ops/partitions');
      return layout.count === n && layout.active === null;
    }, 60_000, 250);
    await waitFor(`partitions 0..${n - 1} led again`, async () => (await leases()).slice(0, n).every((l) => l.held && host.holderIds.includes(l.holderId!)), 30_000, 200);
    await refresh();
    expect(await page.textContent('#partition-count-recorded')).toBe(String(n));
    expect(Object.values(await page.locator('#partition-change-steps li').evaluateAll((lis) => lis.map((li) => li.className)))).toEqual(['done', 'done', 'done', 'done', 'done']);
    const items = (await get<{ items: { intentId: string; partitionKey: string | null; partition: number; status: string }[] }>('intents?limit=100')).items;
    for (const i of items) expect(i.partition, i.intentId).toBe(assignPartition(i, n));
    await waitFor('the intents accepted during the change succeeded', async () =>
      (await get<{ items: unknown[] }>('intents?status=succeeded&limit=100')).items.length === succeeded, 30_000, 200);
  };

  it('change the count to 2 from the card, then back to 4: each completes, its steps done; intents where the count puts them; executing again', async () => {
    await changeTo(2, 3);
    expect(await page.locator('#partitions-table tr.idle').count()).toBe(2);
    await page.locator('#partitions-card').screenshot({ path: path.join(IMG, 'dashboard-partition-change.png') });
    await changeTo(P, 6);
    expect(await page.locator('#partitions-table tr.idle').count()).toBe(0);
    expect((await get<{ changes: { fromCount: number; toCount: number; state: string }[] }>('ops/partitions')).changes.map((c) => [c.fromCount, c.toCount, c.state]))
      .toEqual([[2, 4, 'completed'], [4, 2, 'completed']]);
  });
});

// A change of the partition count on the card (issue 26), step by step: requested through the card's form, then
// driven by this test through the store port as the changer would (leases taken in order, claim, switch, one scan
// batch, complete), on a host without timers (TIMER_MODE=off: nobody leads, so the test may take every lease).
describe.each(serverDatabases)('dashboard: a partition count change step by step ($name server)', (server) => {
  const skip = !BROWSER || server.unavailable() !== null;
  const it = vitestIt.skipIf(skip);
  const CHANGER = 'test-changer';
  const CHANGE_LEASE = 'dash-change';
  let stores: Stores;
  let fence: LeaseToken[] = [];
  let changeId = '';
  const intents: { intentId: string; partitionKey: string | null }[] = [];
  const steps = async () => Object.fromEntries(await page.locator('#partition-change-steps li').evaluateAll((lis) =>
    lis.map((li) => [(li as HTMLElement).dataset.step, `${li.className}: ${li.firstChild?.textContent ?? ''}`])));
  const take = async (k: number) => {
    const r = await stores.lease.tryAcquire(partitionLeaseName(CHANGE_LEASE, k), CHANGER, 120_000);
    if (!r.acquired) throw new Error(`lease ${k} not acquired`);
    fence.push({ leaseName: r.lease.leaseName, holderId: CHANGER, leaseEpoch: r.lease.leaseEpoch });
  };
  const ok = <T>(f: Fenced<T>): T => {
    if (f.kind !== 'ok') throw new Error('lease lost');
    return f.value;
  };

  beforeAll(async () => {
    if (skip) return;
    ensureBuilt();
    IMG = server === serverDatabases[0] ? DOCS_IMG : os.tmpdir();
    db = await server.create();
    host = await startHost({
      ...FAST_ENV, DATABASE_URL: db.url, PROVIDER_URL: 'http://127.0.0.1:9/unused', INSTANCES: '1', ADMIN_KEY: KEY, FUNCTION_KEY: KEY,
      EXECUTOR_PARTITIONS: String(P), LEASE_NAME: CHANGE_LEASE, TIMER_MODE: 'off',
    });
    const config = loadConfig({ DATABASE_URL: db.url, EXECUTOR_PARTITIONS: String(P), LEASE_NAME: CHANGE_LEASE });
    stores = await openStores(config.database, config, silentLogger);
    intents.length = 0;
    for (let i = 0; i < 16; i++) {
      const partitionKey = i % 2 ? `customer-${i}` : null;
      const r = await fetch(`${host.api}/intents`, {
        method: 'POST', body: JSON.stringify({ payload: { order: i }, notBefore: '2099-01-01T00:00:00Z', ...(partitionKey ? { partitionKey } : {}) }),
        headers: { 'content-type': 'application/json', 'x-functions-key': KEY },
      });
      expect(r.status).toBe(201);
      intents.push({ intentId: ((await r.json()) as { intentId: string }).intentId, partitionKey });
    }
    ({ browser, page } = await launchDashboardPage(BROWSER));
  }, 120_000);

  afterAll(async () => {
    if (!skip) await stopAll(stores);
  });

  it('the card shows the recorded count and a form; requesting 2 records a pending change: leases taken 0/4, the form waits', async () => {
    await page.goto(`${host.api}/dashboard?code=${KEY}`);
    await page.waitForSelector('#partition-count-form');
    expect(await page.isVisible('#partitions-card')).toBe(true);
    expect(await page.textContent('#partition-count-recorded')).toBe('4');
    expect(await page.textContent('#partition-layout-generation')).toBe('0');
    expect(await page.textContent('#partition-changes')).toBe('no change requested yet');
    await page.fill('#partition-count', '2');
    await page.click('#btn-partition-count');
    expect(await page.textContent('#confirm-title')).toBe('Change the partition count to 2');
    expect(await page.textContent('#confirm-detail')).toContain('Deploy with the smaller EXECUTOR_PARTITIONS only after it completes.');
    await page.click('#confirm-ok');
    await page.waitForSelector('#partition-change-steps');
    expect(await page.textContent('#result')).toBe('Change the partition count to 2: HTTP 202 — change recorded: 4 → 2 (preparing)');
    const layout = await get<{ active: { changeId: string; state: string; requestedBy: string } }>('ops/partitions');
    changeId = layout.active.changeId;
    expect(layout.active).toMatchObject({ state: 'preparing', requestedBy: `admin@${host.holderIds[0]}` });
    expect(await steps()).toEqual({
      requested: `done: requested 4 → 2 by admin@${host.holderIds[0]}`, preparing: 'current: finished intents moved (not started) · execution goes on',
      leases: 'todo: leases taken 0/4 (partition leaders drain and release)',
      reassigning: 'todo: reassigning: 0 rows moved · not yet', completed: 'todo: completed',
    });
    expect(await page.textContent('#partition-change-active')).toBe('change in progress: 4 → 2 (preparing); execution goes on while finished intents move, then pauses from the drain until it completes');
    expect(await page.isDisabled('#btn-partition-count')).toBe(true);
    await page.locator('#partitions-card').screenshot({ path: path.join(IMG, 'dashboard-partition-change-pending.png') });
  });

  it('the changer prepares, takes leases 0 and 1 (2/4), then all four and switches (reassigning), moves the rows (scan done), completes', async () => {
    // The preparing pass in one batch over every id, with a horizon before every row: it moves nothing.
    expect((await stores.partitions.prepareBatch(changeId, { limit: 1_000_000, horizon: new Date(0) }))!.state).toBe('pending');
    await take(0);
    await take(1);
    expect(ok(await stores.partitions.claimChange(fence, changeId))).toMatchObject({ changer: CHANGER, state: 'pending' });
    await refresh();
    expect((await steps()).leases).toBe(`current: leases taken 2/4 by ${CHANGER}`);
    const held = await get<{ leases: { partition: number; heldByChanger: boolean }[] }>('ops/partitions');
    expect(held.leases.map((l) => l.heldByChanger)).toEqual([true, true, false, false]);

    await take(2);
    await take(3);
    expect(ok(await stores.partitions.switchCount(fence, changeId)).state).toBe('reassigning');
    await refresh();
    expect(await page.textContent('#partition-count-recorded')).toBe('2');
    expect(await page.textContent('#partition-layout-generation')).toBe('1'); // the switch raised it
    expect(await steps()).toMatchObject({ leases: `done: leases taken 4/4 by ${CHANGER}`, reassigning: 'current: reassigning: 0 rows moved · scan not started' });

    const rows = await stores.partitions.listForReassign({ after: null, limit: 100, modifiedSince: null, scope: 'all' });
    expect(rows).toHaveLength(intents.length);
    const moves = rows.flatMap((r) => {
      const to = assignPartition({ intentId: r.intentId, partitionKey: r.partitionKey }, 2);
      return to === r.partition ? [] : [{ intentId: r.intentId, partition: to }];
    });
    expect(moves.length).toBeGreaterThan(0);
    ok(await stores.partitions.moveIntents(fence, changeId, moves, { scanCursor: rows.at(-1)!.intentId, scanDone: true }));
    await refresh();
    expect((await steps()).reassigning).toMatch(new RegExp(`^current: reassigning: ${moves.length} rows moved · scan done \\d{4}-.*, catch-up \\(rows modified since the switch\\)$`));

    expect(ok(await stores.partitions.completeChange(fence, changeId)).state).toBe('completed');
    await refresh();
    expect(await steps()).toMatchObject({
      requested: `done: requested 4 → 2 by admin@${host.holderIds[0]}`, preparing: 'done: finished intents moved · execution goes on', leases: `done: leases taken 4/4 by ${CHANGER}`,
      reassigning: expect.stringMatching(new RegExp(`^done: reassigning: ${moves.length} rows moved · scan done .*, catch-up done$`)),
      completed: expect.stringMatching(/^done: completed \(\d+(\.\d)? (ms|s)\)$/),
    });
    expect(await page.locator('#partition-change-active').count()).toBe(0);
    expect(await page.locator('#partitions-table tr.idle').evaluateAll((trs) => trs.map((tr) => (tr as HTMLElement).dataset.partition))).toEqual(['2', '3']);
    expect(await page.isDisabled('#btn-partition-count')).toBe(false);
    expect(await page.locator(`#partition-changes tr[data-change="${changeId}"] td`).allTextContents())
      .toEqual([expect.any(String), '4 → 2', 'completed', String(moves.length), expect.any(String), expect.stringMatching(/ \(.+\)$/), `admin@${host.holderIds[0]}`]);
    const after = await get<{ count: number; active: unknown; leases: { held: boolean }[] }>('ops/partitions');
    expect([after.count, after.active, after.leases.map((l) => l.held)]).toEqual([2, null, [false, false]]); // released; 0..count−1 only
    // Every intent is where the count of 2 puts it, as the API reads it.
    for (const i of intents) expect((await get<{ partition: number }>(`intents/${i.intentId}`)).partition).toBe(assignPartition(i, 2));
    await page.click('#partitions-card details summary');
    await page.locator('#partitions-card').screenshot({ path: path.join(IMG, 'dashboard-partition-change-completed.png') });
  });

  it('a change whose steps keep failing: STUCK with its reason on the card; cancelled from the card, the count stays', async () => {
    const r = await fetch(`${host.api}/ops/partitions`, { method: 'POST', body: '{"count":3}', headers: { 'content-type': 'application/json', 'x-functions-key': KEY } });
    expect(r.status).toBe(202);
    const id = ((await r.json()) as { change: { changeId: string } }).change.changeId;
    for (let i = 0; i < 5; i++) await stores.partitions.recordStepFailure(id, 'StoreError transient 57014'); // PARTITION_CHANGE_STUCK_STEPS: 5
    await refresh();
    await page.waitForSelector('#partition-change-failing[data-stuck="1"]');
    expect(await page.textContent('#partition-change-failing')).toMatch(/^STUCK: 5 step\(s\) in a row failed · last .* · StoreError transient 57014 · cancel it, or remove the cause/);
    await page.locator('#partitions-card').screenshot({ path: path.join(IMG, 'dashboard-partition-change-stuck.png') });
    await page.click('#btn-partition-cancel');
    expect(await page.textContent('#confirm-title')).toBe('Cancel the partition change');
    await page.click('#confirm-ok');
    await page.waitForSelector('#partition-change-steps[data-state="cancelled"]');
    expect(await page.locator('#partition-change-failing').count()).toBe(0);
    const after = await get<{ count: number; active: unknown; changes: { changeId: string; state: string; cancelledBy: string }[] }>('ops/partitions');
    expect([after.count, after.active]).toEqual([2, null]);
    expect(after.changes[0]).toMatchObject({ changeId: id, state: 'cancelled', cancelledBy: `admin@${host.holderIds[0]}` });
  });
});
