// The release this build is: package.json's `version`, the one source for what the instances registry records,
// /api/healthz and the dashboard show, the OpenAPI document's info.version and the metrics meter's version.
// May import: nothing of ours (a leaf).
import { readFileSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

/** package.json's `version` (the first package.json above this file: src/ under the tests, dist/src/ when built, the
 *  deployed package on Azure), or `unknown` when none is readable. Read once. */
let version: string | null = null;
export function appVersion(): string {
  if (version !== null) return version;
  let dir = path.dirname(fileURLToPath(import.meta.url));
  for (let i = 0; i < 4 && version === null; i++, dir = path.dirname(dir)) {
    try {
      const pkg = JSON.parse(readFileSync(path.join(dir, 'package.json'), 'utf8')) as { version?: unknown };
      version = typeof pkg.version === 'string' ? pkg.version.slice(0, 64) : 'unknown';
    } catch {
      // no package.json here: one folder up
    }
  }
  return (version ??= 'unknown');
}
