#!/usr/bin/env node
// The import graph of src/**/*.ts, checked against the floors of the code (test/unit/importGraph.test.ts keeps it
// true; `node scripts/importGraph.mjs` prints the report). A room is a folder right under src/ or a file at its top.
// Every import between rooms must be one ROOMS allows; floors follow from ROOMS (a room sits one floor above the
// highest room it imports), so allowed imports run down, except the few listed as up-floor exceptions.
// File-level import circles fail, type-only imports included (a type still ties the two files' designs).
import { readdirSync, readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export const ROOT = path.dirname(path.dirname(fileURLToPath(import.meta.url)));

/** Who may import whom. `up`: allowed imports that run up a floor (each with its reason); every other allowed
 *  import runs down. A leaf (`imports: []`) may be imported from anywhere. Keep each folder's README sentence in
 *  step: the test compares its "May import:" line (a top-level file's: in its header) with `imports` + `up`. */
export const ROOMS = {
  'version.ts': { imports: [] },
  'observability/': { imports: ['version.ts'] },
  'azureDatabase.ts': { imports: [] },
  'limits.ts': { imports: [] },
  'configSchema.ts': { imports: ['azureDatabase.ts', 'limits.ts'] },
  'config.ts': { imports: ['configSchema.ts', 'limits.ts', 'azureDatabase.ts', 'version.ts'] },
  'store/': { imports: ['limits.ts', 'config.ts', 'azureDatabase.ts', 'observability/'] },
  'lease/': { imports: ['config.ts', 'store/', 'observability/'] },
  'intents/': { imports: ['config.ts', 'store/', 'observability/'] },
  'schedule/': { imports: ['lease/', 'store/'] },
  'provider/': { imports: ['limits.ts', 'lease/', 'store/', 'observability/'] },
  'executor/': { imports: ['limits.ts', 'lease/', 'schedule/', 'provider/', 'store/', 'observability/'] },
  'instrument/': { imports: ['config.ts', 'lease/', 'provider/', 'store/', 'observability/'] },
  'http/': { imports: ['limits.ts', 'config.ts', 'intents/', 'lease/', 'store/', 'observability/'] },
  'appPartitions.ts': { imports: ['limits.ts', 'config.ts', 'intents/', 'lease/', 'executor/', 'provider/', 'store/', 'observability/', 'instrument/'] },
  'app.ts': { imports: ['appPartitions.ts', 'config.ts', 'lease/', 'executor/', 'provider/', 'store/', 'observability/', 'http/'] },
  'local/': { imports: ['app.ts', 'config.ts', 'configSchema.ts', 'provider/', 'store/', 'observability/'] },
};

/** Circles another issue removes; each entry is the sorted file list of one circle. Nothing else may join. */
export const KNOWN_CIRCLES = [];

/** Floors from the allowed imports (up-floor exceptions left out): leaves 0, else 1 + the highest room imported. */
export function floorsOf(rooms = ROOMS) {
  const floors = {};
  const visit = (room, trail) => {
    if (floors[room] !== undefined) return floors[room];
    if (trail.includes(room)) throw new Error(`the allowed imports run in a circle: ${[...trail, room].join(' → ')}`);
    const below = (rooms[room]?.imports ?? []).map((r) => visit(r, [...trail, room]));
    return (floors[room] = below.length === 0 ? 0 : 1 + Math.max(...below));
  };
  for (const room of Object.keys(rooms)) visit(room, []);
  return floors;
}

export function sourceFiles(root = ROOT) {
  return readdirSync(path.join(root, 'src'), { recursive: true, withFileTypes: true })
    .filter((e) => e.isFile() && e.name.endsWith('.ts') && !e.name.endsWith('.d.ts'))
    .map((e) => path.relative(root, path.join(e.parentPath, e.name)).split(path.sep).join('/'))
    .sort();
}

export function roomOf(file) {
  const parts = file.replace(/^src\//, '').split('/');
  return parts.length > 1 ? `${parts[0]}/` : parts[0];
}

/** The module specifiers a TypeScript file imports: static (type-only too), re-exports, side-effect and dynamic
 *  imports. Comments, strings, template literals and regular expressions are skipped, so text that only looks
 *  like an import is not counted. */
export function specifiersOf(text) {
  const tokens = tokenize(text);
  const out = [];
  let statement = null; // 'import' | 'export' while inside one, until `;` or the `from` string
  for (let i = 0; i < tokens.length; i++) {
    const t = tokens[i];
    const prev = tokens[i - 1];
    const afterDot = prev?.v === '.';
    if (t.k === 'id' && (t.v === 'import' || t.v === 'export') && !afterDot) {
      const next = tokens[i + 1];
      if (t.v === 'import' && next?.k === 'str') out.push(next.v); // import './x.js'
      else if (t.v === 'import' && next?.v === '(' && tokens[i + 2]?.k === 'str') out.push(tokens[i + 2].v); // import('./x.js')
      else statement = t.v;
    } else if (statement && t.k === 'id' && t.v === 'from' && tokens[i + 1]?.k === 'str') {
      out.push(tokens[i + 1].v);
      statement = null;
    } else if (t.v === ';') {
      statement = null;
    }
  }
  return out;
}

const REGEX_AFTER = new Set(['(', ',', '=', ':', '[', '!', '&', '|', '?', '{', '}', ';', '+', '-', '*', '%', '<', '>', '~', '^',
  'return', 'typeof', 'case', 'in', 'of', 'delete', 'void', 'throw', 'new', 'else', 'do', 'yield', 'await']);

function tokenize(src) {
  const tokens = [];
  const braces = []; // per open `{`: true when it opened a template's `${`
  let i = 0;
  const push = (k, v) => tokens.push({ k, v });
  const readTemplate = () => { // at the char after a backtick or a template's closing `}`
    while (i < src.length) {
      const c = src[i];
      if (c === '\\') { i += 2; continue; }
      if (c === '`') { i++; push('str', null); return; }
      if (c === '$' && src[i + 1] === '{') { i += 2; braces.push(true); return; }
      i++;
    }
  };
  while (i < src.length) {
    const c = src[i];
    if (c === '/' && src[i + 1] === '/') { while (i < src.length && src[i] !== '\n') i++; continue; }
    if (c === '/' && src[i + 1] === '*') { const end = src.indexOf('*/', i + 2); i = end < 0 ? src.length : end + 2; continue; }
    if (c === '"' || c === "'") {
      let j = i + 1;
      let v = '';
      while (j < src.length && src[j] !== c && src[j] !== '\n') { if (src[j] === '\\') { v += src[j + 1]; j += 2; } else v += src[j++]; }
      push('str', v);
      i = j + 1;
      continue;
    }
    if (c === '`') { i++; readTemplate(); continue; }
    if (c === '{') { braces.push(false); push('p', c); i++; continue; }
    if (c === '}') {
      if (braces.pop()) { i++; readTemplate(); continue; }
      push('p', c); i++; continue;
    }
    if (c === '/') {
      const prev = tokens[tokens.length - 1];
      if (!prev || REGEX_AFTER.has(prev.v)) { // a regular expression literal: skip it, classes included
        let j = i + 1;
        let inClass = false;
        while (j < src.length && src[j] !== '\n') {
          if (src[j] === '\\') { j += 2; continue; }
          if (src[j] === '[') inClass = true;
          else if (src[j] === ']') inClass = false;
          else if (src[j] === '/' && !inClass) break;
          j++;
        }
        i = j + 1;
        while (/[a-z]/i.test(src[i] ?? '')) i++;
        push('re', null);
        continue;
      }
    }
    if (/[A-Za-z_$]/.test(c)) {
      let j = i + 1;
      while (j < src.length && /[\w$]/.test(src[j])) j++;
      push('id', src.slice(i, j));
      i = j;
      continue;
    }
    if (/\s/.test(c)) { i++; continue; }
    if (/[0-9]/.test(c)) { let j = i + 1; while (j < src.length && /[\w.]/.test(src[j])) j++; push('num', src.slice(i, j)); i = j; continue; }
    push('p', c);
    i++;
  }
  return tokens;
}

/** Imports between files of src/: { from, to } (repository-relative .ts paths). */
export function importsOf(root = ROOT) {
  const edges = [];
  for (const from of sourceFiles(root)) {
    for (const spec of specifiersOf(readFileSync(path.join(root, from), 'utf8'))) {
      if (!spec.startsWith('.')) continue;
      const to = path.posix.normalize(path.posix.join(path.posix.dirname(from), spec)).replace(/\.js$/, '.ts');
      edges.push({ from, to });
    }
  }
  return edges;
}

/** File-level circles: each strongly connected set of two or more files (or a file importing itself), sorted. */
export function circlesOf(edges) {
  const next = new Map();
  for (const { from, to } of edges) {
    if (!next.has(from)) next.set(from, new Set());
    next.get(from).add(to);
  }
  // Tarjan's algorithm.
  let index = 0;
  const idx = new Map(), low = new Map(), stack = [], on = new Set(), out = [];
  const strong = (v) => {
    idx.set(v, index); low.set(v, index); index++;
    stack.push(v); on.add(v);
    for (const w of next.get(v) ?? []) {
      if (!idx.has(w)) { strong(w); low.set(v, Math.min(low.get(v), low.get(w))); }
      else if (on.has(w)) low.set(v, Math.min(low.get(v), idx.get(w)));
    }
    if (low.get(v) === idx.get(v)) {
      const set = [];
      let w;
      do { w = stack.pop(); on.delete(w); set.push(w); } while (w !== v);
      if (set.length > 1 || next.get(v)?.has(v)) out.push(set.sort());
    }
  };
  for (const v of [...next.keys()].sort()) if (!idx.has(v)) strong(v);
  return out.sort((a, b) => a[0].localeCompare(b[0]));
}

/** The rooms a room says it may import: the backquoted names after "May import:" up to the end of that paragraph
 *  ("nothing of ours": none), in a folder's README.md or a top-level file's header comment; null when missing. */
export function declaredImports(room, root = ROOT) {
  let text;
  try {
    text = readFileSync(path.join(root, 'src', room, room.endsWith('/') ? 'README.md' : ''), 'utf8');
  } catch {
    return null;
  }
  if (!room.endsWith('/')) text = (/^(?:\/\/.*\n)+/.exec(text)?.[0] ?? '').replace(/^\/\/ ?/gm, '');
  const m = /May import:([\s\S]*?)(?:\n\s*\n|$)/.exec(text);
  return m ? [...m[1].matchAll(/`([^`]+)`/g)].map((x) => x[1]) : null;
}

/** Everything the test asserts and the report prints. `roomOfFile` and `rooms` let a measurement map another
 *  layout (an older commit) onto these floors. */
export function analyse(root = ROOT, { rooms = ROOMS, roomOfFile = roomOf, knownCircles = KNOWN_CIRCLES } = {}) {
  const edges = importsOf(root);
  const floors = floorsOf(rooms);
  const circles = circlesOf(edges);
  const known = new Set(knownCircles.map((c) => c.join(' ')));
  const cross = edges.map((e) => ({ ...e, fromRoom: roomOfFile(e.from), toRoom: roomOfFile(e.to) })).filter((e) => e.fromRoom !== e.toRoom);
  const unknownRooms = [...new Set(cross.flatMap((e) => [e.fromRoom, e.toRoom]))].filter((r) => !(r in rooms)).sort();
  const allowed = (e) => [...(rooms[e.fromRoom]?.imports ?? []), ...(rooms[e.fromRoom]?.up ?? [])].includes(e.toRoom);
  const isUp = (e) => floors[e.toRoom] !== undefined && floors[e.fromRoom] !== undefined && floors[e.toRoom] > 0 && floors[e.toRoom] >= floors[e.fromRoom];
  return {
    files: sourceFiles(root).length,
    floors,
    circles,
    unknownCircles: circles.filter((c) => !known.has(c.join(' '))),
    staleKnownCircles: knownCircles.filter((c) => !circles.some((x) => x.join(' ') === c.join(' '))),
    unknownRooms,
    disallowed: cross.filter((e) => e.fromRoom in rooms && e.toRoom in rooms && !allowed(e)),
    // Allowed imports no file makes any more: the table (and the folder's sentence) should say so.
    unused: Object.entries(rooms).flatMap(([from, r]) => [...r.imports, ...(r.up ?? [])]
      .filter((to) => !cross.some((e) => e.fromRoom === from && e.toRoom === to)).map((to) => ({ from, to }))),
    upFloor: cross.filter(isUp),
  };
}

function report(a) {
  const lines = [`${a.files} files; floors (from ROOMS):`];
  const byFloor = {};
  for (const [room, f] of Object.entries(a.floors)) (byFloor[f] ??= []).push(room);
  for (const f of Object.keys(byFloor).sort((x, y) => y - x)) lines.push(`  ${f}: ${byFloor[f].join(' ')}`);
  lines.push(`import circles: ${a.circles.length}`, ...a.circles.map((c) => `  ${c.join(' ↔ ')}${a.unknownCircles.includes(c) ? '' : ' (known)'}`));
  lines.push(`up-floor imports: ${a.upFloor.length}`, ...a.upFloor.map((e) => `  ${e.from} → ${e.to}`));
  lines.push(`imports ROOMS does not allow: ${a.disallowed.length}`, ...a.disallowed.map((e) => `  ${e.from} → ${e.to}`));
  if (a.unused.length) lines.push(`allowed in ROOMS but unused: ${a.unused.map((e) => `${e.from} → ${e.to}`).join(', ')}`);
  if (a.unknownRooms.length) lines.push(`rooms missing from ROOMS: ${a.unknownRooms.join(' ')}`);
  return lines.join('\n');
}

if (process.argv[1] && path.resolve(process.argv[1]) === fileURLToPath(import.meta.url)) {
  const rootArg = process.argv.indexOf('--root');
  const a = analyse(rootArg > 0 ? path.resolve(process.argv[rootArg + 1]) : ROOT);
  console.log(report(a));
  const failed = a.unknownCircles.length + a.disallowed.length + a.unknownRooms.length + a.staleKnownCircles.length + a.unused.length;
  process.exit(failed ? 1 : 0);
}
