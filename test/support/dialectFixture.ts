// The per-test hooks every describe.each(dialects) suite needs, written once: skip when the dialect is not
// available (with its reason), a fresh context — own schema or database, migrated — before each test, and
// after it the suite's teardown followed by closing the context (also when the setup itself failed).
import { afterEach, beforeEach } from 'vitest';
import type { DialectContext, DialectHarness } from './dialects.js';
import type { Stores } from '../../src/store/stores.js';
import { startRecordingProvider, type RecordingProvider } from './recordingProvider.js';

/**
 * `setup(ctx)` runs before each test with the new context (assign the suite's variables there);
 * `teardown()` runs after each test, before the context is closed (stop providers, apps, …).
 */
export function useDialectContext(
  dialect: DialectHarness,
  setup: (ctx: DialectContext) => Promise<void> | void,
  teardown?: () => Promise<void> | void,
): void {
  const skip = dialect.unavailable();
  let ctx: DialectContext | undefined;
  beforeEach(async (t) => {
    if (skip) return t.skip(skip);
    ctx = await dialect.createContext();
    await setup(ctx);
  });
  afterEach(async () => {
    try {
      await teardown?.();
    } finally {
      await ctx?.close();
      ctx = undefined;
    }
  });
}

/**
 * useDialectContext for a store suite: `setup(ctx, stores)` gets the new context and stores opened on it before each
 * test; the returned `more(poolMax)` opens further stores on connections of their own (another instance), closed
 * after the test.
 */
export function useDialectStores(
  dialect: DialectHarness,
  setup: (ctx: DialectContext, stores: Stores) => void,
): (poolMax?: number) => Promise<Stores> {
  let ctx: DialectContext | undefined;
  const opened: Stores[] = [];
  useDialectContext(dialect, async (fresh) => {
    ctx = fresh;
    setup(fresh, await fresh.openStores());
  }, async () => {
    for (const x of opened.splice(0)) await x.close().catch(() => {});
  });
  return async (poolMax = 2) => {
    const x = await ctx!.openStores({ poolMax });
    opened.push(x);
    return x;
  };
}

/** useDialectContext plus a recording provider started before each test and closed after it. */
export function useDialectWithProvider(
  dialect: DialectHarness,
  setup: (ctx: DialectContext, provider: RecordingProvider) => Promise<void> | void,
): void {
  let provider: RecordingProvider | undefined;
  useDialectContext(dialect, async (ctx) => {
    provider = await startRecordingProvider();
    await setup(ctx, provider);
  }, async () => {
    await provider?.close();
    provider = undefined;
  });
}
