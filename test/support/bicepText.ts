// Bicep read as text for test/unit/infra*.test.ts (no Bicep compiler is obtainable here: docs/deploy.md):
// comments and string contents blanked, params, decorators, references, blocks, outputs, app settings.
import { readdirSync, readFileSync, statSync } from 'node:fs';
import { join } from 'node:path';
import { projectRoot } from './projectRoot.js';

export const root = projectRoot(import.meta.url);
export const read = (rel: string): string => readFileSync(join(root, rel), 'utf8');

export function walk(rel: string): string[] {
  return readdirSync(join(root, rel)).flatMap((entry) => {
    const path = join(rel, entry);
    return statSync(join(root, path)).isDirectory() ? walk(path) : [path.split('\\').join('/')];
  });
}

export const infraFiles = walk('infra');
export const bicepFiles = infraFiles.filter((f) => f.endsWith('.bicep'));

/** Bicep source with comments removed and string literal text blanked (interpolated expressions kept,
 *  their `${`/`}` delimiters blanked), so identifiers and braces can be found without false hits.
 *  Line structure and offsets are preserved. */
export function codeOnly(src: string): string {
  let out = '';
  const stack: Array<'str' | 'interp' | 'brace'> = [];
  for (let i = 0; i < src.length; ) {
    const c = src[i]!;
    const top = stack[stack.length - 1];
    if (top === 'str') {
      if (c === '\\') { out += src[i + 1] === '\n' ? ' \n' : '  '; i += 2; continue; }
      if (c === "'") { stack.pop(); out += c; i++; continue; }
      if (c === '$' && src[i + 1] === '{') { stack.push('interp'); out += '  '; i += 2; continue; }
      out += c === '\n' ? '\n' : ' '; i++; continue;
    }
    if (c === '/' && src[i + 1] === '/') {
      while (i < src.length && src[i] !== '\n') { out += ' '; i++; }
      continue;
    }
    if (c === "'") { stack.push('str'); out += c; i++; continue; }
    if (c === '{') stack.push('brace');
    if (c === '}' && top === 'interp') { stack.pop(); out += ' '; i++; continue; }
    if (c === '}' && top === 'brace') stack.pop();
    out += c; i++;
  }
  return out;
}

export interface Param { name: string; line: number; hasDefault: boolean }

export function paramsOf(src: string): Param[] {
  return codeOnly(src).split('\n').flatMap((text, line) => {
    const m = /^param\s+([A-Za-z_]\w*)\s+[^=]+?(\s*=.*)?$/.exec(text.trimEnd());
    return m ? [{ name: m[1]!, line, hasDefault: m[2] !== undefined }] : [];
  });
}

/** Lines of the decorator block directly above a declaration (contiguous, no blank line in between). */
export function decoratorBlock(src: string, declLine: number): string {
  const code = codeOnly(src).split('\n');
  const original = src.split('\n');
  let start = declLine;
  while (start > 0) {
    const prev = code[start - 1]!;
    if (prev.trim() === '' || prev === '}' || /^[A-Za-z]/.test(prev)) break;
    start--;
  }
  return original.slice(start, declLine).join('\n');
}

/** References to `name` as an identifier: not a property access, object key or declaration name. */
export function referencesTo(code: string, name: string): number {
  let count = 0;
  for (const m of code.matchAll(new RegExp(`\\b${name}\\b`, 'g'))) {
    const before = code.slice(0, m.index);
    const after = code.slice(m.index + name.length);
    if (/\.\s*$/.test(before)) continue;
    if (/(^|\n|[{,])[ \t]*$/.test(before) && /^\s*:/.test(after)) continue;
    if (/(^|\n)(param|var|output|resource|module|type|func)\s+$/.test(before)) continue;
    count++;
  }
  return count;
}

/** The `{ ... }` block that starts at the first `{` at or after `from` (offsets into codeOnly text). */
export function blockAt(code: string, from: number): string {
  const open = code.indexOf('{', from);
  let depth = 0;
  for (let i = open; i < code.length; i++) {
    if (code[i] === '{') depth++;
    if (code[i] === '}' && --depth === 0) return code.slice(open + 1, i);
  }
  throw new Error('unbalanced braces');
}

/** Keys at the top level of an object body. */
export function topLevelKeys(body: string): string[] {
  const keys: string[] = [];
  let depth = 0;
  for (const line of body.split('\n')) {
    const m = /^\s*([A-Za-z_]\w*)\s*:/.exec(line);
    if (m && depth === 0) keys.push(m[1]!);
    for (const c of line) {
      if (c === '{' || c === '[' || c === '(') depth++;
      if (c === '}' || c === ']' || c === ')') depth--;
    }
  }
  return keys;
}

export const outputsOf = (src: string): string[] =>
  [...codeOnly(src).matchAll(/^output\s+([A-Za-z_]\w*)\s/gm)].map((m) => m[1]!);

/** App setting names declared in api.bicep as `{ name: 'X', value: ... }` / `name: 'X'` entries. */
export function appSettingNames(): string[] {
  const api = read('infra/app/api.bicep');
  const settings = /appSettings:\s*(?:concat\(\s*)?\[([\s\S]*?)\n\s*\]/.exec(api);
  if (!settings) throw new Error('infra/app/api.bicep: no siteConfig.appSettings array');
  return [...settings[1]!.matchAll(/\bname:\s*'([^']+)'/g)].map((m) => m[1]!);
}

/** api.bicep's per-engine database settings: `var databaseSettings = { <engine>: [ { name: 'X', … } … ] … }`. */
export function databaseSettingNames(): Record<string, string[]> {
  const api = read('infra/app/api.bicep');
  const code = codeOnly(api);
  const at = code.search(/^var databaseSettings = \{/m);
  if (at < 0) throw new Error('infra/app/api.bicep: no `var databaseSettings = { … }`');
  const body = blockAt(api, at);
  return Object.fromEntries(topLevelKeys(codeOnly(body)).map((engine) => {
    const list = new RegExp(`^\\s*${engine}:\\s*\\[([\\s\\S]*?)\\n\\s*\\]`, 'm').exec(body)!;
    return [engine, [...list[1]!.matchAll(/\bname:\s*'([^']+)'/g)].map((m) => m[1]!)];
  }));
}
