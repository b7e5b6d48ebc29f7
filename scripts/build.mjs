#!/usr/bin/env node
// Builds dist/ with tsc for `npm start`, `npm test` and the other scripts, safely when several run at once in one
// checkout (three `npm start` in three shells): one build at a time (lock dir dist/.build-lock, taken over when the
// process holding it is gone); `--if-stale` skips the build when dist/ was built from the current sources; tsc
// emits into a scratch folder whose files are renamed into dist/ one by one, so a process loading dist/
// meanwhile reads each file whole (a rename is atomic); each source map's `sources` are rewritten on the way, as
// tsc wrote them relative to the scratch folder (one level deeper). Exit status: tsc's.
import { spawnSync } from 'node:child_process';
import { mkdirSync, readdirSync, readFileSync, renameSync, rmSync, statSync, writeFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));
const DIST = path.join(ROOT, 'dist');
const LOCK = path.join(DIST, '.build-lock');
const STAMP = path.join(DIST, '.build-stamp');
const LOCK_WAIT_MS = 10 * 60_000;

const sleep = (ms) => Atomics.wait(new Int32Array(new SharedArrayBuffer(4)), 0, 0, ms);
const files = (dir) => readdirSync(dir, { recursive: true, withFileTypes: true })
  .filter((e) => e.isFile()).map((e) => path.join(e.parentPath, e.name));

/** What the build reads: this script, tsconfig.json and the .ts files under its `include` folders; summed up as
 *  count + newest mtime. */
function inputs() {
  const config = path.join(ROOT, 'tsconfig.json');
  const roots = [...new Set(JSON.parse(readFileSync(config, 'utf8')).include.map((p) => p.split('/*')[0]))];
  const all = [fileURLToPath(import.meta.url), config, ...roots.flatMap((r) => { try { return files(path.join(ROOT, r)); } catch { return []; } }).filter((f) => f.endsWith('.ts'))];
  return `${all.length} ${Math.max(...all.map((f) => statSync(f).mtimeMs))}`;
}

function holderGone() {
  try {
    process.kill(Number(readFileSync(path.join(LOCK, 'pid'), 'utf8')), 0);
    return false;
  } catch (e) {
    if (e.code === 'EPERM') return false; // alive, another user's
    // No pid file yet: the holder is between mkdir and writing it, unless that was long ago.
    if (e.code === 'ENOENT') { try { return Date.now() - statSync(LOCK).mtimeMs > 30_000; } catch { return false; } }
    return true;
  }
}

function lock() {
  mkdirSync(DIST, { recursive: true });
  for (const deadline = Date.now() + LOCK_WAIT_MS; ;) {
    try {
      mkdirSync(LOCK);
      writeFileSync(path.join(LOCK, 'pid'), String(process.pid));
      return;
    } catch (e) {
      if (e.code !== 'EEXIST') throw e;
    }
    if (holderGone()) rmSync(LOCK, { recursive: true, force: true });
    else if (Date.now() > deadline) throw new Error(`build: ${LOCK} held for ${LOCK_WAIT_MS / 1000} s; remove it if no build is running`);
    else sleep(100);
  }
}

/** Moves one emitted file from the scratch folder to its place in dist/; a source map's `sources` are made relative
 *  to where the map will live, so stack traces (node --enable-source-maps) and vitest name the real .ts files. */
function place(from, to) {
  mkdirSync(path.dirname(to), { recursive: true });
  if (from.endsWith('.map')) {
    const map = JSON.parse(readFileSync(from, 'utf8'));
    const source = (s) => path.resolve(path.dirname(from), map.sourceRoot ?? '', s);
    map.sources = map.sources.map((s) => path.relative(path.dirname(to), source(s)).split(path.sep).join('/'));
    map.sourceRoot = '';
    writeFileSync(from, JSON.stringify(map));
  }
  renameSync(from, to);
}

function build() {
  const before = inputs();
  if (process.argv.includes('--if-stale')) {
    try { if (readFileSync(STAMP, 'utf8') === before) return 0; } catch { /* never built */ }
  }
  const scratch = path.join(DIST, `.build-${process.pid}`);
  rmSync(scratch, { recursive: true, force: true });
  const r = spawnSync(process.execPath, [path.join(ROOT, 'node_modules/typescript/bin/tsc'), '-p', 'tsconfig.json', '--outDir', scratch],
    { cwd: ROOT, stdio: 'inherit' });
  // tsc emits even with type errors (as a plain `tsc` would into dist/); only a clean build is stamped.
  for (const f of files(scratch)) place(f, path.join(DIST, path.relative(scratch, f)));
  rmSync(scratch, { recursive: true, force: true });
  if (r.status === 0) writeFileSync(STAMP, before);
  else rmSync(STAMP, { force: true });
  return r.status ?? 1;
}

lock();
let status = 1;
try {
  status = build();
} finally {
  rmSync(LOCK, { recursive: true, force: true });
}
process.exit(status);
