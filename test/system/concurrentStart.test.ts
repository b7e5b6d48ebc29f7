// Three `npm start` at once in one checkout (the README's multi-process recipe, one per shell) all come up. Each
// `npm start` builds dist/ first; scripts/build.mjs lets one build while the others wait, then skip the build, so
// no process loads dist/ while another rewrites it. A temporary copy of the checkout, with its sources touched so
// that a build is due, and the real `npm start` of its package.json.
import { spawn, type ChildProcess } from 'node:child_process';
import { cpSync, rmSync, symlinkSync, utimesSync } from 'node:fs';
import path from 'node:path';
import { afterEach, describe, expect, inject, it } from 'vitest';
import { settingsSchema } from '../../src/configSchema.js';
import { LOCAL_SETTING_NAMES } from '../../src/local/localSettings.js';
import { createPgDatabase, FAST_ENV, ROOT, tmpDir, type PgTestDatabase } from '../support/localHostProcess.js';

const sleep = (ms: number) => new Promise((r) => setTimeout(r, ms));
const NOT_COPIED = new Set(['node_modules', 'dist', '.data', '.git', 'coverage']);

interface Started { child: ChildProcess; out: string; api: Promise<string> }

function npmStart(cwd: string, env: Record<string, string>): Started {
  const clean: Record<string, string | undefined> = { ...process.env };
  for (const k of [...Object.keys(settingsSchema.shape), ...LOCAL_SETTING_NAMES]) delete clean[k];
  // npm_execpath: the npm running `npm test`; else the one on PATH. Own process group: npm, sh, node are stopped together.
  const [cmd, args] = clean.npm_execpath ? [process.execPath, [clean.npm_execpath, 'start']] : ['npm', ['start']];
  const child = spawn(cmd, args, { cwd, env: { ...clean, ...env }, stdio: ['ignore', 'pipe', 'pipe'], detached: true });
  const s: Started = { child, out: '', api: Promise.resolve('') };
  s.api = new Promise((resolve, reject) => {
    const onData = (d: Buffer) => {
      s.out += d.toString();
      const m = /listening on (http:\/\/127\.0\.0\.1:\d+\/api)/.exec(s.out);
      if (m) resolve(m[1]!);
    };
    child.stdout!.on('data', onData);
    child.stderr!.on('data', onData);
    child.on('exit', (code) => reject(new Error(`npm start exited (${code}) before listening:\n${s.out.slice(-3000)}`)));
  });
  return s;
}

describe('three `npm start` at once in one checkout', () => {
  const skip = inject('pgUnavailable');
  const started: Started[] = [];
  let db: PgTestDatabase | undefined;
  let copy = '';
  const stopAll = async () => {
    for (const s of started.splice(0)) {
      if (s.child.exitCode !== null || s.child.signalCode !== null) continue;
      const gone = new Promise((r) => s.child.on('exit', r));
      process.kill(-s.child.pid!, 'SIGKILL');
      await gone;
    }
  };
  afterEach(async () => {
    await stopAll();
    await db?.drop();
    if (copy) rmSync(copy, { recursive: true, force: true });
  });

  it('all three build-or-wait, come up and serve (started together, and 300 / 600 ms apart)', async (t) => {
    if (skip) return t.skip(skip);
    copy = tmpDir('checkout');
    cpSync(ROOT, copy, { recursive: true, filter: (src) => !NOT_COPIED.has(path.relative(ROOT, src).split(path.sep)[0]!) });
    symlinkSync(path.join(ROOT, 'node_modules'), path.join(copy, 'node_modules'));
    db = await createPgDatabase();
    const env = { ...FAST_ENV, DATABASE_URL: db.url, INSTANCES: '1' };
    // Staggered starts make one process load dist/ while another's build would be rewriting it.
    for (const apartMs of [0, 300, 600]) {
      const now = new Date();
      utimesSync(path.join(copy, 'tsconfig.json'), now, now); // a build is due
      const round: Started[] = [];
      for (let i = 1; i <= 3; i++) {
        round.push(npmStart(copy, { ...env, HOLDER_ID: `start${apartMs}-${i}` }));
        await sleep(apartMs);
      }
      started.push(...round);
      const apis = await Promise.all(round.map((s) => s.api));
      for (const api of apis) expect((await fetch(`${api}/healthz`)).status).toBe(200);
      expect(round.every((s) => s.child.exitCode === null)).toBe(true);
      await stopAll();
    }
  }, 180_000);
});
