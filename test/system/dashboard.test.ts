// The dashboard in a real browser: headless Chromium (or Chrome) driven by playwright-core against a local host
// process (3 instances, ADMIN_KEY set so `?code=` is exercised) with intents in every state, on each database
// server (PostgreSQL, MySQL/MariaDB, SQL Server: test/support/dialects.ts).
// Checks the leader, the counts and the charts; searches by idempotency key; opens an intent (payload
// redacted until asked); redrives a failed one through the confirmation dialog and sees it succeed; pauses
// and resumes. Screenshots are taken every run; they are written to docs/img/ (used by the README) with
// UPDATE_SCREENSHOTS=1 (from the first server of the list only), else to a temporary folder, so `npm test` leaves
// the work tree clean.
import { afterAll, beforeAll, describe, expect, inject, it as vitestIt } from 'vitest';
import { readFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import type { Browser, Page } from 'playwright-core';
import { launchDashboardPage } from '../support/browser.js';
import {
  FAST_ENV, ROOT, ensureBuilt, killAll, startHost, waitFor, type HostProcess, type PgTestDatabase,
} from '../support/localHostProcess.js';
import { startRecordingProvider, type RecordingProvider } from '../support/recordingProvider.js';
import { serverDatabases } from '../support/dialects.js';

/** Found by test/support/browser.ts: BROWSER_PATH, else /usr/bin/chromium and the other usual places. */
const BROWSER = inject('browserPath');
const KEY = 'dash-admin-key';
const DOCS_IMG = process.env.UPDATE_SCREENSHOTS === '1' ? path.join(ROOT, 'docs/img') : os.tmpdir();
let IMG = os.tmpdir();

let db: PgTestDatabase;
let provider: RecordingProvider;
let host: HostProcess;
let browser: Browser;
let page: Page;
let healed = false;
const ids: Record<string, string> = {};

async function submit(payload: Record<string, unknown>, key: string, extra: Record<string, unknown> = {}): Promise<string> {
  const r = await fetch(`${host.api}/intents`, {
    method: 'POST', body: JSON.stringify({ payload, ...extra }),
    headers: { 'content-type': 'application/json', 'x-functions-key': KEY, 'idempotency-key': key },
  });
  expect(r.status).toBe(201);
  return ((await r.json()) as { intentId: string }).intentId;
}
const counts = async () => Object.fromEntries((await db.sql<{ status: string; n: number | string }>(
  'SELECT status, COUNT(*) AS n FROM submission_intents GROUP BY status')).map((r) => [r.status, Number(r.n)]));

// Skipped without the database server or a browser (globalSetup printed why), required under CI=true.
describe.each(serverDatabases)('dashboard in Chromium ($name server)', (server) => {
  const skip = !BROWSER || server.unavailable() !== null;
  const it = vitestIt.skipIf(skip);
  beforeAll(async () => {
    if (skip) return;
    healed = false;
    ensureBuilt();
    IMG = server === serverDatabases[0] ? DOCS_IMG : os.tmpdir();
    db = await server.create();
    provider = await startRecordingProvider((c) => ((c.payload as { mode?: string }).mode === 'fail' && !healed
      ? { status: 400, body: '{"error":"order rejected: unknown SKU"}' } : { status: 200, delayMs: 20 }));
    host = await startHost({ ...FAST_ENV, DATABASE_URL: db.url, PROVIDER_URL: provider.url, INSTANCES: '3', ADMIN_KEY: KEY, FUNCTION_KEY: KEY });
    for (let i = 0; i < 6; i++) ids[`ok${i}`] = await submit({ order: i, sku: 'A-1' }, `dash-ok-${i}`);
    ids.fail = await submit({ order: 100, mode: 'fail', sku: 'Z-9' }, 'dash-fail-1', { maxAttempts: 1 });
    ids.fail2 = await submit({ order: 101, mode: 'fail' }, 'dash-fail-2', { maxAttempts: 1 });
    ids.later = await submit({ order: 200 }, 'dash-later', { notBefore: '2099-01-01T00:00:00Z' });
    ids.cancel = await submit({ order: 300 }, 'dash-cancel', { notBefore: '2099-01-01T00:00:00Z' });
    ids.flying = await submit({ order: 400 }, 'dash-flying', { notBefore: '2099-01-01T00:00:00Z' });
    await fetch(`${host.api}/intents/${ids.cancel}/cancel?code=${KEY}`, { method: 'POST' });
    await waitFor('6 succeeded and 2 failed', async () => { const c = await counts(); return c.succeeded === 6 && c.failed === 2; }, 30_000);
    // An intent shown in flight (arranged in SQL: the provider call of a leader that stalls mid-attempt).
    await db.sql("UPDATE submission_intents SET status = 'in_flight' WHERE intent_id = $1", [ids.flying]);
    ({ browser, page } = await launchDashboardPage(BROWSER));
  }, 120_000);

  afterAll(async () => {
    if (skip) return;
    await browser?.close();
    if (host) await killAll([host]);
    await provider?.close();
    await db?.drop();
  });

  it('is protected like the ops routes: no key → 401; ?code= works', async () => {
    expect((await fetch(`${host.api}/dashboard`)).status).toBe(401);
    const r = await fetch(`${host.api}/dashboard?code=${KEY}`);
    expect(r.status).toBe(200);
    expect(r.headers.get('content-type')).toMatch(/^text\/html/);
    expect(r.headers.get('referrer-policy')).toBe('no-referrer');
    expect((await fetch(`${host.api}/dashboard?code=${KEY}&data=nope`)).status).toBe(400);
  });

  it('overview: leader, counts, backlog and both charts', async () => {
    await page.goto(`${host.api}/dashboard?code=${KEY}`);
    await page.waitForSelector('body[data-loaded="true"]');
    const holder = (await page.textContent('#leader-holder'))!;
    expect(host.holderIds).toContain(holder);
    expect(Number(await page.textContent('#leader-epoch'))).toBeGreaterThanOrEqual(1);
    await page.waitForFunction(() => /expires in/.test(document.querySelector('#countdown')?.textContent ?? ''));
    expect(await page.textContent('#count-succeeded')).toBe('6');
    expect(await page.textContent('#count-failed')).toBe('2');
    expect(await page.textContent('#count-in_flight')).toBe('1');
    expect(await page.textContent('#count-cancelled')).toBe('1');
    expect(Number(await page.textContent('#count-scheduled'))).toBe(1);
    expect(await page.textContent('#due-now')).toBe('0');
    expect(await page.textContent('#maintenance')).toBe('retention: no failure recorded'); // leaders record failures in SQL (issue 21)
    expect(await page.innerText('body')).not.toMatch(/\b(null|undefined)\b/); // no optional part shown as a word
    const version = (JSON.parse(readFileSync(path.join(ROOT, 'package.json'), 'utf8')) as { version: string }).version;
    expect(await page.textContent('#served')).toMatch(new RegExp(`served by \\S+ \\(${version.replace(/\./g, '\\.')}\\) · cluster `)); // the release that answered
    expect(await page.locator('#charts .uplot canvas').count()).toBe(2);
    expect(await page.getAttribute('#charts', 'data-points')).toBe('60');
    expect(await page.locator('#failures-table tr').count()).toBe(3); // header + 2 failures
    expect(await page.textContent('#failures-table')).toContain('order rejected: unknown SKU');
    expect(await page.locator('#timeline tr').count()).toBeGreaterThanOrEqual(2);
    // One partition: no Partitions card, the overview's JSON has no `partitions` (the page is as before issue 25).
    expect(await page.isVisible('#partitions-card')).toBe(false);
    expect(await page.textContent('#leader-title')).toBe('Leader');
    expect(Object.keys(await (await fetch(`${host.api}/dashboard?data=overview&code=${KEY}`)).json() as object)).not.toContain('partitions');
    await page.screenshot({ path: path.join(IMG, 'dashboard-overview.png'), fullPage: true });
  });

  it('instances: the heartbeat rows with version, roles, last seen and partitions led; a gone one greyed', async () => {
    // Rows as instances write them (InstanceStore.heartbeat), one of an instance that stopped beating a minute ago.
    const ago = (seconds: number) => server.dbTimeSql(seconds);
    await db.sql(`INSERT INTO submission_manager_instances (holder_id, version, roles, started_at, last_seen_at, partitions_led) VALUES
      ('dash-inst-a', '0.1.0', 'http,timer', ${ago(300)}, ${ago(0)}, '0,2'),
      ('dash-inst-z', '0.0.9', 'http', ${ago(3600)}, ${ago(60)}, '')`);
    await page.goto(`${host.api}/dashboard?code=${KEY}`);
    await page.waitForSelector('#instances-table tr[data-holder="dash-inst-z"]');
    const row = async (h: string) => (await page.locator(`#instances-table tr[data-holder="${h}"] td`).allTextContents());
    expect(await row('dash-inst-a')).toEqual(['dash-inst-a', '0.1.0', 'http, timer', expect.stringMatching(/ago$/), '0, 2', expect.any(String)]);
    expect(await row('dash-inst-z')).toEqual(['dash-inst-z', '0.0.9', 'http', expect.stringMatching(/^(59|6\d)\.\d s ago \(gone\)$/), '—', expect.any(String)]);
    expect(await page.getAttribute('#instances-table tr[data-holder="dash-inst-z"]', 'class')).toBe('gone');
    expect(await page.textContent('#instances-summary')).toMatch(/\b1 gone · live = a heartbeat within 15\.0 s/);
    await page.locator('#instances').screenshot({ path: path.join(IMG, 'dashboard-instances.png') });
  });

  it('search by idempotency key, open the intent: payload redacted until asked, attempt log', async () => {
    await page.fill('#search-key', 'dash-fail-1');
    await page.click('#btn-search');
    await page.waitForSelector('#search-table');
    expect(await page.locator('#search-table tr').count()).toBe(2);
    await page.click(`#search-table a[href="#/intent/${ids.fail}"]`);
    await page.waitForSelector('#intent-status');
    expect(await page.textContent('#intent-id')).toBe(ids.fail);
    expect(await page.textContent('#intent-status')).toBe('failed');
    expect(await page.textContent('#payload')).toMatch(/^payload: \d+ bytes \(redacted\)/);
    expect(await page.textContent('#intent-page')).not.toContain('Z-9');
    await page.click('#btn-payload');
    await page.waitForSelector('pre#payload');
    expect(JSON.parse((await page.textContent('pre#payload'))!)).toEqual({ order: 100, mode: 'fail', sku: 'Z-9' });
    expect(await page.locator('#attempts-table tr').count()).toBe(2);
  });

  it('redrive the failed intent through the confirmation step and see it succeed', async () => {
    healed = true;
    await page.click('#btn-redrive');
    await page.waitForSelector('dialog#confirm[open]');
    await page.screenshot({ path: path.join(IMG, 'dashboard-confirm.png') });
    await page.click('#confirm-ok');
    await page.waitForSelector('#result:not([hidden])');
    expect(await page.textContent('#result')).toMatch(/HTTP 200 — 1 redriven/);
    await waitFor('the redriven intent succeeded', async () => {
      await page.evaluate(() => window.dispatchEvent(new HashChangeEvent('hashchange')));
      await page.waitForSelector('#intent-status');
      return (await page.textContent('#intent-status')) === 'succeeded';
    }, 20_000, 300);
    expect(await page.locator('#attempts-table tr').count()).toBe(3); // attempts 1 (failed) and 2 (succeeded)
    expect(await page.textContent('#attempts-table')).toMatch(/permanent_error[\s\S]*succeeded/);
    expect(await page.textContent('#intent-page')).toMatch(/by admin@.* after 1 attempts/);
    await page.screenshot({ path: path.join(IMG, 'dashboard-intent.png'), fullPage: true });
  });

  it('pause and resume with a reason, each confirmed', async () => {
    await page.goto(`${host.api}/dashboard?code=${KEY}#/`);
    await page.waitForSelector('#btn-pause');
    await page.click('#btn-pause');
    await page.fill('#confirm-input', 'browser test');
    await page.click('#confirm-ok');
    await page.waitForFunction(() => document.querySelector('#paused-flag')?.textContent === 'PAUSED');
    const control = await (await fetch(`${host.api}/ops/execution?code=${KEY}`)).json() as { paused: boolean; reason: string };
    expect(control).toMatchObject({ paused: true, reason: 'browser test' });
    expect(await page.textContent('#execution')).toContain('browser test');
    await page.click('#btn-resume');
    await page.click('#confirm-ok');
    await page.waitForFunction(() => document.querySelector('#paused-flag')?.textContent === 'running');
    expect((await (await fetch(`${host.api}/ops/execution?code=${KEY}`)).json() as { paused: boolean }).paused).toBe(false);
    // Partition 0's own flag (what an earlier release's pause wrote) holds too: shown, and Resume lifts it.
    expect((await fetch(`${host.api}/ops/execution/pause?partition=0&code=${KEY}`, { method: 'POST' })).status).toBe(200);
    await page.goto(`${host.api}/dashboard?code=${KEY}#/`);
    await page.waitForFunction(() => document.querySelector('#paused-flag')?.textContent === 'PAUSED (partition 0)');
    expect(await page.locator('#btn-resume').count()).toBe(1);
    await page.click('#btn-resume');
    await page.click('#confirm-ok');
    await page.waitForFunction(() => document.querySelector('#paused-flag')?.textContent === 'running');
    expect(await (await fetch(`${host.api}/ops/execution?code=${KEY}`)).json()).toMatchObject({ paused: false, running: true, stillHeld: [] });
    // Drain: recorded in SQL (202 from any instance); the leader releases and a new epoch leads.
    const epoch = Number(await page.textContent('#leader-epoch'));
    await page.click('#btn-drain');
    await page.click('#confirm-ok');
    await page.waitForFunction(() => /HTTP 202 — status pending/.test(document.querySelector('#result')?.textContent ?? ''));
    await page.waitForFunction((e) => Number(document.querySelector('#leader-epoch')?.textContent) > e, epoch, { timeout: 30_000 });
    await page.waitForFunction(() => /last completed/.test(document.querySelector('#handovers')?.textContent ?? ''), undefined, { timeout: 15_000 });
    // A cancelled confirmation does nothing.
    await page.click('#btn-pause');
    await page.click('dialog#confirm button.secondary');
    expect((await (await fetch(`${host.api}/ops/execution?code=${KEY}`)).json() as { paused: boolean }).paused).toBe(false);
  });
});
