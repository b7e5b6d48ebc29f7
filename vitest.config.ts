import { defineConfig } from 'vitest/config';
import SlowestFirst from './test/support/sequencer.js';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/globalSetup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores: the suite is CPU-bound (PGlite, spawned processes); a third file at once saved 4 % of the wall time.
    maxWorkers: 2,
    // The slowest files first, so both workers finish together (test/support/sequencer.ts).
    sequence: { sequencer: SlowestFirst },
    reporters: process.env.CI ? ['default'] : ['default'],
  },
});
