// Runs once before the suite: prepares the PostgreSQL test database, checks the MySQL/MariaDB server, and under
// CI=true insists on both.
import type { TestProject } from 'vitest/node';
import { readFileSync, rmSync } from 'node:fs';
import path from 'node:path';
import semver from 'semver';
import { findBrowser, GET_A_BROWSER } from './browser.js';
import { ensurePgTestDatabase, IN_CI } from './pgServer.js';
import { checkMysqlServer } from './mysqlServer.js';
import { projectRoot } from './projectRoot.js';
import { writePgliteTemplate } from './pgliteTemplate.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgUnavailable: string;
    /** The browser the dashboard test drives; empty → skipped (test/support/browser.ts). */
    browserPath: string;
    mysqlUnavailable: string;
    /** An empty PGlite cluster's data directory (test/support/pgliteTemplate.ts). */
    pgliteTemplate: string;
  }
}

/** The suite runs only on a Node that package.json declares: on Node 20 the SQL Server driver cannot connect
 *  (tedious needs Promise.withResolvers), so a pass there would say nothing. */
function requireSupportedNode(): void {
  const pkg = JSON.parse(readFileSync(path.join(projectRoot(import.meta.url), 'package.json'), 'utf8')) as { engines: { node: string } };
  if (semver.satisfies(process.versions.node, pkg.engines.node)) return;
  throw new Error(`Node ${process.versions.node} is not supported (package.json engines.node "${pkg.engines.node}"). ` +
    'Get Node 22 in seconds: npm install --prefix ~/.cache/node22 node@22 && PATH=~/.cache/node22/node_modules/node/bin:$PATH npm test');
}

export default async function setup(project: TestProject): Promise<() => void> {
  requireSupportedNode();
  const template = await writePgliteTemplate();
  project.provide('pgliteTemplate', template);
  const problem = await ensurePgTestDatabase();
  if (problem && IN_CI) throw new Error(`${problem} — the PostgreSQL suite is required when CI=true`);
  if (problem) console.warn(`[tests] ${problem}: PostgreSQL-server tests will be skipped (they are required under CI=true)`);
  project.provide('pgUnavailable', problem ?? '');
  const myProblem = await checkMysqlServer();
  if (myProblem && IN_CI) throw new Error(`${myProblem} — the MySQL/MariaDB suite is required when CI=true`);
  if (myProblem) console.warn(`[tests] ${myProblem}: MySQL/MariaDB tests will be skipped (they are required under CI=true)`);
  project.provide('mysqlUnavailable', myProblem ?? '');
  project.provide('browserPath', requireBrowserUnderCi());
  return () => rmSync(template, { force: true });
}

/** Same policy as the PostgreSQL server: skipped with one line locally, required under CI=true. */
function requireBrowserUnderCi(): string {
  const b = findBrowser();
  if (b.path) return b.path;
  if (b.misconfigured) throw new Error(`${b.problem}: ${GET_A_BROWSER}`);
  if (IN_CI) throw new Error(`${b.problem} — the dashboard's browser test is required when CI=true: ${GET_A_BROWSER}`);
  console.warn(`[tests] ${b.problem}: the dashboard's browser test will be skipped (${GET_A_BROWSER}; it is required under CI=true)`);
  return '';
}
