// The previous release, built from git history for the upgrade tests: the commit test/support/previousRelease.json
// names is extracted (git archive) into a cache folder outside the checkout, given node_modules (a link to this
// checkout's when its package-lock.json is the same apart from the version, else its own `npm ci`), and built with its
// own scripts/build.mjs. The build is kept per commit (SM_RELEASE_CACHE, else ~/.cache/submission-manager/releases);
// a clone without the commit (a shallow one) fails with a message that says so.
import { spawn, spawnSync } from 'node:child_process';
import { existsSync, lstatSync, mkdirSync, mkdtempSync, readFileSync, realpathSync, renameSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { settingsSchema } from '../../src/configSchema.js';
import { LOCAL_SETTING_NAMES } from '../../src/local/localSettings.js';
import { ROOT } from './localHostProcess.js';

export interface PreviousRelease {
  version: string;
  commit: string;
  /** The built release: its package.json, dist/ and node_modules, as a checkout of that commit would have them. */
  root: string;
}

const DESCRIPTOR = 'test/support/previousRelease.json';
const BUILT = '.release-built';

function run(cmd: string, args: string[], cwd: string): { ok: boolean; out: string } {
  const r = spawnSync(cmd, args, { cwd, encoding: 'utf8', maxBuffer: 64 << 20 });
  return { ok: r.status === 0, out: `${r.stdout ?? ''}${r.stderr ?? ''}${r.error ? String(r.error) : ''}` };
}

/** The lock file without the project's own version: two releases with equal ones install the same packages. */
function lockWithoutVersion(root: string): string {
  const lock = JSON.parse(readFileSync(path.join(root, 'package-lock.json'), 'utf8')) as { version?: string; packages?: Record<string, { version?: string }> };
  delete lock.version;
  if (lock.packages?.['']) delete lock.packages[''].version;
  return JSON.stringify(lock);
}

/** node_modules for the release at `dir`: a link to this checkout's (re-pointed on every call: a cached build may
 *  outlive the clone that made it) when the lock files agree, else its own `npm ci`, done once. */
function provideModules(dir: string): void {
  const modules = path.join(dir, 'node_modules');
  if (lockWithoutVersion(dir) === lockWithoutVersion(ROOT)) {
    const link = `${modules}.${process.pid}`;
    rmSync(link, { force: true });
    symlinkSync(realpathSync(path.join(ROOT, 'node_modules')), link, 'dir');
    if (existsSync(modules) && !isLink(modules)) rmSync(modules, { recursive: true, force: true });
    renameSync(link, modules); // atomic: a reader sees the old link or the new one
    return;
  }
  if (existsSync(path.join(modules, '.release-installed'))) return;
  if (isLink(modules)) rmSync(modules);
  const r = run('npm', ['ci', '--no-audit', '--no-fund'], dir);
  if (!r.ok) throw new Error(`previous release: npm ci in ${dir} failed:\n${r.out.slice(-3000)}`);
  writeFileSync(path.join(modules, '.release-installed'), '');
}

function isLink(p: string): boolean {
  try {
    return lstatSync(p).isSymbolicLink();
  } catch {
    return false;
  }
}

/** Throws, saying why, unless `commit` is in the history of the clone at `root` (a shallow clone lacks it). */
export function requireCommit(root: string, version: string, commit: string): void {
  if (run('git', ['cat-file', '-e', `${commit}^{commit}`], root).ok) return;
  const shallow = run('git', ['rev-parse', '--is-shallow-repository'], root).out.trim() === 'true';
  throw new Error(`previous release ${version}: commit ${commit} (${DESCRIPTOR}) is not in this clone's history` +
    (shallow ? ' — a shallow clone: `git fetch --unshallow` (or clone without --depth)' : ' — fetch it, or correct the file'));
}

/** The previous release, built (once per commit; later calls reuse the cache). Throws with the reason when the commit
 *  is not in this clone or the release does not build. */
export function previousRelease(): PreviousRelease {
  const { version, commit } = JSON.parse(readFileSync(path.join(ROOT, DESCRIPTOR), 'utf8')) as { version: string; commit: string };
  requireCommit(ROOT, version, commit);
  const cache = process.env.SM_RELEASE_CACHE ?? path.join(process.env.XDG_CACHE_HOME ?? path.join(os.homedir(), '.cache'), 'submission-manager', 'releases');
  const root = path.join(cache, commit);
  if (!existsSync(path.join(root, BUILT))) {
    mkdirSync(cache, { recursive: true });
    const tmp = mkdtempSync(path.join(cache, `.${commit.slice(0, 12)}-`));
    try {
      const x = run('sh', ['-c', 'git -C "$1" archive --format=tar "$2" | tar -x -C "$3"', 'sh', ROOT, commit, tmp], ROOT);
      if (!x.ok) throw new Error(`previous release ${version}: git archive ${commit} failed:\n${x.out}`);
      provideModules(tmp);
      const b = run(process.execPath, ['scripts/build.mjs'], tmp);
      if (!b.ok) throw new Error(`previous release ${version} (${commit}) does not build:\n${b.out.slice(-3000)}`);
      writeFileSync(path.join(tmp, BUILT), `${version} ${commit}\n`);
      try {
        renameSync(tmp, root); // only whole builds appear under `root`
      } catch (e) {
        // Another run built it meanwhile (its hosts may be running from it): keep that one.
        if (!['ENOTEMPTY', 'EEXIST'].includes((e as NodeJS.ErrnoException).code ?? '')) throw e;
      }
    } finally {
      rmSync(tmp, { recursive: true, force: true });
    }
  }
  provideModules(root);
  return { version, commit, root };
}

/** `npm run migrate` of the release at `root` (this checkout by default) against `url`, as a process of its own;
 *  resolves with its exit code and output (asynchronous: the test's hosts keep being read meanwhile). */
export function runMigrate(url: string, root = ROOT): Promise<{ code: number | null; out: string }> {
  const env: Record<string, string | undefined> = { ...process.env };
  for (const k of [...Object.keys(settingsSchema.shape), ...LOCAL_SETTING_NAMES]) delete env[k];
  const child = spawn(process.execPath, [path.join(root, 'dist/src/store/migrateCli.js')], { cwd: root, env: { ...env, DATABASE_URL: url }, stdio: ['ignore', 'pipe', 'pipe'] });
  let out = '';
  child.stdout.setEncoding('utf8').on('data', (d: string) => (out += d));
  child.stderr.setEncoding('utf8').on('data', (d: string) => (out += d));
  return new Promise((resolve) => child.on('exit', (code) => resolve({ code, out })));
}
