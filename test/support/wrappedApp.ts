// An app on stores whose execution port a test wraps, to stage a failure or hold a reply at an exact point (the
// order is pinned by promises the test controls, not by timing). One recording provider and one app per test,
// closed after it.
import { afterEach } from 'vitest';
import type { DialectContext, DialectHarness } from './dialects.js';
import { useDialectWithProvider } from './dialectFixture.js';
import type { RecordingProvider } from './recordingProvider.js';
import { testConfig } from './apps.js';
import { createApp, type App } from '../../src/app.js';
import { silentLogger } from '../../src/observability/logger.js';
import type { ExecutionStore } from '../../src/store/intentPorts.js';
import type { Stores } from '../../src/store/stores.js';

/** `base`'s methods, except those in `overrides` (which may call `base` themselves). */
export function delegateExecution(base: ExecutionStore, overrides: Partial<ExecutionStore>): ExecutionStore {
  return {
    rebuildStart: (g) => base.rebuildStart(g),
    loadScheduled: (a, l) => base.loadScheduled(a, l),
    refreshPage: (c, l, g) => base.refreshPage(c, l, g),
    fencedRecoverOrphans: (t) => base.fencedRecoverOrphans(t),
    fencedStartAttempts: (t, r) => base.fencedStartAttempts(t, r),
    fencedCompleteAttempts: (t, c) => base.fencedCompleteAttempts(t, c),
    ...overrides,
  };
}

export interface WrappedAppFixture {
  readonly ctx: DialectContext;
  readonly provider: RecordingProvider;
  /** Opens stores (pool 4) and an app (migrated already, silent) with `wrap(base)` as its execution port. */
  open(wrap: (base: ExecutionStore) => ExecutionStore, env?: Record<string, string>): Promise<{ app: App; stores: Stores }>;
}

export function useWrappedApp(dialect: DialectHarness): WrappedAppFixture {
  let ctx: DialectContext | undefined;
  let provider: RecordingProvider | undefined;
  let app: App | null = null;
  let stores: Stores | null = null;
  useDialectWithProvider(dialect, (fresh, started) => {
    ctx = fresh;
    provider = started;
  });
  afterEach(async () => { // (before the fixture's: hooks run as a stack)
    await app?.close();
    await stores?.close();
    app = stores = null;
  });
  return {
    get ctx() { return ctx!; },
    get provider() { return provider!; },
    async open(wrap, env = {}) {
      stores = await ctx!.openStores({ poolMax: 4 });
      app = await createApp({ config: testConfig(provider!.url, env), stores: { ...stores, execution: wrap(stores.execution) },
        logger: silentLogger, migrate: false });
      return { app, stores };
    },
  };
}
