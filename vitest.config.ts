import { defineConfig } from 'vitest/config';

export default defineConfig({
  test: {
    include: ['test/**/*.test.ts'],
    globalSetup: ['test/support/globalSetup.ts'],
    testTimeout: 60_000,
    hookTimeout: 60_000,
    pool: 'forks',
    // Three files at once on two cores: most of a system test's time is waiting (leases, ticks, processes), and the
    // tests judge order, counts and recorded times, not the clock, so a busier machine changes no verdict.
    maxWorkers: 3,
    reporters: process.env.CI ? ['default'] : ['default'],
  },
});
