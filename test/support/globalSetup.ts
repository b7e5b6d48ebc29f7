// Runs once before the suite: prepares the PostgreSQL test database, and under CI=true insists on it.
import type { TestProject } from 'vitest/node';
import { ensurePgTestDatabase, IN_CI } from './pgServer.js';

declare module 'vitest' {
  export interface ProvidedContext {
    pgUnavailable: string;
  }
}

export default async function setup(project: TestProject): Promise<void> {
  const problem = await ensurePgTestDatabase();
  if (problem && IN_CI) throw new Error(`${problem} — the PostgreSQL suite is required when CI=true`);
  if (problem) console.warn(`[tests] ${problem}: PostgreSQL-server tests will be skipped (they are required under CI=true)`);
  project.provide('pgUnavailable', problem ?? '');
}
