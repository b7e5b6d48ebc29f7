// `npm run openapi`: write docs/openapi.json from the zod schemas (`--check`: exit 1 when the file is stale).
import { readFileSync, writeFileSync, mkdirSync } from 'node:fs';
import path from 'node:path';
import { renderOpenApiFile } from './document.js';

const target = path.resolve(process.cwd(), 'docs', 'openapi.json');
const want = renderOpenApiFile();
let have: string | null = null;
try {
  have = readFileSync(target, 'utf8');
} catch {
  have = null;
}
if (process.argv.includes('--check')) {
  if (have !== want) {
    console.error(`${path.relative(process.cwd(), target)} is stale: run npm run openapi`);
    process.exit(1);
  }
  console.log(`${path.relative(process.cwd(), target)} is up to date`);
} else if (have === want) {
  console.log(`${path.relative(process.cwd(), target)} is up to date`);
} else {
  mkdirSync(path.dirname(target), { recursive: true });
  writeFileSync(target, want);
  console.log(`wrote ${path.relative(process.cwd(), target)}`);
}
