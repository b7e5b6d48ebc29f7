import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/globalSetup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Two cores: PGlite startup is CPU-bound and system tests spawn processes.
    maxWorkers: 2,
    reporters: process.env.CI ? ['default'] : ['default'],
  },
});
