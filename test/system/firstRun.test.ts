// The README's test command on a new user's machine: vitest on the dashboard's browser tests in a child process,
// with the usual browser locations hidden (BROWSER_SEARCH_PATHS) or no database server. Locally the file
// passes (skipped) with one line naming BROWSER_PATH; under CI=true a missing browser fails the run. The dashboard
// tests are the only ones that drive a browser (checked below), so what holds for it holds for the whole suite.
import { spawn } from 'node:child_process';
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { describe, expect, it } from 'vitest';
import { findBrowser } from '../support/browser.js';
import { ROOT } from '../support/localHostProcess.js';

const NOWHERE = '/nonexistent/chromium:/nonexistent/google-chrome';

/** What drives or names a browser: a playwright import, the browser the global setup found, a browser binary. */
const USES_BROWSER = /['"](playwright[\w/-]*|puppeteer[\w/-]*)['"]|inject\(\s*['"]browserPath|findBrowser\(|chromium(-browser)?['"]|google-chrome/;
/** The dashboard's browser tests (one partition, and four: issue 25). */
const DASHBOARD_TESTS = ['test/system/dashboard.test.ts', 'test/system/dashboardPartitions.test.ts'];
/** The files allowed to: the dashboard tests, the lookup and the global setup that runs it, and this file. */
const MAY_USE_BROWSER = [...DASHBOARD_TESTS, 'test/support/browser.ts', 'test/support/globalSetup.ts', 'test/system/firstRun.test.ts'];

/** `vitest run` of the dashboard tests as `npm test` runs them, without this run's vitest and CI settings. */
function vitestDashboard(env: Record<string, string>): Promise<{ code: number | null; out: string }> {
  const clean = Object.fromEntries(Object.entries(process.env)
    .filter(([k]) => !k.startsWith('VITEST') && !['CI', 'BROWSER_PATH', 'BROWSER_SEARCH_PATHS', 'NODE_ENV', 'TEST'].includes(k)));
  const child = spawn(process.execPath, [path.join(ROOT, 'node_modules/vitest/vitest.mjs'), 'run', ...DASHBOARD_TESTS],
    { cwd: ROOT, env: { ...clean, NO_COLOR: '1', ...env }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, out })));
}

describe('npm test on a machine without a browser', () => {
  it('finds a browser by BROWSER_PATH, else along the search list', () => {
    expect(findBrowser({ BROWSER_SEARCH_PATHS: `/nonexistent/chromium:${process.execPath}` }).path).toBe(process.execPath);
    expect(findBrowser({ BROWSER_PATH: process.execPath, BROWSER_SEARCH_PATHS: NOWHERE }).path).toBe(process.execPath);
    expect(findBrowser({ BROWSER_SEARCH_PATHS: NOWHERE })).toMatchObject({ path: null, misconfigured: false });
    expect(findBrowser({ BROWSER_PATH: '/nonexistent/chrome' })).toMatchObject({ path: null, misconfigured: true });
  });

  it('only the dashboard tests drive a browser: without one, every other file of npm test runs as before', () => {
    const files = ['src', 'test', 'bench', 'functions', 'scripts'].flatMap((dir) => {
      try {
        return readdirSync(path.join(ROOT, dir), { recursive: true, withFileTypes: true })
          .filter((e) => e.isFile() && /\.(ts|mjs|js)$/.test(e.name)).map((e) => path.relative(ROOT, path.join(e.parentPath, e.name)));
      } catch {
        return [];
      }
    });
    expect(files).toContain('test/system/dashboard.test.ts');
    const users = files.filter((f) => USES_BROWSER.test(readFileSync(path.join(ROOT, f), 'utf8')));
    expect(users.filter((f) => !MAY_USE_BROWSER.includes(f))).toEqual([]);
    for (const f of DASHBOARD_TESTS) expect(users).toContain(f);
  });

  it('locally: the dashboard tests are skipped and one line says how to get a browser, naming BROWSER_PATH', async () => {
    const r = await vitestDashboard({ BROWSER_SEARCH_PATHS: NOWHERE });
    expect(r.code, r.out).toBe(0);
    const lines = r.out.split('\n').filter((l) => l.includes('BROWSER_PATH'));
    expect(lines, r.out).toHaveLength(1);
    expect(lines[0]).toMatch(/skipped.*apt-get install -y chromium.*required under CI=true/);
    expect(r.out).toMatch(/Tests\s+\d+ skipped/);
  }, 60_000);

  it('under CI=true a missing browser fails the run, naming BROWSER_PATH', async () => {
    const r = await vitestDashboard({ BROWSER_SEARCH_PATHS: NOWHERE, CI: 'true' });
    expect(r.code, r.out).not.toBe(0);
    expect(r.out).toMatch(/required when CI=true.*BROWSER_PATH/);
  }, 60_000);

  it('a BROWSER_PATH that does not exist is a mistake, not a skip', async () => {
    const r = await vitestDashboard({ BROWSER_PATH: '/nonexistent/chrome' });
    expect(r.code, r.out).not.toBe(0);
    expect(r.out).toContain('BROWSER_PATH=/nonexistent/chrome is not an executable file');
  }, 60_000);

  it('without database servers (locally) the dashboard tests are skipped, not failed', async () => {
    const r = await vitestDashboard({ BROWSER_PATH: process.execPath, PG_TEST_ADMIN_URL: 'postgres://postgres@127.0.0.1:1/postgres',
      MYSQL_TEST_URL: 'mysql://root@127.0.0.1:1/test' });
    expect(r.code, r.out).toBe(0);
    expect(r.out).toMatch(/PostgreSQL server not reachable/);
    expect(r.out).toMatch(/MySQL\/MariaDB server not reachable/);
    expect(r.out).toMatch(/Tests\s+\d+ skipped/);
  }, 60_000);
});
