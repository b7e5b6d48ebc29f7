import { defineConfig } from 'vitest/config';
import SlowestFirst from './test/support/sequencer.js';

// Files that need a module cache of their own: @azure/functions loaded after installFunctionsCore(), and
// @azure/identity, whose managed-identity credential keeps process-wide state between files.
const FRESH_MODULES = [
  'test/functions/**/*.test.ts', 'test/unit/telemetryPreload.test.ts',
  'test/unit/azureDatabase.test.ts', 'test/system/entraTokensPostgres.test.ts', 'test/system/entraTokensMysql.test.ts',
];

export default defineConfig({
  test: {
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores: the suite is CPU-bound (PGlite, spawned processes); a third file at once saved 4 % of the wall time.
    maxWorkers: 2,
    // The slowest files first, so both workers finish together (test/support/sequencer.ts).
    sequence: { sequencer: SlowestFirst },
    reporters: ['default'],
    projects: [
      // One worker process runs file after file with the modules it already loaded (no per-file reload of the app
      // and drivers: about a third less CPU). Every file builds its own stores, servers and databases and closes them.
      // The global setup (databases, browser, PGlite template) runs once, in this project: the other needs none of it.
      { extends: true, test: { name: 'shared', include: ['test/**/*.test.ts'], exclude: FRESH_MODULES, isolate: false,
        globalSetup: ['test/support/globalSetup.ts'] } },
      { extends: true, test: { name: 'fresh', include: FRESH_MODULES, isolate: true } },
    ],
  },
});
