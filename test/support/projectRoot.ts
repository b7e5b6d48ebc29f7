// The project root (the nearest directory above with package.json), so test helpers find dist/ and the
// sources the same way whether they run from TypeScript (vitest) or compiled under dist/ (the campaign).
import { existsSync } from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';

export function projectRoot(moduleUrl: string): string {
  for (let dir = path.dirname(fileURLToPath(moduleUrl)); ; dir = path.dirname(dir)) {
    if (existsSync(path.join(dir, 'package.json'))) return dir;
    if (path.dirname(dir) === dir) throw new Error(`no package.json above ${fileURLToPath(moduleUrl)}`);
  }
}
