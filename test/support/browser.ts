// Where the dashboard's browser test finds a browser: BROWSER_PATH if set (it must exist), else the first of the
// usual Debian/Ubuntu/Chrome locations (BROWSER_SEARCH_PATHS, ':'-separated, replaces that list). None → the test
// is skipped locally with one line, and FAILS under CI=true (the PostgreSQL server's policy, test/support/pgServer.ts).
import { accessSync, constants } from 'node:fs';
import type { Browser, Page } from 'playwright-core';

export const DEFAULT_BROWSER_PATHS = [
  '/usr/bin/chromium', '/usr/bin/chromium-browser', '/usr/bin/google-chrome', '/usr/bin/google-chrome-stable',
  '/opt/google/chrome/chrome', '/snap/bin/chromium', '/Applications/Google Chrome.app/Contents/MacOS/Google Chrome',
];

export const GET_A_BROWSER = 'apt-get install -y chromium, or set BROWSER_PATH=<a Chromium or Chrome binary>';

const executable = (p: string) => {
  try {
    accessSync(p, constants.X_OK);
    return true;
  } catch {
    return false;
  }
};

export interface BrowserLookup {
  path: string | null;
  /** Why there is none (empty when found). */
  problem: string;
  /** BROWSER_PATH names a file that is not there: a mistake to report, never a skip. */
  misconfigured: boolean;
}

export function findBrowser(env: NodeJS.ProcessEnv = process.env): BrowserLookup {
  const explicit = env.BROWSER_PATH?.trim();
  if (explicit) {
    return executable(explicit) ? { path: explicit, problem: '', misconfigured: false }
      : { path: null, problem: `BROWSER_PATH=${explicit} is not an executable file`, misconfigured: true };
  }
  const candidates = env.BROWSER_SEARCH_PATHS !== undefined ? env.BROWSER_SEARCH_PATHS.split(':').filter(Boolean) : DEFAULT_BROWSER_PATHS;
  const found = candidates.find(executable);
  return found ? { path: found, problem: '', misconfigured: false }
    : { path: null, problem: `no browser (BROWSER_PATH unset; none at ${candidates.join(', ') || '(empty search list)'})`, misconfigured: false };
}

/** Headless Chromium (or Chrome) at `executablePath` and one 1400 × 1000 page: the dashboard tests' window. */
export async function launchDashboardPage(executablePath: string): Promise<{ browser: Browser; page: Page }> {
  const { chromium } = await import('playwright-core');
  const browser = await chromium.launch({ executablePath, args: ['--headless', '--no-sandbox', '--disable-gpu', '--disable-background-networking'] });
  return { browser, page: await browser.newPage({ viewport: { width: 1400, height: 1000 } }) };
}
