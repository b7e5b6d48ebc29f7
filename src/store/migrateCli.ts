// `npm run migrate`: apply the numbered migrations of the configured backend, idempotently, under the
// dialect's migration lock (two migrators at once serialise; neither fails).
import { loadConfig, ConfigError } from '../config.js';
import { openStores } from './open.js';
import { createLogger } from '../observability/logger.js';

async function main(): Promise<number> {
  let config;
  try {
    config = loadConfig();
  } catch (e) {
    if (e instanceof ConfigError) {
      console.error(`configuration error: ${e.message}`);
      return 2;
    }
    throw e;
  }
  const logger = createLogger(config.logLevel);
  const stores = await openStores(config.database, config, logger);
  try {
    const { applied } = await stores.migrate();
    console.log(applied.length ? `applied migrations: ${applied.join(', ')}` : 'database is up to date');
    return 0;
  } finally {
    await stores.close();
  }
}

main().then(
  (code) => process.exit(code),
  (e: unknown) => {
    console.error(`migration failed: ${(e as Error).message}`);
    process.exit(1);
  },
);
