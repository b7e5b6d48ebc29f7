// Source maps in dist/ name the real sources: a stack trace from the compiled code (node --enable-source-maps, as
// production runs it when asked to) points to a src/… file and a line that exist, and every map's sources exist
// (vitest warns "points to missing source files" otherwise). Real child process on the compiled dist/.
import { spawnSync } from 'node:child_process';
import { existsSync, readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { beforeAll, describe, expect, it } from 'vitest';
import { ensureBuilt, ROOT } from '../support/localHostProcess.js';

const PROBE = `
import { pathToFileURL } from 'node:url';
const { loadConfig } = await import(pathToFileURL(process.env.PROBE_ROOT + '/dist/src/config.js').href);
try { loadConfig({ LEASE_DURATION_MS: 'soon' }); } catch (e) { console.log(e.stack); }
`;

describe('source maps', () => {
  beforeAll(() => ensureBuilt(), 120_000);

  it('a stack trace through dist/ names the .ts file and the line that threw', () => {
    const r = spawnSync(process.execPath, ['--enable-source-maps', '--input-type=module', '-e', PROBE],
      { env: { ...process.env, PROBE_ROOT: ROOT }, encoding: 'utf8', timeout: 60_000 });
    expect(r.status, r.stderr).toBe(0);
    const frame = /\((\/[^()]+\.ts):(\d+):\d+\)/.exec(r.stdout.split('\n').find((l) => l.includes('loadConfig')) ?? '');
    expect(frame, r.stdout).not.toBeNull();
    const [, file, line] = frame!;
    expect(path.relative(ROOT, file!)).toBe(path.join('src', 'config.ts'));
    expect(readFileSync(file!, 'utf8').split('\n')[Number(line) - 1]).toContain('throw new ConfigError');
  });

  it('every map in dist/ names sources that exist', () => {
    const dist = path.join(ROOT, 'dist');
    const maps = readdirSync(dist, { recursive: true, encoding: 'utf8' }).filter((f) => f.endsWith('.js.map') && !f.startsWith('.'));
    expect(maps.length).toBeGreaterThan(50);
    const missing = maps.flatMap((m) => (JSON.parse(readFileSync(path.join(dist, m), 'utf8')) as { sources: string[] }).sources
      .map((s) => path.resolve(path.dirname(path.join(dist, m)), s)).filter((s) => !existsSync(s)));
    expect(missing).toEqual([]);
  });
});
