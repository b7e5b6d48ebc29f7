// What every test that invokes the registered functions starts from: the registry and @azure/functions as
// the compiled function files see them (dist/ — the same module instances, so the app scoping matches), a
// recording provider, a config with short timings on in-memory PGlite, and migrated stores.
import { createRequire } from 'node:module';
import type { Config } from '../../src/config.js';
import type { Registry } from '../../src/local/functionsCore.js';
import type { Stores } from '../../src/store/stores.js';
// @ts-ignore compiled output has no declarations
import { loadRegisteredFunctions } from '../../dist/src/local/functionsCore.js';
// @ts-ignore compiled output has no declarations
import { openStores } from '../../dist/src/store/open.js';
// @ts-ignore compiled output has no declarations
import { loadConfig } from '../../dist/src/config.js';
// @ts-ignore compiled output has no declarations
import { silentLogger } from '../../dist/src/observability/logger.js';
import { startRecordingProvider, type RecordingProvider } from './recordingProvider.js';

export interface FunctionsHarness {
  reg: Registry;
  azf: typeof import('@azure/functions');
  provider: RecordingProvider;
  base: Config;
  stores: Stores;
}

export async function openFunctionsHarness(): Promise<FunctionsHarness> {
  const reg = (await loadRegisteredFunctions(process.cwd())) as Registry;
  const azf = createRequire(import.meta.url)('@azure/functions') as typeof import('@azure/functions');
  const provider = await startRecordingProvider();
  const base = loadConfig({
    DATABASE_URL: 'pglite:', PROVIDER_URL: provider.url, LEASE_DURATION_MS: '5000', LEASE_RENEW_INTERVAL_MS: '1000', EXECUTOR_SCHEDULE: '*/1 * * * * *',
    EXECUTOR_TICK_BUDGET_MS: '500', PROVIDER_TIMEOUT_MS: '1000', COMMIT_GRACE_MS: '1500', DB_STATEMENT_TIMEOUT_MS: '1000',
  }) as Config;
  const stores = (await openStores(base.database, base, silentLogger)) as Stores;
  await stores.migrate();
  return { reg, azf, provider, base, stores };
}
