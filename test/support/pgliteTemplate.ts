// A fresh embedded PGlite for a test, started from a data directory made once per run by the global setup: PGlite's
// own start runs initdb inside WebAssembly (seconds of CPU, once per test file), a loaded template skips it. The
// database is the same empty cluster either way; without the template (a file run outside the suite's setup) it
// starts the slow way.
import { readFileSync, renameSync, writeFileSync } from 'node:fs';
import os from 'node:os';
import path from 'node:path';
import { inject } from 'vitest';
import { PGlite } from '@electric-sql/pglite';

/** Make the template file (global setup): an empty cluster's data directory as PGlite dumps it. */
export async function writePgliteTemplate(): Promise<string> {
  const file = path.join(os.tmpdir(), `submission-manager-pglite-template-${process.pid}.tar`);
  const lite = await PGlite.create();
  const dump = await lite.dumpDataDir('none');
  await lite.close();
  writeFileSync(`${file}.tmp`, Buffer.from(await dump.arrayBuffer()));
  renameSync(`${file}.tmp`, file);
  return file;
}

let template: Blob | null | undefined;

/** A new in-memory PGlite (from the run's template when there is one). */
export async function newPglite(): Promise<PGlite> {
  if (template === undefined) {
    const file = inject('pgliteTemplate');
    template = file ? new Blob([readFileSync(file)]) : null;
  }
  return template ? PGlite.create({ loadDataDir: template }) : PGlite.create();
}
